package lab

import (
	"kbisect/noise"
	"kbisect/progress"
)

// Progress is the event as the progress stream carries it: the value
// formatted in its unit, the note as the event's text.
func (e Event) Progress() progress.Event {
	p := progress.Event{Kind: progress.Phase, Commit: e.Commit, Host: e.Host, Phase: string(e.Phase), Sample: e.Sample, Text: e.Note}
	if e.Phase == PhaseMeasure && e.Sample > 0 {
		p.Value = noise.FormatValue(e.Kind, e.Value)
	}
	return p
}
