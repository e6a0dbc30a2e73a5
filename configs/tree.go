package configs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

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
			l.badf(where, "include", "include cycle: %s", strings.Join(chain, " → "))
			return nil
		}
	}
	if len(l.stack) >= maxIncludeDepth {
		l.badf(where, "include", "includes nest deeper than %d files", maxIncludeDepth)
		return nil
	}
	data, err := l.opt.ReadFile(file)
	if err != nil {
		if via != nil {
			l.badf(where, "include", "cannot read %s: %v", file, unwrapPathError(err))
		} else {
			l.badf(where, "", "cannot read the job file: %v", unwrapPathError(err))
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
			header[k.Value] = resolve(v)
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
			// What the include would set is not "missing": that error
			// would send the reader after the wrong problem.
			l.incomplete = true
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

var (
	yamlLine      = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`unknown anchor '(.*)' referenced`)
)

// parse turns a file into its root mapping node, reporting syntax errors.
func (l *loader) parse(file string, data []byte) *yaml.Node {
	l.sources[file] = strings.Split(string(data), "\n")
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			l.badf(Pos{File: file}, "", "the file is empty (a job file starts with apiVersion: %s and kind: %s)", APIVersion, KindJob)
			return nil
		}
		l.syntaxError(file, err)
		return nil
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil {
		l.badf(Pos{file, second.Line, second.Column}, "", "a second YAML document: a job file holds one (remove the \"---\" and what follows, or put it in its own file)")
		return nil
	} else if err != io.EOF {
		l.syntaxError(file, err)
		return nil
	}
	root := doc.Content[0] // a decoded document holds one node
	if !l.markFile(root, file) {
		l.badf(Pos{File: file}, "", "too many YAML nodes (more than %d)", maxNodes)
		return nil
	}
	if a := aliasCycle(root, nil); a != nil {
		l.badf(l.pos(a), "", "*%s refers to a mapping or list that contains it: that never ends", a.Value)
		return nil
	}
	if root.Kind != yaml.MappingNode {
		// Not quoted: this may be some other file named by mistake.
		l.badf(l.pos(root), "", "expected a mapping of keys (apiVersion, kind, machine, host, boot, …); this is not a job file")
		return nil
	}
	if !l.flattenMerges(root) {
		return nil
	}
	return root
}

// syntaxError reports a YAML syntax error at its line.
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
	} else if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		// yaml.v3 says no line; the alias is in the text.
		line = findLine(l.sources[file], "*"+m[1], line)
	}
	// A tab in the indentation is the usual reason for a scanner error
	// that YAML explains badly.
	for i, text := range l.sources[file] {
		indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
		if strings.Contains(indent, "\t") && (i+1 == line || (line == 1 && !strings.Contains(err.Error(), "line "))) {
			l.badf(Pos{file, i + 1, strings.IndexByte(text, '\t') + 1}, "", "a tab in the indentation: YAML indents with spaces")
			return
		}
	}
	// YAML places an indentation mistake at the mapping it breaks, often
	// lines before: the line itself is found by its indentation.
	if at, col, why, ok := misindented(l.sources[file]); ok {
		l.badf(Pos{file, at, col}, "", "YAML syntax: %s (YAML says: %s)", why, msg)
		return
	}
	l.badf(Pos{File: file, Line: line}, "", "YAML syntax: %s", msg)
}

// findLine returns the 1-based line holding s, or def.
func findLine(lines []string, s string, def int) int {
	for i, text := range lines {
		if strings.Contains(text, s) {
			return i + 1
		}
	}
	return def
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

// markFile records the file of every node under n; false when the tree is
// too big.
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

// aliasCycle returns an alias that refers to one of its own ancestors
// (&r {x: *r}), which YAML allows and no job file can mean.
func aliasCycle(n *yaml.Node, path []*yaml.Node) *yaml.Node {
	for _, p := range path {
		if p == n {
			return n
		}
	}
	if n.Kind == yaml.AliasNode {
		for _, p := range path {
			if p == n.Alias {
				return n
			}
		}
		return nil // the anchor itself is checked where it is written
	}
	path = append(path, n)
	for _, c := range n.Content {
		if a := aliasCycle(c, path); a != nil {
			return a
		}
	}
	return nil
}

// checkHeader checks apiVersion and kind of one file.
func (l *loader) checkHeader(file string, root *yaml.Node, header map[string]*yaml.Node, kind string) bool {
	before := len(l.diags)
	top := Pos{file, root.Line, root.Column}
	v := header["apiVersion"]
	switch {
	case v == nil:
		l.badf(top, "apiVersion", "missing: a job file starts with apiVersion: %s", APIVersion)
	case v.Kind != yaml.ScalarNode || v.Value != APIVersion:
		l.badf(l.pos(v), "apiVersion", "%s is not a version this kbisect reads (it reads %s)", describe(v), APIVersion)
	}
	k := header["kind"]
	switch {
	case k == nil:
		l.badf(top, "kind", "missing: write kind: %s", kind)
	case k.Kind != yaml.ScalarNode || (k.Value != KindJob && k.Value != KindDefaults):
		l.badf(l.pos(k), "kind", "%s is not a kind of job file (%s for a machine, %s for a file that jobs include)", describe(k), KindJob, KindDefaults)
	case k.Value == KindDefaults && file == l.job.File && l.opt.AllowDefaults:
	case k.Value != kind && kind == KindDefaults:
		l.badf(l.pos(k), "kind", "an included file must be kind: %s (shared defaults), not %s", KindDefaults, k.Value)
	case k.Value != kind:
		l.badf(l.pos(k), "kind", "this is a %s file for jobs to include; run kbisect with a kind: %s file", KindDefaults, KindJob)
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
	var names []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return nil
		}
		names = []*yaml.Node{n}
	case yaml.SequenceNode:
		names = n.Content
	default:
		l.badf(l.pos(n), "include", "expected a file name or a list of them, got %s", describe(n))
		return nil
	}
	var out []*yaml.Node
	for _, c := range names {
		c = resolve(c)
		switch {
		case c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null":
			l.badf(l.pos(c), "include", "expected a file name, got %s", describe(c))
			continue
		case c.Value == "":
			l.badf(l.pos(c), "include", "empty file name")
			continue
		case strings.Contains(c.Value, "${"):
			l.badf(l.pos(c), "include", "${NAME} is expanded only in commands; name the file (relative to this one)")
			continue
		}
		out = append(out, c)
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
// are mappings, otherwise over's value wins, except that a key written with
// no value (null) keeps base's; base's key order comes first.
func (l *loader) merge(base, over *yaml.Node) *yaml.Node {
	if base == nil {
		return over
	}
	b, o := resolve(base), resolve(over)
	if o.Kind == yaml.ScalarNode && o.ShortTag() == "!!null" {
		return base
	}
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
				l.badf(l.pos(k), "", "a key must be a plain word, got %s", describe(k))
				ok = false
				continue
			}
			if k.ShortTag() == "!!merge" {
				merged = append(merged, l.mergeSources(v)...)
				continue
			}
			if prev, dup := first[k.Value]; dup {
				l.badf(l.pos(k), "", "key %q appears twice in this mapping (first at line %d)", k.Value, prev.Line)
				ok = false
				continue
			}
			first[k.Value] = k
			own = append(own, k, v)
		}
		content := own
		for _, m := range merged {
			for i := 0; i+1 < len(m.Content); i += 2 {
				mk := m.Content[i]
				if _, dup := first[mk.Value]; !dup && mk.ShortTag() != "!!merge" {
					first[mk.Value] = mk
					content = append(content, mk, m.Content[i+1])
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
	l.badf(l.pos(v), "", "<< merges a mapping (<<: *name), got %s", describe(v))
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
