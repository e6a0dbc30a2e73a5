package main

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"kbisect/internal/simlab"
)

// TestHTMLReportsRenderTheirPlotsInChromium renders a run's and an A/B
// comparison's HTML report in headless Chromium and looks at the
// screenshots: the plots are drawn in their colours (verdict markers, the
// A and B bars), nothing is fetched. Heavy: KBISECT_E2E=1 (just
// e2e-html); needs apt-get install chromium. The screenshots stay in
// $KBISECT_E2E_OUT when it is set.
func TestHTMLReportsRenderTheirPlotsInChromium(t *testing.T) {
	if os.Getenv("KBISECT_E2E") == "" {
		t.Skip("headless Chromium: set KBISECT_E2E=1 (just e2e-html)")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("KBISECT_E2E=1 needs Chromium: apt-get install chromium")
	}
	out := os.Getenv("KBISECT_E2E_OUT")
	if out == "" {
		out = t.TempDir()
	}
	l := simLab(t, simlab.Options{Seed: 3, Commits: 120})
	ctx := context.Background()
	run, ab := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "ab")
	if code, _, stderr := runCLI(t, ctx, "run", "--job", l.JobFile, "--good", l.Tree.Good, "--bad", l.Tree.Bad, "--state", run); code != exitOK {
		t.Fatal(stderr)
	}
	if code, _, stderr := runCLI(t, ctx, "ab", "--job", l.JobFile, "--base", l.Tree.Bad, "--revert", l.Tree.Regression, "--rounds", "4", "--samples", "2", "--state", ab); code != exitOK {
		t.Fatal(stderr)
	}
	for _, c := range []struct {
		name, state string
		colours     map[string][3]uint8 // that the plots must show
	}{
		{"run", run, map[string][3]uint8{"good marker": {0x2e, 0x7d, 0x32}, "bad marker": {0xc6, 0x28, 0x28}, "A bars": {0x1f, 0x77, 0xb4}, "B bars": {0xff, 0x7f, 0x0e}}},
		{"ab", ab, map[string][3]uint8{"A bars": {0x1f, 0x77, 0xb4}, "B bars": {0xff, 0x7f, 0x0e}}},
	} {
		html := filepath.Join(out, c.name+".html")
		if code, _, stderr := runCLI(t, ctx, "report", "--state", c.state, "--format", "html", "-o", html); code != exitOK {
			t.Fatal(stderr)
		}
		shot := filepath.Join(out, c.name+".png")
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cmd := exec.CommandContext(cctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
			"--window-size=1200,2600", "--screenshot="+shot, "file://"+html)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		output, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, output)
		}
		f, err := os.Open(shot)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		counts := colourCounts(img, c.colours)
		for what, n := range counts {
			if n < 30 {
				t.Errorf("%s report: the screenshot shows %d pixels of the %s colour (%s)", c.name, n, what, shot)
			}
		}
		t.Logf("%s: %s, %v", c.name, shot, counts)
	}
}

// colourCounts counts the pixels near each colour.
func colourCounts(img image.Image, colours map[string][3]uint8) map[string]int {
	counts := map[string]int{}
	for what := range colours {
		counts[what] = 0
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for what, c := range colours {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(bl>>8, c[2]) {
					counts[what]++
				}
			}
		}
	}
	return counts
}

func near(v uint32, want uint8) bool {
	d := int(v) - int(want)
	return d > -12 && d < 12
}
