package configs

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// fieldInfo is one key of a section: its YAML name and struct field.
type fieldInfo struct {
	name  string
	index int
}

// keysOf returns the YAML keys of a struct type in declaration order.
func keysOf(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, fieldInfo{name, i})
	}
	return out
}

// Keys returns every key of the job file schema as a dotted path
// ("host.address", "boot.qemu.memory"), in schema order.
func Keys() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for _, f := range keysOf(t) {
			ft := t.Field(f.index).Type
			out = append(out, prefix+f.name)
			if ft.Kind() == reflect.Struct && !isLeafType(ft) {
				walk(ft, prefix+f.name+".")
			}
		}
	}
	walk(reflect.TypeOf(Job{}), "")
	return out
}

var wholeNumber = regexp.MustCompile(`^[-+]?[0-9_]+$`)

var keyIndex = sync.OnceValue(func() map[string][]string {
	idx := map[string][]string{}
	for _, k := range Keys() {
		name := k[strings.LastIndex(k, ".")+1:]
		idx[name] = append(idx[name], k)
	}
	return idx
})

// isLeafType reports whether a struct type is written as one scalar.
func isLeafType(t reflect.Type) bool {
	return t == reflect.TypeOf(Threshold{})
}

// decode fills v from node n, reporting every problem under key.
func (l *loader) decode(n *yaml.Node, v reflect.Value, key string) {
	if l.nodes++; l.nodes > maxNodes {
		if l.nodes == maxNodes+1 {
			l.badf(l.pos(n), key, "too many YAML nodes (more than %d, counting aliases)", maxNodes)
		}
		return
	}
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		l.nullAt[key] = l.pos(n)
		return // "key:" with no value leaves the default
	}
	if key != "" {
		l.job.pos[key] = l.pos(n)
		l.nodeAt[key] = n
	}
	if l.decodeValue(n, v, key) {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		l.decodeStruct(n, v, key)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			l.badf(l.pos(n), key, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			l.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", key, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			l.badf(l.pos(n), key, "expected a mapping of NAME: value, got %s", describe(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			elem := reflect.New(v.Type().Elem()).Elem()
			l.decode(val, elem, key+"."+k.Value)
			m.SetMapIndex(reflect.ValueOf(k.Value), elem)
		}
		v.Set(m)
	case reflect.String:
		if s, ok := l.text(n, key); ok {
			v.SetString(s)
		}
	case reflect.Int:
		if n.Kind == yaml.ScalarNode && wholeNumber.MatchString(n.Value) && n.ShortTag() != "!!int" {
			l.badf(l.pos(n), key, "%s is out of range", n.Value)
			return
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			l.badf(l.pos(n), key, "expected a whole number, got %s", describe(n))
			return
		}
		var i int
		if err := n.Decode(&i); err != nil {
			l.badf(l.pos(n), key, "%s is out of range", describe(n))
			return
		}
		v.SetInt(int64(i))
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			l.badf(l.pos(n), key, "expected true or false, got %s", describe(n))
			return
		}
		var b bool
		_ = n.Decode(&b) // a !!bool scalar always decodes
		v.SetBool(b)
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
			l.badf(l.pos(n), key, "expected a number, got %s", describe(n))
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			l.badf(l.pos(n), key, "%s is not a number", describe(n))
			return
		}
		v.SetFloat(f)
	default:
		// A schema type without a decoder: TestEveryKeyDecodes catches it.
		l.badf(l.pos(n), key, "kbisect cannot read this key (no decoder for %s)", v.Type())
	}
}

// text returns a scalar as text: strings, and numbers and dates as written.
// Only commands may hold ${NAME}.
func (l *loader) text(n *yaml.Node, key string) (string, bool) {
	s, ok := l.anyText(n, key)
	if ok && strings.Contains(s, "${") {
		l.badf(l.pos(n), key, "${NAME} is expanded only in commands (%s), build.ccache_remote and build.cache_url; write the value here", strings.Join(commandKeys, ", "))
		return "", false
	}
	return s, ok
}

// anyText is text for commands, which may hold ${NAME}.
func (l *loader) anyText(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		l.badf(l.pos(n), key, "expected text, got %s", describe(n))
		return "", false
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!timestamp":
	case "!!bool":
		l.badf(l.pos(n), key, "expected text, got %s (put it in quotes if you mean the word)", n.Value)
		return "", false
	default:
		l.badf(l.pos(n), key, "expected text, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// decodeValue decodes the schema's own value types; false for the others.
func (l *loader) decodeValue(n *yaml.Node, v reflect.Value, key string) bool {
	switch p := v.Addr().Interface().(type) {
	case *Duration:
		if s, ok := l.text(n, key); ok {
			d, err := ParseDuration(s)
			l.set(n, key, err, func() { *p = d })
		}
	case *Size:
		if s, ok := l.text(n, key); ok {
			sz, err := ParseSize(s)
			l.set(n, key, err, func() { *p = sz })
		}
	case *Threshold:
		if s, ok := l.text(n, key); ok {
			t, err := ParseThreshold(s)
			l.set(n, key, err, func() { *p = t })
		}
	case *CPUs:
		// Parsed once machine.cpus is known, whatever the key order.
		if _, ok := l.text(n, key); ok {
			l.cpuLists = append(l.cpuLists, cpuList{key: key, node: n, set: p})
		}
	case *Path:
		if s, ok := l.text(n, key); ok {
			path, err := l.resolvePath(n, s)
			l.set(n, key, err, func() { *p = Path(path) })
		}
	case *Command:
		if s, ok := l.anyText(n, key); ok {
			*p = Command(s)
		}
	case *StorageURL:
		if s, ok := l.anyText(n, key); ok {
			*p = StorageURL(s)
		}
	case *Samples:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
			var i int
			if err := n.Decode(&i); err == nil {
				*p = Samples{Min: i, Max: i}
				l.job.pos[key+".min"], l.job.pos[key+".max"] = l.pos(n), l.pos(n)
				return true
			}
		}
		if n.Kind != yaml.MappingNode {
			l.badf(l.pos(n), key, "expected a number of samples or {min: N, max: M}, got %s", describe(n))
			return true
		}
		return false
	case *string:
		if s, ok := l.text(n, key); ok {
			*p = s
		}
	default:
		return false
	}
	return true
}

// set reports err at n, or runs apply.
func (l *loader) set(n *yaml.Node, key string, err error, apply func()) {
	if err != nil {
		l.badf(l.pos(n), key, "%v", err)
		return
	}
	apply()
}

// valuePos is the position of byte offset off inside scalar n where the
// file shows it: the same line for a plain or quoted value without escapes,
// the line that holds the word for a block value (| or >); otherwise the
// scalar's own position.
func (l *loader) valuePos(n *yaml.Node, off int) Pos {
	p := l.pos(n)
	lines := l.sources[p.File]
	if p.Line < 1 || p.Line > len(lines) || off < 0 || off > len(n.Value) {
		return p
	}
	if n.Style == yaml.LiteralStyle || n.Style == yaml.FoldedStyle {
		return blockPos(p, lines, n.Value, off)
	}
	line := lines[p.Line-1]
	start := p.Col - 1 // yaml.v3 counts columns in characters
	if n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle {
		start++
	}
	if start < 0 || start > len(line) || !isASCII(line[:start]) || !strings.HasPrefix(line[start:], n.Value) {
		return p
	}
	p.Col = start + off + 1
	return p
}

// blockPos finds the word of value at off in the lines of a block scalar
// that starts after p.Line: the k-th time the word appears in the value is
// the k-th time it appears in those lines.
func blockPos(p Pos, lines []string, value string, off int) Pos {
	ws := strings.LastIndexAny(value[:off], " \n\t") + 1
	we := strings.IndexAny(value[ws:], " \n\t")
	if we < 0 {
		we = len(value) - ws
	}
	word := value[ws : ws+we]
	if word == "" {
		return p
	}
	k := strings.Count(value[:ws], word)
	for i := p.Line; i < len(lines); i++ {
		line := lines[i]
		for from := 0; ; {
			j := strings.Index(line[from:], word)
			if j < 0 {
				break
			}
			if k == 0 {
				if !isASCII(line[:from+j]) {
					return p
				}
				return Pos{File: p.File, Line: i + 1, Col: from + j + off - ws + 1}
			}
			k--
			from += j + len(word)
		}
	}
	return p
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func (l *loader) resolvePath(n *yaml.Node, s string) (string, error) {
	switch {
	case s == "":
		return "", nil
	case s == "~" || strings.HasPrefix(s, "~/"):
		if l.opt.Home == "" {
			return "", fmt.Errorf("%s starts with ~ but the home directory is unknown", s)
		}
		s = filepath.Join(l.opt.Home, s[1:])
	case strings.HasPrefix(s, "~"):
		return "", fmt.Errorf("%s: only ~/ (your own home) is expanded", s)
	case !filepath.IsAbs(s):
		s = filepath.Join(filepath.Dir(l.files[n]), s)
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return s, nil
	}
	return abs, nil
}

func (l *loader) decodeStruct(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		what := "section"
		if key == "" {
			what = "job"
		}
		l.badf(l.pos(n), key, "expected a mapping (the keys of this %s), got %s", what, describe(n))
		return
	}
	fields := keysOf(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		full := joinKey(key, k.Value)
		f, ok := findField(fields, k.Value)
		if !ok && key == "" && strings.HasPrefix(k.Value, "x-") {
			continue // extension keys hold YAML anchors for the rest
		}
		if !ok {
			msg, meant := unknownKey(k.Value, key, fields)
			l.badf(l.pos(k), full, "%s", msg)
			for _, m := range meant {
				l.meant[m] = true // not "missing" as well
			}
			continue
		}
		l.decode(val, v.Field(f.index), full)
	}
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func findField(fields []fieldInfo, name string) (fieldInfo, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return fieldInfo{}, false
}

// unknownKey explains an unknown key: the nearest valid one, or the section
// where such a key belongs, or the keys this section has. It also returns
// the keys it suggests.
func unknownKey(name, section string, fields []fieldInfo) (string, []string) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	if c := closest(name, names); c != "" {
		return fmt.Sprintf("unknown key; did you mean %q?", c), []string{joinKey(section, c)}
	}
	if elsewhere := keyIndex()[name]; len(elsewhere) > 0 {
		return fmt.Sprintf("unknown key here; did you mean %s?", strings.Join(elsewhere, " or ")), elsewhere
	}
	where := "the " + section + " section"
	if section == "" {
		where = "a job file"
		names = names[3:] // apiVersion, kind and include are said elsewhere
	}
	sort.Strings(names)
	return fmt.Sprintf("unknown key (keys of %s: %s)", where, strings.Join(names, ", ")), nil
}
