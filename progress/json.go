package progress

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// JSONEvent is one event as NewJSON writes it, one object a line: what
// a dashboard or a CI step reads of a run while it goes. Fields that do
// not apply to an event are left out.
type JSONEvent struct {
	Time string `json:"time"` // RFC 3339, UTC
	// Kind is line, command, warning, note, testing, tested, phase or
	// done.
	Kind    string `json:"kind"`
	Commit  string `json:"commit,omitempty"`
	Subject string `json:"subject,omitempty"`
	Label   string `json:"label,omitempty"`
	Host    string `json:"host,omitempty"`
	// Phase is build, boot or measure; Sample and Value the samples so
	// far and the last one's, while measuring.
	Phase  string `json:"phase,omitempty"`
	Sample int    `json:"sample,omitempty"`
	Value  string `json:"value,omitempty"`
	// Boot is the search's boots so far as a step begins; Probability
	// the leading candidate's probability then.
	Boot        int     `json:"boot,omitempty"`
	Probability float64 `json:"probability,omitempty"`
	// Left and Estimate are git's numbers, for git's bisection.
	Left     int `json:"left,omitempty"`
	Estimate int `json:"estimate,omitempty"`
	// The search's forecast of its end, as a step begins: boots left
	// (this one included) and seconds, each the median and a range.
	BootsLeft   int     `json:"boots_left,omitempty"`
	BootsLow    int     `json:"boots_low,omitempty"`
	BootsHigh   int     `json:"boots_high,omitempty"`
	SecondsLeft float64 `json:"seconds_left,omitempty"`
	SecondsLow  float64 `json:"seconds_low,omitempty"`
	SecondsHigh float64 `json:"seconds_high,omitempty"`
	Verdict     string  `json:"verdict,omitempty"`
	// Seconds is how long a tested step took.
	Seconds float64 `json:"seconds,omitempty"`
	Text    string  `json:"text,omitempty"`
}

var kindNames = map[Kind]string{Line: "line", Command: "command", Warning: "warning", Note: "note", Testing: "testing", Tested: "tested", Phase: "phase", Done: "done"}

// JSON writes each event as one JSON object on a line (kbisect run
// --progress json).
type JSON struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// NewJSON is the JSON view on w.
func NewJSON(w io.Writer) *JSON { return &JSON{w: w, now: time.Now} }

// Emit writes one event.
func (j *JSON) Emit(e Event) {
	f := e.Step.Forecast
	out := JSONEvent{Kind: kindNames[e.Kind], Commit: e.Commit, Subject: e.Subject, Label: e.Label, Host: e.Host,
		Phase: e.Phase, Sample: e.Sample, Value: e.Value, Boot: e.Step.Boots, Probability: e.Step.Probability,
		Left: e.Step.Left, Estimate: e.Step.Estimate,
		BootsLeft: f.Boots, BootsLow: f.BootsLow, BootsHigh: f.BootsHigh, SecondsLeft: f.Seconds, SecondsLow: f.SecondsLow, SecondsHigh: f.SecondsHigh,
		Verdict: string(e.Verdict), Seconds: e.Elapsed.Seconds(), Text: e.Text}
	j.mu.Lock()
	defer j.mu.Unlock()
	out.Time = j.now().UTC().Format(time.RFC3339)
	b, err := json.Marshal(out)
	if err != nil {
		return // every field marshals
	}
	j.w.Write(append(b, '\n'))
}

// Lines is a writer whose every line is a Line event on a sink: where
// kbisect's own messages join a view that is not text (the JSON one).
func Lines(s Sink) io.Writer { return &lineWriter{s: s} }

type lineWriter struct {
	mu   sync.Mutex
	s    Sink
	part []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.s.Emit(Event{Kind: Line, Text: string(w.part[:i])})
		w.part = w.part[i+1:]
	}
}
