package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadOptions are what Load needs from its surroundings; the zero value
// uses the process's.
type LoadOptions struct {
	// Home replaces "~/" in paths; os.UserHomeDir when empty.
	Home string
	// LookupEnv tells which ${NAME} variables of commands are set;
	// os.LookupEnv when nil. Only whether, never the value, is used.
	LookupEnv func(string) (string, bool)
	// ReadFile reads the job file and its includes; os.ReadFile when nil.
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
		o.ReadFile = os.ReadFile
	}
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
	l := &loader{opt: opt, files: map[*yaml.Node]string{}, fileOrder: map[string]int{}, nodeAt: map[string]*yaml.Node{}, sources: map[string][]string{}}
	job := &Job{File: path, pos: map[string]Pos{}, defaulted: map[string]bool{}}
	l.job = job
	root := l.readTree(path, KindJob, nil)
	if root != nil {
		l.decode(root, reflect.ValueOf(job).Elem(), "")
	}
	if root != nil && job.Kind == KindJob {
		// Validation runs after decoding errors too, so one pass shows
		// every problem; it stays quiet about keys that failed to decode.
		l.validating = true
		l.setDefaults()
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
	opt        LoadOptions
	job        *Job
	files      map[*yaml.Node]string // node → file it came from
	fileOrder  map[string]int
	stack      []string // absolute paths of the files being read (cycles)
	diags      []Diagnostic
	nodes      int // nodes visited, against maxNodes
	nodeAt     map[string]*yaml.Node
	sources    map[string][]string // lines of each file, for columns inside values
	failed     []string            // keys that failed to decode
	validating bool
}

// nodeOf returns the node a key was decoded from, or nil.
func (l *loader) nodeOf(key string) *yaml.Node { return l.nodeAt[key] }

func (l *loader) errorf(p Pos, key, format string, args ...any) {
	l.report(Diagnostic{Pos: p, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) warnf(p Pos, key, format string, args ...any) {
	l.report(Diagnostic{Pos: p, Key: key, Msg: fmt.Sprintf(format, args...), Warning: true})
}

func (l *loader) report(d Diagnostic) {
	if !l.validating {
		if d.Key != "" {
			l.failed = append(l.failed, d.Key)
		}
	} else if l.underFailed(d.Key) {
		return // its value did not decode: that error says it all
	}
	l.diags = append(l.diags, d)
}

// underFailed reports whether key is, contains or lies under a key that
// failed to decode.
func (l *loader) underFailed(key string) bool {
	if key == "" {
		return false
	}
	for _, f := range l.failed {
		if f == "" || key == f || strings.HasPrefix(key, f+".") || strings.HasPrefix(key, f+"[") ||
			strings.HasPrefix(f, key+".") || strings.HasPrefix(f, key+"[") {
			return true
		}
	}
	return false
}

func (l *loader) hasErrors() bool {
	for _, d := range l.diags {
		if !d.Warning {
			return true
		}
	}
	return false
}

func (l *loader) pos(n *yaml.Node) Pos {
	return Pos{File: l.files[n], Line: n.Line, Col: n.Column}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// readTree reads one file, its includes first, and returns its root
// mapping merged over theirs without the header keys (apiVersion, kind,
// include), or nil after reporting why it cannot.
func (l *loader) readTree(file, kind string, via *yaml.Node) *yaml.Node {
	where := Pos{File: file}
	if via != nil {
		where = l.pos(via)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		abs = file
	}
	for i, f := range l.stack {
		if f == abs {
			chain := append(append([]string{}, l.stack[i:]...), abs)
			for j := range chain {
				chain[j] = filepath.Base(chain[j])
			}
			l.errorf(where, "include", "include cycle: %s", strings.Join(chain, " → "))
			return nil
		}
	}
	if len(l.stack) >= maxIncludeDepth {
		l.errorf(where, "include", "includes nest deeper than %d files", maxIncludeDepth)
		return nil
	}
	data, err := l.opt.ReadFile(file)
	if err != nil {
		if via != nil {
			l.errorf(where, "include", "cannot read %s: %v", file, unwrapPathError(err))
		} else {
			l.errorf(where, "", "cannot read the job file: %v", unwrapPathError(err))
		}
		return nil
	}
	if _, seen := l.fileOrder[file]; !seen {
		l.fileOrder[file] = len(l.fileOrder)
	}
	l.stack = append(l.stack, abs)
	defer func() { l.stack = l.stack[:len(l.stack)-1] }()

	root := l.parse(file, data)
	if root == nil {
		return nil
	}
	header := map[string]*yaml.Node{}
	body := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column}
	l.files[body] = file
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "apiVersion", "kind", "include":
			header[k.Value] = v
		default:
			body.Content = append(body.Content, k, v)
		}
	}
	if !l.checkHeader(file, root, header, kind) {
		return nil // not a kbisect/v1 file of this kind: its keys mean nothing
	}

	// Includes first, in order; each later one and then this file win.
	var base *yaml.Node
	for _, inc := range l.includes(header["include"]) {
		p := inc.Value
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		sub := l.readTree(p, KindDefaults, inc)
		if sub == nil {
			// Without the include, "missing" would be wrong about what
			// it sets: validation stays quiet, decoding errors remain.
			l.failed = append(l.failed, "")
			continue
		}
		base = l.merge(base, sub)
	}
	return l.merge(base, body)
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parse turns a file into its root mapping node, reporting syntax errors.
func (l *loader) parse(file string, data []byte) *yaml.Node {
	l.sources[file] = strings.Split(string(data), "\n")
	for i, line := range bytes.Split(data, []byte("\n")) {
		if ws := len(line) - len(bytes.TrimLeft(line, " \t")); bytes.IndexByte(line[:ws], '\t') >= 0 {
			l.errorf(Pos{file, i + 1, bytes.IndexByte(line, '\t') + 1}, "", "a tab in the indentation: YAML indents with spaces")
			return nil
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			l.errorf(Pos{File: file}, "", "the file is empty (a job file starts with apiVersion: %s and kind: %s)", APIVersion, KindJob)
			return nil
		}
		l.syntaxError(file, err)
		return nil
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil {
		l.errorf(Pos{file, second.Line, second.Column}, "", "a second YAML document: a job file holds one (remove the \"---\" and what follows, or put it in its own file)")
		return nil
	} else if err != io.EOF {
		l.syntaxError(file, err)
		return nil
	}
	if len(doc.Content) == 0 {
		l.errorf(Pos{File: file}, "", "the file is empty")
		return nil
	}
	root := doc.Content[0]
	if !l.markFile(root, file) {
		l.errorf(Pos{File: file}, "", "too many YAML nodes (more than %d, counting aliases)", maxNodes)
		return nil
	}
	if root.Kind != yaml.MappingNode {
		l.errorf(l.pos(root), "", "expected a mapping of keys (apiVersion, kind, machine, host, boot, …), got %s", describe(root))
		return nil
	}
	if !l.flattenMerges(root) {
		return nil
	}
	return root
}

func (l *loader) syntaxError(file string, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if isParserProblem(msg) {
			// yaml.v3 prints the parser's 0-based line (its scanner's
			// are 1-based): for an unclosed "{" or "[" it is the line
			// where the collection started.
			line++
		}
	}
	l.errorf(Pos{File: file, Line: line}, "", "YAML syntax: %s", msg)
}

// isParserProblem tells yaml.v3's parser errors from its scanner errors.
func isParserProblem(msg string) bool {
	for _, p := range []string{"did not find expected", "found duplicate %", "found incompatible YAML document", "found undefined tag handle"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// markFile records the file of every node under n (aliases are followed
// once); false when the tree is too big.
func (l *loader) markFile(n *yaml.Node, file string) bool {
	if _, done := l.files[n]; done {
		return true
	}
	l.nodes++
	if l.nodes > maxNodes {
		return false
	}
	l.files[n] = file
	for _, c := range n.Content {
		if !l.markFile(c, file) {
			return false
		}
	}
	if n.Alias != nil {
		return l.markFile(n.Alias, file)
	}
	return true
}

// checkHeader checks apiVersion and kind of one file.
func (l *loader) checkHeader(file string, root *yaml.Node, header map[string]*yaml.Node, kind string) bool {
	before := len(l.diags)
	v := header["apiVersion"]
	switch {
	case v == nil:
		l.errorf(Pos{file, root.Line, root.Column}, "apiVersion", "missing: a job file starts with apiVersion: %s", APIVersion)
	case v.Kind != yaml.ScalarNode || v.Value != APIVersion:
		l.errorf(l.pos(v), "apiVersion", "%s is not a version this kbisect reads (it reads %s)", describe(v), APIVersion)
	}
	k := header["kind"]
	switch {
	case k == nil:
		l.errorf(Pos{file, root.Line, root.Column}, "kind", "missing: write kind: %s", kind)
	case k.Kind != yaml.ScalarNode || (k.Value != KindJob && k.Value != KindDefaults):
		l.errorf(l.pos(k), "kind", "%s is not a kind of job file (%s for a machine, %s for a file that jobs include)", describe(k), KindJob, KindDefaults)
	case k.Value == KindDefaults && file == l.job.File && l.opt.AllowDefaults:
	case k.Value != kind && kind == KindDefaults:
		l.errorf(l.pos(k), "kind", "an included file must be kind: %s (shared defaults), not %s", KindDefaults, k.Value)
	case k.Value != kind:
		l.errorf(l.pos(k), "kind", "this is a %s file for jobs to include; run kbisect with a kind: %s file", KindDefaults, KindJob)
	}
	if file == l.job.File {
		if v != nil {
			l.job.APIVersion = v.Value
		}
		if k != nil {
			l.job.Kind = k.Value
		}
	}
	return len(l.diags) == before
}

// includes returns the file names of an include key: one name or a list.
func (l *loader) includes(n *yaml.Node) []*yaml.Node {
	if n == nil {
		return nil
	}
	n = resolve(n)
	var out []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return nil
		}
		out = []*yaml.Node{n}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			c = resolve(c)
			if c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
				l.errorf(l.pos(c), "include", "expected a file name, got %s", describe(c))
				continue
			}
			out = append(out, c)
		}
	default:
		l.errorf(l.pos(n), "include", "expected a file name or a list of them, got %s", describe(n))
	}
	for _, c := range out {
		if c.Value == "" {
			l.errorf(l.pos(c), "include", "empty file name")
			return nil
		}
		if l.files[c] == l.job.File {
			l.job.Include = append(l.job.Include, c.Value)
		}
	}
	return out
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// merge lays over on top of base: keys of both are merged when both values
// are mappings, otherwise over's value wins; base's key order comes first.
func (l *loader) merge(base, over *yaml.Node) *yaml.Node {
	if base == nil {
		return over
	}
	b, o := resolve(base), resolve(over)
	if b.Kind != yaml.MappingNode || o.Kind != yaml.MappingNode {
		return over
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: o.Line, Column: o.Column}
	l.files[out] = l.files[o]
	overVal := map[string]*yaml.Node{}
	for i := 0; i+1 < len(o.Content); i += 2 {
		overVal[o.Content[i].Value] = o.Content[i+1]
	}
	inBase := map[string]bool{}
	for i := 0; i+1 < len(b.Content); i += 2 {
		k, v := b.Content[i], b.Content[i+1]
		inBase[k.Value] = true
		if ov, ok := overVal[k.Value]; ok {
			out.Content = append(out.Content, keyOf(o, k.Value), l.merge(v, ov))
			continue
		}
		out.Content = append(out.Content, k, v)
	}
	for i := 0; i+1 < len(o.Content); i += 2 {
		if !inBase[o.Content[i].Value] {
			out.Content = append(out.Content, o.Content[i], o.Content[i+1])
		}
	}
	return out
}

func keyOf(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

// flattenMerges applies YAML merge keys ("<<: *defaults") in place, after
// checking every mapping for duplicate keys; false when it reported an
// error that stops decoding.
func (l *loader) flattenMerges(n *yaml.Node) bool {
	seen := map[*yaml.Node]bool{}
	ok := true
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		if n.Kind == yaml.AliasNode {
			walk(n.Alias)
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
		if n.Kind != yaml.MappingNode {
			return
		}
		first := map[string]*yaml.Node{}
		var own, merged []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				l.errorf(l.pos(k), "", "a key must be a plain word, got %s", describe(k))
				ok = false
				continue
			}
			if k.ShortTag() == "!!merge" {
				merged = append(merged, l.mergeSources(v)...)
				continue
			}
			if prev, dup := first[k.Value]; dup {
				l.errorf(l.pos(k), "", "key %q appears twice in this mapping (first at line %d)", k.Value, prev.Line)
				ok = false
				continue
			}
			first[k.Value] = k
			own = append(own, k, v)
		}
		if merged == nil {
			n.Content = own
			return
		}
		content := append([]*yaml.Node{}, own...)
		for _, m := range merged {
			for i := 0; i+1 < len(m.Content); i += 2 {
				if _, dup := first[m.Content[i].Value]; !dup {
					first[m.Content[i].Value] = m.Content[i]
					content = append(content, m.Content[i], m.Content[i+1])
				}
			}
		}
		n.Content = content
	}
	walk(n)
	return ok
}

func (l *loader) mergeSources(v *yaml.Node) []*yaml.Node {
	v = resolve(v)
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, c := range v.Content {
			if c = resolve(c); c.Kind == yaml.MappingNode {
				out = append(out, c)
			}
		}
		return out
	}
	l.errorf(l.pos(v), "", "<< merges a mapping (<<: *name), got %s", describe(v))
	return nil
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		return strconv.Quote(v)
	}
	return "something else"
}
