package kbuild

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"kbisect/configs"
)

// Config is a kernel .config: each option's value as written ("y", "m",
// a number, a "quoted string"), "n" for "# CONFIG_X is not set".
type Config map[string]string

// ReadConfig reads a .config (or a fragment).
func ReadConfig(r io.Reader) (Config, error) {
	c := Config{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		o, err := configs.ParseConfigLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if o.Name != "" {
			c[o.Name] = o.Value
		}
	}
	return c, sc.Err()
}

// ReadConfigFile reads a .config file.
func ReadConfigFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := ReadConfig(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return c, nil
}

// Get returns an option's value; an option the file does not mention is
// not set ("n"), as Kconfig reads it.
func (c Config) Get(name string) string {
	if v, ok := c[name]; ok {
		return v
	}
	return "n"
}

// Option is one requested option and where it was asked for.
type Option struct {
	Name, Value string
	From        string // fragment file:line, or build.options[i]
}

// Request is what a job asks of every kernel's .config: the options of its
// fragments, then its inline options, the later winning as in
// scripts/kconfig/merge_config.sh.
type Request struct {
	Options []Option
	// Redefined says which options a later fragment or option set again
	// to another value (merge_config.sh's "Value of CONFIG_X is
	// redefined").
	Redefined []string
}

// LoadRequest reads the fragments and inline options of a job.
func LoadRequest(fragments, inline []string) (Request, error) {
	var r Request
	index := map[string]int{}
	add := func(o Option) {
		if i, ok := index[o.Name]; ok {
			if prev := r.Options[i]; prev.Value != o.Value {
				r.Redefined = append(r.Redefined, fmt.Sprintf("%s=%s (%s) is redefined as %s by %s", o.Name, prev.Value, prev.From, o.Value, o.From))
			}
			r.Options[i] = o
			return
		}
		index[o.Name] = len(r.Options)
		r.Options = append(r.Options, o)
	}
	for _, frag := range fragments {
		data, err := os.ReadFile(frag)
		if err != nil {
			return r, err
		}
		for n, line := range strings.Split(string(data), "\n") {
			o, err := configs.ParseConfigLine(line)
			if err != nil {
				return r, fmt.Errorf("%s:%d: %v", frag, n+1, err)
			}
			if o.Name != "" {
				add(Option{o.Name, o.Value, fmt.Sprintf("%s:%d", frag, n+1)})
			}
		}
	}
	for i, line := range inline {
		o, err := configs.ParseConfigLine(line)
		if err != nil {
			return r, fmt.Errorf("build.options[%d]: %v", i, err)
		}
		if o.Name != "" {
			add(Option{o.Name, o.Value, fmt.Sprintf("build.options[%d]", i)})
		}
	}
	return r, nil
}

// Fragment writes the request as one fragment, for merge_config.sh.
func (r Request) Fragment() string {
	var b strings.Builder
	for _, o := range r.Options {
		if o.Value == "n" {
			fmt.Fprintf(&b, "# %s is not set\n", o.Name)
		} else {
			fmt.Fprintf(&b, "%s=%s\n", o.Name, o.Value)
		}
	}
	return b.String()
}

// Dropped is a requested option the final .config does not have as asked.
type Dropped struct {
	Option
	Got string
	// DependsOn is what Kconfig says the option depends on, when the tree
	// tells; Unmet the symbols of it that are not set.
	DependsOn string
	Unmet     []string
	// Chosen is, for an alternative of a choice, the alternative the
	// choice took instead.
	Chosen string
}

func (d Dropped) String() string {
	got := d.Name + "=" + d.Got
	if d.Got == "n" {
		got = d.Name + " not set"
	}
	s := fmt.Sprintf("%s=%s was dropped (%s; asked by %s)", d.Name, d.Value, got, d.From)
	if d.DependsOn != "" {
		s += ": depends on " + d.DependsOn
		if len(d.Unmet) > 0 {
			s += ", and " + strings.Join(d.Unmet, ", ") + " is not set"
		}
	}
	if d.Chosen != "" {
		s += "; its choice took " + d.Chosen + "=y"
	}
	return s
}

// Verify checks every requested option against the final .config and
// explains, from the tree's Kconfig files when it can, why one was
// dropped: olddefconfig drops what it cannot satisfy without a word.
func Verify(r Request, final Config, kc *Kconfig) []Dropped {
	var out []Dropped
	for _, o := range r.Options {
		got := final.Get(o.Name)
		if got == o.Value {
			continue
		}
		d := Dropped{Option: o, Got: got}
		if kc != nil {
			sym := strings.TrimPrefix(o.Name, "CONFIG_")
			if deps := kc.DependsOn[sym]; len(deps) > 0 {
				terms := make([]string, len(deps))
				for i, e := range deps {
					terms[i] = e
					if len(deps) > 1 && strings.Contains(e, "||") {
						terms[i] = "(" + e + ")"
					}
				}
				d.DependsOn = strings.Join(terms, " && ")
				d.Unmet = unmet(deps, final)
			}
			for _, alt := range kc.Choice[sym] {
				if alt != sym && final.Get("CONFIG_"+alt) == "y" {
					d.Chosen = "CONFIG_" + alt
				}
			}
		}
		out = append(out, d)
	}
	return out
}

var symbol = regexp.MustCompile(`\b[A-Z][A-Z0-9_]*\b`)

// unmet lists the symbols of dependency expressions that are not set, as
// CONFIG_ names (a negated symbol that is set is not listed: the reader
// sees the expression).
func unmet(deps []string, final Config) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range deps {
		for _, s := range symbol.FindAllString(d, -1) {
			name := "CONFIG_" + s
			if s == "y" || s == "m" || s == "n" || seen[name] || strings.Contains(d, "!"+s) {
				continue
			}
			seen[name] = true
			if v := final.Get(name); v == "n" {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}
