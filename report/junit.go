package report

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"kbisect/internal/commitid"
	"kbisect/noise"
	"kbisect/verdict"
)

// The JUnit schema as CI systems (Jenkins, GitLab, GitHub test reporters)
// read it.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Failure   *junitOutcome `xml:"failure,omitempty"`
	Skipped   *junitOutcome `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitOutcome struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes d as JUnit XML so that CI shows a bisection as tests:
// each tested commit is a test case that fails when the commit is bad and
// is skipped when it could not be tested, and an A/B comparison adds a case
// per kernel and one for the comparison.
func WriteJUnit(w io.Writer, d *Document) error {
	if d == nil {
		return errors.New("report: no document")
	}
	s := junitSuite{
		Name:      strings.TrimSpace("kbisect " + d.Kind + " " + d.Machine),
		Hostname:  d.Machine,
		SystemOut: d.Text,
	}
	for _, p := range []junitProperty{
		{"title", d.Title}, {"result", d.Result}, {"command", d.Command},
		{"boot_params", d.BootParams}, {"metric", d.Metric.Name}, {"generated", d.Generated},
	} {
		if p.Value != "" {
			s.Properties = append(s.Properties, p)
		}
	}
	if d.Metric.HasThreshold {
		s.Properties = append(s.Properties, junitProperty{"threshold", d.Metric.Format(d.Metric.Threshold)})
	}
	for _, t := range d.Tested {
		s.Cases = append(s.Cases, testedCase(d.Metric, t))
	}
	if d.AB != nil {
		s.Cases = append(s.Cases, abCases(d.Metric, d.AB, d.Kind == "ab")...)
	}
	for _, c := range d.Checks {
		jc := junitCase{Classname: "kbisect.check", Name: c.Name, SystemOut: c.Detail}
		if c.Failure != "" {
			jc.Failure = &junitOutcome{Message: c.Failure, Type: "check", Body: c.Detail}
		}
		s.Cases = append(s.Cases, jc)
	}
	for _, c := range s.Cases {
		if c.Failure != nil {
			s.Failures++
		}
		if c.Skipped != nil {
			s.Skipped++
		}
	}
	s.Tests = len(s.Cases)
	all := junitSuites{
		Name: "kbisect", Tests: s.Tests, Failures: s.Failures, Skipped: s.Skipped,
		Suites: []junitSuite{s},
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("report: writing JUnit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return fmt.Errorf("report: writing JUnit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("report: writing JUnit: %w", err)
	}
	return nil
}

func testedCase(m Metric, t Tested) junitCase {
	c := junitCase{
		Classname: "kbisect.bisect",
		Name:      strings.TrimSpace(commitid.Short(t.Commit) + " " + t.Subject),
	}
	measured := measuredText(m, t)
	details := "commit " + t.Commit + "\n" + t.Subject + "\n" + measured
	if t.Note != "" {
		details += "\n" + t.Note
	}
	switch t.Verdict {
	case verdict.Bad:
		what, typ := "bad", "bad"
		if t.Culprit {
			what, typ = "first bad commit", "first-bad-commit"
		}
		msg := what + ": " + measured
		if t.Note != "" {
			msg += "; " + t.Note
		}
		c.Failure = &junitOutcome{Message: msg, Type: typ, Body: details}
	case verdict.Skip:
		msg := "skip"
		if t.Note != "" {
			msg += ": " + t.Note
		}
		c.Skipped = &junitOutcome{Message: msg}
		c.SystemOut = details
	default:
		c.SystemOut = details
	}
	return c
}

// measuredText is a commit's numbers in a line, with the threshold they
// were held against.
func measuredText(m Metric, t Tested) string {
	s := "no samples"
	if len(t.Values) > 0 {
		s = fmt.Sprintf("median %s (%s – %s) over %d samples", m.Format(t.Median), m.Format(t.Low), m.Format(t.High), len(t.Values))
	}
	if m.HasThreshold {
		s += ", threshold " + m.Format(m.Threshold)
	}
	return s
}

// abCases are a case per kernel, which passes and carries its numbers, and
// one for the comparison. Which direction is worse is not in the
// document (B may be the fix or the regression), so failing means "the
// kernels differ": that is the finding of an A/B run and a CI job asking
// "did this change the noise?" should go red on it. When the comparison
// only confirms a bisection (failOnDifference false) a difference is the
// expected outcome and the case passes; the bisection's cases carry the
// verdict.
func abCases(m Metric, ab *AB, failOnDifference bool) []junitCase {
	var cases []junitCase
	for _, s := range []Side{ab.A, ab.B} {
		out := "commit " + s.Commit + "\n"
		if len(s.Values) > 0 {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, v := range s.Values {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			out += fmt.Sprintf("median %s (%s – %s) over %d samples\n", m.Format(noise.Median(s.Values)), m.Format(lo), m.Format(hi), len(s.Values))
		}
		if len(s.PerCPU) > 0 {
			worst := s.PerCPU[0]
			for _, cv := range s.PerCPU[1:] {
				if m.HigherIsBad && cv.Value > worst.Value || !m.HigherIsBad && cv.Value < worst.Value {
					worst = cv
				}
			}
			out += fmt.Sprintf("worst CPU %d: %s\n", worst.CPU, m.Format(worst.Value))
		}
		cases = append(cases, junitCase{Classname: "kbisect.ab", Name: s.Name, SystemOut: out})
	}
	conclusion := ab.Conclusion
	if conclusion == "" {
		conclusion = "the kernels differ"
		if !ab.Significant {
			conclusion = "no difference found"
		}
	}
	numbers := fmt.Sprintf("p %s; shift B − A %s, %s confidence interval %s – %s",
		formatP(ab.P), m.Format(ab.Shift), fixed(ab.Confidence*100, 1)+" %", m.Format(ab.ShiftLow), m.Format(ab.ShiftHigh))
	c := junitCase{Classname: "kbisect.ab", Name: "comparison"}
	if ab.Significant && failOnDifference {
		c.Failure = &junitOutcome{Message: conclusion, Type: "different", Body: conclusion + "\n" + numbers}
	} else {
		c.SystemOut = conclusion + "\n" + numbers
	}
	return append(cases, c)
}
