package configs

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
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
			l.errorf(l.pos(n), key, "too many YAML nodes (more than %d, counting aliases)", maxNodes)
		}
		return
	}
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
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
			l.errorf(l.pos(n), key, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			l.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", key, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			l.errorf(l.pos(n), key, "expected a mapping of NAME: value, got %s", describe(n))
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
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			l.errorf(l.pos(n), key, "expected a whole number, got %s", describe(n))
			return
		}
		var i int
		if err := n.Decode(&i); err != nil {
			l.errorf(l.pos(n), key, "%s is out of range", describe(n))
			return
		}
		v.SetInt(int64(i))
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			l.errorf(l.pos(n), key, "expected true or false, got %s", describe(n))
			return
		}
		var b bool
		_ = n.Decode(&b) // a !!bool scalar always decodes
		v.SetBool(b)
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
			l.errorf(l.pos(n), key, "expected a number, got %s", describe(n))
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			l.errorf(l.pos(n), key, "%s is not a number", describe(n))
			return
		}
		v.SetFloat(f)
	default:
		// A schema type without a decoder: TestEveryKeyDecodes catches it.
		l.errorf(l.pos(n), key, "kbisect cannot read this key (no decoder for %s)", v.Type())
	}
}

// text returns a scalar as text: strings, and numbers as written.
func (l *loader) text(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		l.errorf(l.pos(n), key, "expected text, got %s", describe(n))
		return "", false
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float":
	case "!!bool":
		l.errorf(l.pos(n), key, "expected text, got %s (put it in quotes if you mean the word)", n.Value)
		return "", false
	default:
		l.errorf(l.pos(n), key, "expected text, got %s", describe(n))
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
		if s, ok := l.text(n, key); ok {
			c, err := ParseCPUs(s, l.job.Machine.CPUs)
			if err != nil {
				if ce, ok := err.(*cpuError); ok {
					l.errorf(l.valuePos(n, ce.offset), key, "%v", err)
					return true
				}
			}
			l.set(n, key, err, func() { *p = c })
		}
	case *Path:
		if s, ok := l.text(n, key); ok {
			path, err := l.resolvePath(n, s)
			l.set(n, key, err, func() { *p = Path(path) })
		}
	case *Command:
		if s, ok := l.text(n, key); ok {
			*p = Command(s)
		}
	case *Samples:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
			var i int
			if err := n.Decode(&i); err == nil {
				*p = Samples{Min: i, Max: i}
				return true
			}
		}
		if n.Kind != yaml.MappingNode {
			l.errorf(l.pos(n), key, "expected a number of samples or {min: N, max: M}, got %s", describe(n))
			return true
		}
		return false
	case *string:
		if s, ok := l.text(n, key); ok {
			if strings.Contains(s, "${") {
				l.errorf(l.pos(n), key, "${NAME} is expanded only in commands (boot.script, boot.power_cycle, boot.console, workload.command, workload.load); write the value here")
				return true
			}
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
		l.errorf(l.pos(n), key, "%v", err)
		return
	}
	apply()
}

// valuePos is the position of byte offset off inside scalar n when the
// file shows the value verbatim on one line (plain or quoted without
// escapes); otherwise the scalar's own position.
func (l *loader) valuePos(n *yaml.Node, off int) Pos {
	p := l.pos(n)
	lines := l.sources[p.File]
	if p.Line < 1 || p.Line > len(lines) {
		return p
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
	case strings.Contains(s, "${"):
		return "", fmt.Errorf("${NAME} is expanded only in commands; write the path (~/ and paths relative to this file work)")
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
		l.errorf(l.pos(n), key, "expected a mapping (the keys of this %s), got %s", what, describe(n))
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
			l.errorf(l.pos(k), full, "%s", msg)
			// What the key was meant to set is not "missing" too.
			l.failed = append(l.failed, meant...)
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
