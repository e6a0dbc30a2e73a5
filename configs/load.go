package configs

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"reflect"
	"strings"
	"syscall"

	"kbisect/internal/usage"

	"go.yaml.in/yaml/v3"
)

// LoadOptions are what Load needs from its surroundings; the zero value
// uses the process's.
type LoadOptions struct {
	// Home replaces "~/" in paths; os.UserHomeDir when empty.
	Home string
	// LookupEnv tells which ${NAME} variables of commands are set;
	// os.LookupEnv when nil. Only whether, never the value, is used.
	LookupEnv func(string) (string, bool)
	// ReadFile reads the job file, its includes and config fragments;
	// when nil, readRegular reads regular files of at most maxFileSize.
	ReadFile func(string) ([]byte, error)
	// AllowDefaults accepts a kind: Defaults file, for checking it on its
	// own: its keys and values are decoded strictly, but nothing is
	// required of it (the jobs that include it are validated whole).
	AllowDefaults bool
}

func (o *LoadOptions) fill() {
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.ReadFile == nil {
		o.ReadFile = readRegular
	}
}

// maxFileSize bounds what Load reads: job files and fragments are small,
// and /dev/zero is not one.
const maxFileSize = 1 << 20

// readRegular reads a regular file of at most maxFileSize bytes, so that
// a device or a FIFO named by mistake is an error rather than a hang.
func readRegular(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("larger than %d bytes: not a job file", maxFileSize)
	}
	return data, nil
}

// maxIncludeDepth bounds include chains; cycles are caught before.
const maxIncludeDepth = 16

// maxNodes bounds the YAML nodes one load visits, so alias tricks
// ("billion laughs") cannot make it run forever.
const maxNodes = 200000

// Load reads a job file and the files it includes, decodes it strictly,
// fills defaults and validates it. On any error it returns *Errors with
// every problem found; warnings are in Job.Warnings (or Errors.Warnings).
func Load(path string, opt LoadOptions) (*Job, error) {
	opt.fill()
	l := &loader{
		opt:       opt,
		files:     map[*yaml.Node]string{},
		fileOrder: map[string]int{},
		nodeAt:    map[string]*yaml.Node{},
		nullAt:    map[string]Pos{},
		sources:   map[string][]string{},
		failed:    map[string]bool{},
		meant:     map[string]bool{},
	}
	job := &Job{File: path, pos: map[string]Pos{}, defaulted: map[string]bool{}}
	l.job = job
	root := l.readTree(path, KindJob, nil)
	if root != nil {
		l.decode(root, reflect.ValueOf(job).Elem(), "")
	}
	if root != nil && job.Kind == KindJob {
		// Validation runs after decoding errors too, so one pass shows
		// every problem; it stays quiet about keys that failed to decode.
		l.setDefaults()
		l.parseCPULists()
		l.validate()
	}
	sortDiagnostics(l.diags, l.fileOrder)
	var errs, warns []Diagnostic
	for _, d := range l.diags {
		if d.Warning {
			warns = append(warns, d)
		} else {
			errs = append(errs, d)
		}
	}
	job.Warnings = warns
	if len(errs) > 0 {
		return nil, &Errors{List: errs, Warnings: warns, All: l.diags}
	}
	return job, nil
}

// loader holds one Load's state.
type loader struct {
	opt       LoadOptions
	job       *Job
	files     map[*yaml.Node]string // node → file it came from
	fileOrder map[string]int
	stack     []string // absolute paths of the files being read (cycles)
	diags     []Diagnostic
	nodes     int                   // nodes visited, against maxNodes
	nodeAt    map[string]*yaml.Node // key → the node it was decoded from
	nullAt    map[string]Pos        // keys written with no value
	sources   map[string][]string   // lines of each file, for columns inside values
	cpuLists  []cpuList             // CPU lists to parse once machine.cpus is known
	// failed holds the keys whose value did not decode: validation says
	// nothing more about them, nor about keys that depend on them.
	failed map[string]bool
	// meant holds keys that a misspelt key or an unreadable include was
	// probably meant to set: they are not reported missing.
	meant      map[string]bool
	incomplete bool // an include could not be read
}

// nodeOf returns the node a key was decoded from, or nil.
func (l *loader) nodeOf(key string) *yaml.Node { return l.nodeAt[key] }

// badf reports a value that does not decode, and remembers its key.
func (l *loader) badf(p Pos, key, format string, args ...any) {
	if key != "" {
		l.failed[key] = true
	}
	l.diags = append(l.diags, Diagnostic{Pos: p, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// errorf reports a problem found by validation, unless it is about a key
// whose value did not decode (that error says it all).
func (l *loader) errorf(p Pos, key, format string, args ...any) {
	if !l.keyFailed(key) {
		l.diags = append(l.diags, Diagnostic{Pos: p, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
}

// warnf is errorf for warnings.
func (l *loader) warnf(p Pos, key, format string, args ...any) {
	if !l.keyFailed(key) {
		l.diags = append(l.diags, Diagnostic{Pos: p, Key: key, Msg: fmt.Sprintf(format, args...), Warning: true})
	}
}

// missingf reports a required key that no file sets, unless a misspelt
// key or an unreadable include probably sets it.
func (l *loader) missingf(key, format string, args ...any) {
	if !l.incomplete && !l.meant[key] {
		l.errorf(l.at(key), key, format, args...)
	}
}

// keyFailed reports whether key, a section holding it, or a key inside it
// failed to decode.
func (l *loader) keyFailed(key string) bool {
	if key == "" {
		return false
	}
	for k := range keyPath(key) {
		if l.failed[k] {
			return true
		}
	}
	for f := range l.failed {
		if strings.HasPrefix(f, key+".") || strings.HasPrefix(f, key+"[") {
			return true
		}
	}
	return false
}

// keyPath yields key, then each section that holds it, innermost first:
// build.fragments[1], build.fragments, build.
func keyPath(key string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := key; k != ""; {
			if !yield(k) {
				return
			}
			i := strings.LastIndexAny(k, ".[")
			if i < 0 {
				return
			}
			k = k[:i]
		}
	}
}

func (l *loader) pos(n *yaml.Node) Pos {
	return Pos{File: l.files[n], Line: n.Line, Col: n.Column}
}

// Open loads a job file for a command that goes on to use it: its
// warnings, and every problem when it has any, are written to w; a job
// file with problems is a usage error (the CLI exits 2).
func Open(path string, w io.Writer) (*Job, error) {
	job, err := Load(path, LoadOptions{})
	var ce *Errors
	if errors.As(err, &ce) {
		for _, d := range ce.All {
			fmt.Fprintln(w, d)
		}
		noun := "errors"
		if len(ce.List) == 1 {
			noun = "error"
		}
		return nil, usage.Errorf("%s: %d %s in the job file", path, len(ce.List), noun)
	}
	if err != nil {
		return nil, err
	}
	for _, d := range job.Warnings {
		fmt.Fprintln(w, d)
	}
	return job, nil
}
