package report

import (
	"encoding/xml"
	"fmt"
	"math"
	"sort"
	"strings"

	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/verdict"
)

// Colours of the plots: verdicts as a reader expects them, and the two
// kernels of an A/B comparison in a pair that colour-blind readers can
// tell apart.
const (
	colorGood    = "#2e7d32"
	colorBad     = "#c62828"
	colorSkip    = "#9e9e9e"
	colorCulprit = "#6a0000"
	colorA       = "#1f77b4"
	colorB       = "#ff7f0e"
	colorGrid    = "#e0e0e0"
	colorAxis    = "#424242"
)

// esc escapes text for SVG, which must be well-formed XML: markup
// characters become references and characters XML cannot hold become
// U+FFFD, so a commit subject can never break the document.
func esc(s string) string {
	var b strings.Builder
	// EscapeText only fails when its writer does; a Builder does not.
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// canvas is one SVG being written.
type canvas struct {
	b strings.Builder
}

// open starts the <svg>, with the title a screen reader announces.
func (c *canvas) open(id, title string, width, height float64) {
	c.printf(`<svg xmlns="http://www.w3.org/2000/svg" id="%s" role="img" aria-label="%s" viewBox="0 0 %s %s" width="%s" height="%s" font-family="system-ui, sans-serif" font-size="12">`,
		id, esc(title), num(width), num(height), num(width), num(height))
	c.printf("<title>%s</title>", esc(title))
	c.printf(`<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`, num(width), num(height))
}

func (c *canvas) close() string {
	c.b.WriteString("</svg>")
	return c.b.String()
}

func (c *canvas) printf(format string, args ...any) {
	fmt.Fprintf(&c.b, format, args...)
}

// text writes s (escaped) at x, y; extra holds further attributes.
func (c *canvas) text(x, y float64, s, extra string) {
	c.printf(`<text x="%s" y="%s" %s>%s</text>`, num(x), num(y), extra, esc(s))
}

func (c *canvas) line(x1, y1, x2, y2 float64, stroke string, width float64, extra string) {
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s" %s/>`,
		num(x1), num(y1), num(x2), num(y2), stroke, num(width), extra)
}

// num writes a coordinate to a tenth of a pixel, which is all a screen
// shows and keeps the file small.
func num(x float64) string {
	s := fmt.Sprintf("%.1f", x)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		s = "0"
	}
	return s
}

// yTicks draws horizontal grid lines and labels of a vertical axis whose
// plot area spans x0..x1.
func (c *canvas) yTicks(a axis, x0, x1 float64) {
	for _, t := range a.ticks() {
		y := a.pos(t)
		c.line(x0, y, x1, y, colorGrid, 1, "")
		c.text(x0-6, y+4, a.label(t), `text-anchor="end" fill="`+colorAxis+`"`)
	}
	c.line(x0, a.p0, x0, a.p1, colorAxis, 1, "")
}

// axisTitle names the metric along a vertical axis at x.
func (c *canvas) axisTitle(m Metric, a axis, x, yMid float64) {
	c.printf(`<text transform="translate(%s %s) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`,
		num(x), num(yMid), colorAxis, esc(metricTitle(m, a)))
}

// metricTitle is the axis title: the metric's label, and whether the axis
// is logarithmic, which a reader must know to read distances.
func metricTitle(m Metric, a axis) string {
	s := m.Label
	if s == "" {
		s = m.Name
	}
	if a.log {
		s += " (log scale)"
	}
	return s
}

// legend writes one swatch and label per entry, left to right from x at
// baseline y, and returns where it ended.
func (c *canvas) legend(x, y float64, entries []legendEntry) float64 {
	for _, e := range entries {
		c.b.WriteString(strings.ReplaceAll(strings.ReplaceAll(e.swatch, "{x}", num(x+6)), "{y}", num(y-4)))
		c.text(x+16, y, e.label, `fill="`+colorAxis+`"`)
		x += 28 + textWidth(e.label)
	}
	return x
}

// legendEntry is a swatch (SVG with {x}, {y} for its centre) and a label.
type legendEntry struct {
	swatch, label string
}

func dotSwatch(color string) string {
	return `<circle cx="{x}" cy="{y}" r="4.5" fill="` + color + `"/>`
}

// textWidth estimates how wide s is at 12 px, enough to lay out legends.
func textWidth(s string) float64 {
	return 6.5 * float64(len([]rune(s)))
}

// labelEvery is how many items share one label when n items are spread
// over width pixels and a label needs room pixels: 1, 2, 4, 5, 8, 10, 16 …
// so that labels of CPUs, often a power of two, fall on round numbers.
func labelEvery(n int, width, room float64) int {
	fit := max(1, int(width/room))
	need := (n + fit - 1) / fit
	for _, e := range []int{1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256} {
		if e >= need {
			return e
		}
	}
	return need
}

// bisectionPlot draws the tested commits in history order: each a median
// with its interval, coloured by verdict, against the threshold.
func bisectionPlot(d *Document) string {
	ts := d.Tested
	m := d.Metric
	const left, right, top, plotH, bottom = 90.0, 20.0, 40.0, 320.0, 100.0
	plotW := math.Max(660, float64(len(ts))*18)
	width, height := left+plotW+right, top+plotH+bottom
	var values []float64
	for _, t := range ts {
		if len(t.Values) > 0 {
			values = append(values, t.Median, t.Low, t.High)
		}
	}
	if m.HasThreshold {
		values = append(values, m.Threshold)
	}
	a := newAxis(m.Kind, values, false, top+plotH, top)

	var c canvas
	title, culprit := "Bisection at a glance: "+metricTitle(m, a)+" of each tested commit, oldest first", "first bad commit"
	if d.Kind == "history" {
		title, culprit = "History: "+metricTitle(m, a)+" of each release measured, oldest first", "first bad release"
	}
	c.open("plot-bisection", title, width, height)
	c.yTicks(a, left, left+plotW)
	c.axisTitle(m, a, 18, top+plotH/2)
	c.line(left, top+plotH, left+plotW, top+plotH, colorAxis, 1, "")
	c.legend(left, 20, []legendEntry{
		{dotSwatch(colorGood), "good"},
		{dotSwatch(colorBad), "bad"},
		{dotSwatch(colorSkip), "skip"},
		{squareSwatch(), "endpoint"},
		{`<circle cx="{x}" cy="{y}" r="6" fill="none" stroke="` + colorCulprit + `" stroke-width="2"/>`, culprit},
	})

	if m.HasThreshold {
		y := a.pos(m.Threshold)
		c.line(left, y, left+plotW, y, colorBad, 1.5, `stroke-dasharray="6 4"`)
	}

	slot := plotW / float64(max(len(ts), 1))
	every := labelEvery(len(ts), plotW, 18)
	for i, t := range ts {
		x := left + slot*(float64(i)+0.5)
		if i%every == 0 || t.Culprit {
			weight := ""
			if t.Culprit {
				weight = ` font-weight="bold"`
			}
			c.printf(`<text transform="translate(%s %s) rotate(-45)" text-anchor="end" font-family="ui-monospace, monospace" font-size="11" fill="%s"%s>%s</text>`,
				num(x+3), num(top+plotH+12), colorAxis, weight, esc(commitid.Short(t.Commit)))
		}
		c.printf("<g><title>%s</title>", esc(testedTooltip(m, t)))
		color := verdictColor(t.Verdict)
		if len(t.Values) == 0 {
			// Nothing was measured (the kernel did not build or boot):
			// a cross on the axis says it was tried.
			y := top + plotH
			c.line(x-4, y-4, x+4, y+4, color, 2, "")
			c.line(x-4, y+4, x+4, y-4, color, 2, "")
			c.b.WriteString("</g>")
			continue
		}
		yLo, yHi, yMed := a.pos(t.Low), a.pos(t.High), a.pos(t.Median)
		c.line(x, yLo, x, yHi, color, 2, "")
		c.line(x-3, yLo, x+3, yLo, color, 2, "")
		c.line(x-3, yHi, x+3, yHi, color, 2, "")
		if t.Endpoint {
			c.printf(`<rect x="%s" y="%s" width="9" height="9" fill="%s"/>`, num(x-4.5), num(yMed-4.5), color)
		} else {
			c.printf(`<circle cx="%s" cy="%s" r="4.5" fill="%s"/>`, num(x), num(yMed), color)
		}
		if t.Culprit {
			c.printf(`<circle cx="%s" cy="%s" r="9" fill="none" stroke="%s" stroke-width="2"/>`, num(x), num(yMed), colorCulprit)
			c.text(x, math.Min(yHi, yMed-9)-6, "first bad", `text-anchor="middle" font-weight="bold" fill="`+colorCulprit+`"`)
		}
		c.b.WriteString("</g>")
	}
	if m.HasThreshold {
		// After the points and with a halo, so intervals crossing the
		// line do not hide its value.
		c.text(left+plotW-4, a.pos(m.Threshold)-5, "threshold "+m.Format(m.Threshold),
			`text-anchor="end" fill="`+colorBad+`" stroke="#ffffff" stroke-width="3" paint-order="stroke"`)
	}
	c.text(left+plotW/2, height-6, "tested commits, oldest first", `text-anchor="middle" fill="`+colorAxis+`"`)
	return c.close()
}

// squareSwatch is the endpoint marker of the legend: its colour is the
// verdict's, so the swatch is neutral.
func squareSwatch() string {
	return `<rect x="{x}" y="{y}" width="9" height="9" transform="translate(-4.5 -4.5)" fill="` + colorAxis + `"/>`
}

func verdictColor(v verdict.Verdict) string {
	switch v {
	case verdict.Good:
		return colorGood
	case verdict.Bad:
		return colorBad
	}
	return colorSkip
}

// testedTooltip is what hovering a commit shows: everything the row of
// the table says.
func testedTooltip(m Metric, t Tested) string {
	s := commitid.Short(t.Commit) + " " + t.Subject + "\n" + string(t.Verdict)
	if t.Culprit {
		s += ", first bad commit"
	}
	if t.Endpoint {
		s += ", endpoint"
	}
	if len(t.Values) > 0 {
		s += fmt.Sprintf(": median %s (%s – %s), %d samples", m.Format(t.Median), m.Format(t.Low), m.Format(t.High), len(t.Values))
	}
	if t.Note != "" {
		s += "\n" + t.Note
	}
	return s
}

// cpuPlot draws each CPU's worst value on both kernels as bars side by side.
func cpuPlot(m Metric, ab *AB) string {
	byCPU := map[int][2]float64{}
	has := map[int][2]bool{}
	for k, side := range []Side{ab.A, ab.B} {
		for _, cv := range side.PerCPU {
			v, h := byCPU[cv.CPU], has[cv.CPU]
			v[k], h[k] = cv.Value, true
			byCPU[cv.CPU], has[cv.CPU] = v, h
		}
	}
	cpus := make([]int, 0, len(byCPU))
	var values []float64
	for cpu, v := range byCPU {
		cpus = append(cpus, cpu)
		for k := range v {
			if has[cpu][k] {
				values = append(values, v[k])
			}
		}
	}
	sort.Ints(cpus)

	const left, right, top, plotH, bottom = 90.0, 20.0, 60.0, 300.0, 50.0
	plotW := math.Max(660, float64(len(cpus))*10)
	width, height := left+plotW+right, top+plotH+bottom
	a := newAxis(m.Kind, values, true, top+plotH, top)

	var c canvas
	c.open("plot-ab-cpus", "A/B per CPU: worst "+metricTitle(m, a)+" of each CPU on both kernels", width, height)
	c.yTicks(a, left, left+plotW)
	c.axisTitle(m, a, 18, top+plotH/2)
	c.legend(left, 20, []legendEntry{{dotSwatch(colorA), ab.A.Name}})
	c.legend(left, 40, []legendEntry{{dotSwatch(colorB), ab.B.Name}})

	group := plotW / float64(max(len(cpus), 1))
	bar := group * 0.4
	base := a.base()
	every := labelEvery(len(cpus), plotW, 28)
	for i, cpu := range cpus {
		gx := left + group*float64(i)
		for k, side := range []Side{ab.A, ab.B} {
			if !has[cpu][k] {
				continue
			}
			v := byCPU[cpu][k]
			y := a.pos(v)
			x := gx + group*0.1 + bar*float64(k)
			color := colorA
			if k == 1 {
				color = colorB
			}
			c.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`,
				num(x), num(math.Min(y, base)), num(bar), num(math.Abs(base-y)), color,
				esc(fmt.Sprintf("CPU %d, %s: %s", cpu, side.Name, m.Format(v))))
		}
		if i%every == 0 {
			c.text(gx+group/2, top+plotH+16, fmt.Sprint(cpu), `text-anchor="middle" fill="`+colorAxis+`"`)
		}
	}
	c.line(left, base, left+plotW, base, colorAxis, 1, "")
	c.text(left+plotW/2, height-8, "CPU", `text-anchor="middle" fill="`+colorAxis+`"`)
	return c.close()
}

// samplesPlot draws every sample of both kernels as a dot on one shared
// axis, with each kernel's median, so overlap or separation shows at once.
func samplesPlot(m Metric, ab *AB) string {
	sides := []Side{ab.A, ab.B}
	colors := []string{colorA, colorB}
	var values []float64
	for _, s := range sides {
		values = append(values, s.Values...)
	}
	const left, right, top, labelH, bandH, bottom = 30.0, 30.0, 10.0, 22.0, 70.0, 60.0
	plotW := 800.0
	width := left + plotW + right
	height := top + 2*(labelH+bandH) + bottom
	a := newAxis(m.Kind, values, false, left, left+plotW)
	axisY := top + 2*(labelH+bandH)

	var c canvas
	c.open("plot-ab-samples", "A/B samples: "+metricTitle(m, a)+" of every sample on both kernels", width, height)
	for _, t := range a.ticks() {
		x := a.pos(t)
		c.line(x, top, x, axisY, colorGrid, 1, "")
		c.text(x, axisY+16, a.label(t), `text-anchor="middle" fill="`+colorAxis+`"`)
	}
	c.line(left, axisY, left+plotW, axisY, colorAxis, 1, "")
	c.text(left+plotW/2, height-12, metricTitle(m, a), `text-anchor="middle" fill="`+colorAxis+`"`)

	for k, s := range sides {
		y0 := top + float64(k)*(labelH+bandH)
		c.text(left, y0+15, s.Name, `font-weight="bold" fill="`+colors[k]+`"`)
		bandTop, mid := y0+labelH, y0+labelH+bandH/2
		if len(s.Values) == 0 {
			c.text(left, mid+4, "no samples", `fill="`+colorAxis+`"`)
			continue
		}
		for i, v := range s.Values {
			// The golden-ratio sequence spreads dots evenly over the band
			// and draws the same file every time.
			_, f := math.Modf(float64(i+1) * 0.6180339887498949)
			c.printf(`<circle cx="%s" cy="%s" r="3.5" fill="%s" fill-opacity="0.6"><title>%s</title></circle>`,
				num(a.pos(v)), num(mid+(f-0.5)*bandH*0.8), colors[k],
				esc(fmt.Sprintf("%s, sample %d: %s", s.Name, i+1, m.Format(v))))
		}
		med := noise.Median(s.Values)
		x := a.pos(med)
		c.line(x, bandTop, x, bandTop+bandH, colorAxis, 2, "")
		anchor, dx := "start", 4.0
		if x > left+plotW*0.75 {
			anchor, dx = "end", -4
		}
		c.text(x+dx, bandTop+10, "median "+m.Format(med), `text-anchor="`+anchor+`" fill="`+colorAxis+`"`)
	}
	return c.close()
}
