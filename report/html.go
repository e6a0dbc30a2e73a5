package report

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"

	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/verdict"
)

// page is what the HTML template shows: the document, and what is
// computed from it.
type page struct {
	*Document
	ResultClass string
	Threshold   string
	// The plots, written by this package with every text escaped; empty
	// when there is nothing to draw.
	Bisection, CPUs, Samples template.HTML
	// Glance and Culprit name the plot of tested commits and its
	// first bad one: a bisection's, or a machine's history of releases.
	Glance, Culprit string
	Rows            []row
	AB              *abView // shadows Document.AB in the template
}

// row is one tested commit in the table under the bisection plot: the
// plot's data, for those who cannot see it or want the numbers.
type row struct {
	Short, Commit, Subject, Verdict, Class string
	Endpoint, Culprit                      bool
	Median, Interval, Note                 string
	Samples                                int
}

// abView is the comparison's numbers, written for reading.
type abView struct {
	Conclusion, P, Shift, Interval, Confidence string
	Significant                                bool
	Sides                                      []sideView
}

type sideView struct {
	Name, Commit, Median, Range string
	Samples                     int
}

// WriteHTML writes d as one self-contained HTML file: styles and plots are
// inline and nothing is fetched, so the file can be mailed, attached to
// a CI run or opened on a lab machine without network.
func WriteHTML(w io.Writer, d *Document) error {
	if d == nil {
		return errors.New("report: no document")
	}
	p := page{Document: d, ResultClass: resultClass(d.Result), Glance: "Bisection at a glance", Culprit: "first bad commit"}
	if d.Kind == "history" {
		p.Glance, p.Culprit = "History at a glance", "first bad release of an incident"
	}
	m := d.Metric
	if m.HasThreshold {
		p.Threshold = m.Format(m.Threshold)
	}
	if len(d.Tested) > 0 {
		p.Bisection = template.HTML(bisectionPlot(d))
		for _, t := range d.Tested {
			r := row{
				Short: commitid.Short(t.Commit), Commit: t.Commit, Subject: t.Subject,
				Verdict: string(t.Verdict), Class: verdictClass(t.Verdict),
				Endpoint: t.Endpoint, Culprit: t.Culprit, Note: t.Note,
				Samples: len(t.Values),
			}
			if len(t.Values) > 0 {
				r.Median = m.Format(t.Median)
				r.Interval = m.Format(t.Low) + " – " + m.Format(t.High)
			}
			p.Rows = append(p.Rows, r)
		}
	}
	if ab := d.AB; ab != nil {
		if len(ab.A.PerCPU)+len(ab.B.PerCPU) > 0 {
			p.CPUs = template.HTML(cpuPlot(m, ab))
		}
		if len(ab.A.Values)+len(ab.B.Values) > 0 {
			p.Samples = template.HTML(samplesPlot(m, ab))
		}
		p.AB = newABView(m, ab)
	}
	if err := pageTemplate.Execute(w, p); err != nil {
		return fmt.Errorf("report: writing HTML: %w", err)
	}
	return nil
}

func newABView(m Metric, ab *AB) *abView {
	v := &abView{
		Conclusion:  ab.Conclusion,
		P:           formatP(ab.P),
		Shift:       m.Format(ab.Shift),
		Interval:    m.Format(ab.ShiftLow) + " – " + m.Format(ab.ShiftHigh),
		Confidence:  fixed(ab.Confidence*100, 1) + " %",
		Significant: ab.Significant,
	}
	for _, s := range []Side{ab.A, ab.B} {
		sv := sideView{Name: s.Name, Commit: s.Commit, Samples: len(s.Values)}
		if len(s.Values) > 0 {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, x := range s.Values {
				lo, hi = math.Min(lo, x), math.Max(hi, x)
			}
			sv.Median = m.Format(noise.Median(s.Values))
			sv.Range = m.Format(lo) + " – " + m.Format(hi)
		}
		v.Sides = append(v.Sides, sv)
	}
	return v
}

// formatP writes a p-value the way papers do: small ones as a bound,
// since digits beyond the third mean nothing.
func formatP(p float64) string {
	if p < 0.001 {
		return "< 0.001"
	}
	return "= " + significant(p)
}

// resultClass colours the result: a regression found (or kernels that
// differ) is red, none is green, anything unfinished is amber.
func resultClass(result string) string {
	switch result {
	case "found", "different", "regression", "still-present", "drift":
		return "bad"
	case "not-reproduced", "no-difference", "no-regression", "fixed", "nothing-new":
		return "good"
	}
	return "neutral"
}

func verdictClass(v verdict.Verdict) string {
	switch v {
	case verdict.Good, verdict.Bad:
		return string(v)
	}
	return "skip"
}

// pageTemplate is parsed once; Must only fails on a template that does
// not parse, which the tests catch.
var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #212121; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: 0.3em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #e0e0e0; }
h3 { font-size: 1em; }
pre, code { font-family: ui-monospace, monospace; font-size: 0.9em; }
pre { background: #f5f5f5; padding: 0.8em; overflow-x: auto; white-space: pre; }
.result { display: inline-block; padding: 0.2em 0.7em; border-radius: 0.3em; font-weight: bold; color: #ffffff; }
.result.bad { background: #c62828; }
.check-failed { color: #c62828; }
.result.good { background: #2e7d32; }
.result.neutral { background: #ef6c00; }
.summary p { margin: 0.2em 0; font-size: 1.05em; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; }
dd { margin: 0; }
.plot { overflow-x: auto; }
.plot svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { text-align: left; padding: 0.2em 0.6em; border-bottom: 1px solid #eeeeee; vertical-align: top; }
td.num { text-align: right; white-space: nowrap; }
td.good { color: #2e7d32; font-weight: bold; }
td.bad { color: #c62828; font-weight: bold; }
td.skip { color: #757575; }
tr.culprit { background: #ffebee; }
footer { margin-top: 3em; color: #757575; font-size: 0.9em; }
</style>
</head>
<body>
<header>
<h1>{{.Title}}</h1>
<p><span class="result {{.ResultClass}}">{{.Result}}</span></p>
{{with .Summary}}<div class="summary">{{range .}}<p>{{.}}</p>{{end}}</div>{{end}}
{{range .Checks}}{{if .Failure}}<p class="check-failed"><strong>{{.Name}}:</strong> {{.Failure}}</p>{{end}}{{end}}
</header>

<section>
<h2>Setup</h2>
<dl>
{{with .Machine}}<dt>Machine</dt><dd>{{.}}</dd>{{end}}
<dt>Metric</dt><dd>{{with .Metric.Label}}{{.}}{{else}}{{.Metric.Name}}{{end}}{{if .Metric.Label}} ({{.Metric.Name}}){{end}}, {{if .Metric.HigherIsBad}}higher{{else}}lower{{end}} is worse</dd>
{{with .Threshold}}<dt>Threshold</dt><dd>{{.}}</dd>{{end}}
</dl>
<h3>Command to reproduce</h3>
<pre><code>{{.Command}}</code></pre>
{{with .BootParams}}<h3>Boot parameters</h3>
<pre><code>{{.}}</code></pre>{{end}}
{{with .Config}}<h3>Kernel configuration</h3>
<pre><code>{{range .}}{{.}}
{{end}}</code></pre>{{end}}
</section>

{{if .Bisection}}<section>
<h2>{{.Glance}}</h2>
<div class="plot">{{.Bisection}}</div>
<table>
<thead><tr><th>#</th><th>commit</th><th>subject</th><th>verdict</th><th>median</th><th>interval</th><th>samples</th><th>note</th></tr></thead>
<tbody>
{{range $i, $r := .Rows}}<tr{{if $r.Culprit}} class="culprit"{{end}}><td class="num">{{$i}}</td><td><code title="{{$r.Commit}}">{{$r.Short}}</code></td><td>{{$r.Subject}}</td><td class="{{$r.Class}}">{{$r.Verdict}}{{if $r.Culprit}}, {{$.Culprit}}{{end}}{{if $r.Endpoint}}, endpoint{{end}}</td><td class="num">{{$r.Median}}</td><td class="num">{{$r.Interval}}</td><td class="num">{{$r.Samples}}</td><td>{{$r.Note}}</td></tr>
{{end}}</tbody>
</table>
</section>{{end}}

{{with .AB}}<section>
<h2>A/B comparison</h2>
{{with .Conclusion}}<p class="summary"><strong>{{.}}</strong></p>{{end}}
<dl>
<dt>Difference</dt><dd>{{if .Significant}}significant{{else}}not significant{{end}}, p {{.P}}</dd>
<dt>Shift (B − A)</dt><dd>{{.Shift}}, {{.Confidence}} confidence interval {{.Interval}}</dd>
</dl>
<table>
<thead><tr><th>kernel</th><th>commit</th><th>samples</th><th>median</th><th>range</th></tr></thead>
<tbody>
{{range .Sides}}<tr><td>{{.Name}}</td><td><code>{{.Commit}}</code></td><td class="num">{{.Samples}}</td><td class="num">{{.Median}}</td><td class="num">{{.Range}}</td></tr>
{{end}}</tbody>
</table>
</section>{{end}}

{{if .CPUs}}<section>
<h2>A/B per CPU</h2>
<div class="plot">{{.CPUs}}</div>
</section>{{end}}

{{if .Samples}}<section>
<h2>A/B samples</h2>
<div class="plot">{{.Samples}}</div>
</section>{{end}}

{{with .Text}}<section>
<h2>Full report</h2>
<pre>{{.}}</pre>
</section>{{end}}

<footer>Generated by kbisect{{with .Generated}} at {{.}}{{end}}.</footer>
</body>
</html>
`))
