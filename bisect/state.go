package bisect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"kbisect/internal/atomicfile"
	"kbisect/verdict"
)

// LogVersion is the version of the session log format.
const LogVersion = 1

// Session log events.
const (
	EventStart       = "start"
	EventVerdict     = "verdict"
	EventAncestorsOK = "ancestors-ok"
	// EventRange restarts the bisection on another range (Bad, Good),
	// before any verdict of the new one: a good endpoint that measured
	// bad is the new bad, an older revision found good the new good.
	EventRange = "range"
)

// Record is one line of a session log.
type Record struct {
	V     int       `json:"v"`
	Event string    `json:"event"`
	Time  time.Time `json:"time"`

	// start: the range as resolved, the revisions as the user wrote them,
	// and what the driver needs to resume (e.g. the HEAD to restore).
	Bad         string            `json:"bad,omitempty"`
	Good        []string          `json:"good,omitempty"`
	BadRev      string            `json:"bad_rev,omitempty"`
	GoodRevs    []string          `json:"good_revs,omitempty"`
	FirstParent bool              `json:"first_parent,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`

	// verdict
	Commit   string          `json:"commit,omitempty"`
	Verdict  verdict.Verdict `json:"verdict,omitempty"`
	Seconds  float64         `json:"seconds,omitempty"`
	ExitCode *int            `json:"exit_code,omitempty"`
	Source   string          `json:"source,omitempty"` // "exec", "replay", …
	Note     string          `json:"note,omitempty"`
}

// StateLog is the append-only session log in a state directory. Every
// record is written and synced to disk before Append returns, so a run
// killed at any moment resumes without losing a verdict.
type StateLog struct {
	dir     string
	lock    *os.File
	f       *os.File // nil until the log has its first records
	records []Record
}

// LogName is the session log's file name in the state directory.
const LogName = "session.jsonl"

// OpenState opens (creating it if needed) the state directory dir, takes
// its lock, and returns its log and the records already in it. A torn last
// line, left by a crash in the middle of a write, is cut off.
func OpenState(dir string) (*StateLog, []Record, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("state directory: %w", err)
	}
	lock, err := lockState(dir)
	if err != nil {
		return nil, nil, err
	}
	l := &StateLog{dir: dir, lock: lock}
	// The lock held, no write is under way: a temporary file is one a
	// killed run left.
	if _, err := atomicfile.Sweep(dir, 0); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(dir, LogName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return l, nil, nil
	}
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("state directory: %w", err)
	}
	l.f = f
	data, err := io.ReadAll(f)
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	good := bytes.LastIndexByte(data, '\n') + 1
	records, err := decodeRecords(path, data[:good])
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	if good < len(data) {
		if err := f.Truncate(int64(good)); err != nil {
			l.Close()
			return nil, nil, fmt.Errorf("cut the torn last line of %s: %w", path, err)
		}
	}
	if _, err := f.Seek(int64(good), io.SeekStart); err != nil {
		l.Close()
		return nil, nil, err
	}
	l.records = records
	return l, records, nil
}

// ReadState reads the records of a state directory without taking its
// lock, for a report while a run is in flight: a last line being written
// is left out.
func ReadState(dir string) ([]Record, error) {
	path := filepath.Join(dir, LogName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	return decodeRecords(path, data[:bytes.LastIndexByte(data, '\n')+1])
}

// Init writes the first records of a new log at once: the file appears
// with all of them or not at all, so a start and the verdicts replayed
// with it cannot be separated by a crash.
func (l *StateLog) Init(records ...Record) error {
	if l.f != nil {
		return fmt.Errorf("session log in %s already started", l.dir)
	}
	var buf bytes.Buffer
	for i := range records {
		stamp(&records[i])
		b, err := json.Marshal(records[i])
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	path := filepath.Join(l.dir, LogName)
	if err := atomicfile.WriteFile(path, buf.Bytes()); err != nil {
		return fmt.Errorf("start session log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	l.f = f
	l.records = append(l.records, records...)
	return nil
}

func stamp(r *Record) {
	r.V = LogVersion
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
}

func decodeRecords(path string, data []byte) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: not a session record: %v", path, line, err)
		}
		if r.V != LogVersion {
			return nil, fmt.Errorf("%s:%d: session log version %d, this kbisect reads version %d", path, line, r.V, LogVersion)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Drop rewrites the log without the records drop picks, at once (the
// file holds the old log or the new one, never half of either), and
// returns those it left out.
func (l *StateLog) Drop(drop func(Record) bool) ([]Record, error) {
	var keep, dropped []Record
	for _, r := range l.records {
		if drop(r) {
			dropped = append(dropped, r)
		} else {
			keep = append(keep, r)
		}
	}
	if len(dropped) == 0 || l.f == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	for _, r := range keep {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		buf.Write(append(b, '\n'))
	}
	path := filepath.Join(l.dir, LogName)
	if err := atomicfile.WriteFile(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("rewrite session log: %w", err)
	}
	l.f.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		l.f = nil
		return nil, err
	}
	l.f, l.records = f, keep
	return dropped, nil
}

// Dir is the state directory.
func (l *StateLog) Dir() string { return l.dir }

// Append writes one record and syncs it to disk.
func (l *StateLog) Append(r Record) error {
	if l.f == nil {
		return l.Init(r)
	}
	stamp(&r)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("append to session log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync session log: %w", err)
	}
	l.records = append(l.records, r)
	return nil
}

// Records returns every record of the log, those read and those appended.
func (l *StateLog) Records() []Record { return l.records }

// Close closes the log and releases the state directory.
func (l *StateLog) Close() error {
	var err error
	if l.f != nil {
		err = l.f.Close()
	}
	if l.lock != nil {
		_ = syscall.Flock(int(l.lock.Fd()), syscall.LOCK_UN)
		if cerr := l.lock.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Restore rebuilds a session from its log: the start record, then every
// verdict in order.
func Restore(g *Graph, records []Record) (*Session, *Record, error) {
	if len(records) == 0 || records[0].Event != EventStart {
		return nil, nil, errors.New("session log does not begin with a start record")
	}
	start := records[0]
	// A session on the range of a start or range record.
	session := func(r Record, what string) (*Session, error) {
		bad, ok := parseHex(r.Bad)
		if !ok {
			return nil, fmt.Errorf("session log %s: bad commit %q is not a commit name", what, r.Bad)
		}
		goods, err := parseHashes(r.Good)
		if err != nil {
			return nil, err
		}
		return NewSession(g, bad, goods, start.FirstParent), nil
	}
	s, err := session(start, "start")
	if err != nil {
		return nil, nil, err
	}
	for i, r := range records[1:] {
		switch r.Event {
		case EventRange:
			if s, err = session(r, fmt.Sprintf("record %d", i+2)); err != nil {
				return nil, nil, err
			}
		case EventAncestorsOK:
			s.SetAncestorsChecked()
		case EventVerdict:
			h, ok := parseHex(r.Commit)
			if !ok {
				return nil, nil, fmt.Errorf("session log record %d: commit %q is not a commit name", i+2, r.Commit)
			}
			v, err := verdict.Parse(string(r.Verdict))
			if err != nil {
				return nil, nil, fmt.Errorf("session log record %d: %w", i+2, err)
			}
			if err := s.Mark(h, v); err != nil {
				return nil, nil, err
			}
			if r.Source == "test" {
				s.expected = h // the commit git would have checked out last
				// Resumed: like a later `git bisect run`, one process
				// computes every remaining step.
				s.freshStart = false
			}
		}
	}
	return s, &start, nil
}

func parseHashes(names []string) ([]plumbing.Hash, error) {
	out := make([]plumbing.Hash, 0, len(names))
	for _, n := range names {
		h, ok := parseHex(n)
		if !ok {
			return nil, fmt.Errorf("session log: %q is not a commit name", n)
		}
		out = append(out, h)
	}
	return out, nil
}

// StateRunning says whether a kbisect run holds the state directory's lock
// now: a run whose log has no answer and that nobody runs was stopped.
func StateRunning(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// lockState takes the lock of the state directory dir: one run per state
// directory, as two would interleave their verdicts.
func lockState(dir string) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("state directory %s is in use by another kbisect run", dir)
	}
	return lock, nil
}

// LockState makes the state directory dir if needed and takes its lock,
// for a state without a session log (kbisect ab's); unlock releases it.
// Under the lock no write is under way, so what a killed run left half
// written is swept.
func LockState(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	lock, err := lockState(dir)
	if err != nil {
		return nil, err
	}
	unlock = func() {
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	}
	if _, err := atomicfile.Sweep(dir, 0); err != nil {
		unlock()
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return unlock, nil
}
