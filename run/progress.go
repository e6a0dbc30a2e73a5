package run

import (
	"context"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/bisect"
	"kbisect/progress"
)

// events tells the caller's progress sink what the bisection and the lab
// do, each commit with its subject (and, in an A/B comparison, its label)
// so that a view needs no graph of its own.
type events struct {
	sink progress.Sink

	mu sync.Mutex
	g  *bisect.Graph // read under mu: the lab's events come from several goroutines
	// ctx is the run's, set with g: the git that reads a subject stops
	// when the run does (the progress interfaces carry no context).
	ctx      context.Context
	subjects map[string]string
	labels   map[string]string
}

func newEvents(sink progress.Sink) *events {
	if sink == nil {
		sink = progress.Discard
	}
	return &events{sink: sink, subjects: map[string]string{}}
}

// subject is a commit's subject line ("" when the graph cannot say).
func (e *events) subject(commit string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.subjects[commit]; ok || e.g == nil || e.ctx == nil {
		return s // no graph, or no run to read it for
	}
	s := ""
	if h, ok := bisect.ParseHash(commit); ok {
		if info, err := e.g.Info(e.ctx, h); err == nil {
			s = info.Subject
		}
	}
	e.subjects[commit] = s
	return s
}

// Emit passes the lab's events on with each commit's subject and label.
func (e *events) Emit(p progress.Event) {
	if p.Commit != "" && p.Kind == progress.Phase {
		p.Subject, p.Label = e.subject(p.Commit), e.labels[p.Commit]
	}
	e.sink.Emit(p)
}

func (e *events) line(format string, args ...any) { progress.Linef(e.sink, format, args...) }

func (e *events) done() { e.sink.Emit(progress.Event{Kind: progress.Done}) }

// Testing implements bisect.Progress.
func (e *events) Testing(step bisect.Step) {
	c := step.Commit.String()
	e.sink.Emit(progress.Event{Kind: progress.Testing, Commit: c, Subject: e.subject(c),
		Step: progress.Step{Left: step.Left, Estimate: step.Estimate, MergeBase: step.MergeBase}})
}

// Tested implements bisect.Progress.
func (e *events) Tested(commit plumbing.Hash, out bisect.Outcome, elapsed time.Duration) {
	e.sink.Emit(progress.Event{Kind: progress.Tested, Commit: commit.String(), Verdict: out.Verdict, Text: out.Note, Elapsed: elapsed})
}

// Warn implements bisect.Progress.
func (e *events) Warn(msg string) { e.sink.Emit(progress.Event{Kind: progress.Warning, Text: msg}) }

var (
	_ bisect.Progress = (*events)(nil)
	_ progress.Sink   = (*events)(nil)
)
