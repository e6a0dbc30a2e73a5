package kbuild

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Kconfig is what a kernel tree's Kconfig files say each symbol depends
// on and which symbols are alternatives of one choice: enough to explain
// why olddefconfig dropped a requested option.
type Kconfig struct {
	// DependsOn holds, per symbol (without CONFIG_), its "depends on"
	// expressions, those of the if blocks, menus and choice around it
	// included, outermost first.
	DependsOn map[string][]string
	// Choice holds, per symbol that is an alternative of a choice, all the
	// alternatives of that choice in the order Kconfig lists them.
	Choice map[string][]string
}

// SrcArch is the kernel's SRCARCH for an ARCH make variable (empty: the
// machine kbisect runs on), as the top-level Makefile maps it.
func SrcArch(arch string) string {
	if arch == "" {
		arch = map[string]string{
			"amd64": "x86", "386": "x86", "arm64": "arm64", "arm": "arm",
			"riscv64": "riscv", "ppc64le": "powerpc", "ppc64": "powerpc",
			"s390x": "s390", "loong64": "loongarch", "mips64le": "mips",
		}[runtime.GOARCH]
	}
	switch arch {
	case "x86_64", "i386":
		return "x86"
	case "sparc32", "sparc64":
		return "sparc"
	case "sh64":
		return "sh"
	case "parisc64":
		return "parisc"
	}
	return arch
}

// ReadKconfig reads a tree's Kconfig the way kconfig does: from the
// top-level Kconfig file, following source statements (with $(SRCARCH)
// set to srcarch, so only that architecture's files are read), skipping
// help texts.
func ReadKconfig(tree, srcarch string) (*Kconfig, error) {
	r := &kconfigReader{
		tree: tree,
		vars: map[string]string{"SRCARCH": srcarch, "ARCH": srcarch},
		kc:   &Kconfig{DependsOn: map[string][]string{}, Choice: map[string][]string{}},
		seen: map[string]bool{},
	}
	if err := r.file(filepath.Join(tree, "Kconfig"), false); err != nil {
		return nil, err
	}
	return r.kc, nil
}

type kconfigReader struct {
	tree string
	vars map[string]string
	kc   *Kconfig
	seen map[string]bool

	// The blocks open at this point, across source statements: if
	// conditions, menus and choices, each with the conditions it adds.
	blocks []*kblock
}

type kblock struct {
	kind    string // "if", "menu", "choice"
	deps    []string
	members []string // a choice's alternatives
}

// inherited is what every entry at this point depends on.
func (r *kconfigReader) inherited() []string {
	var out []string
	for _, b := range r.blocks {
		out = append(out, b.deps...)
	}
	return out
}

func (r *kconfigReader) expand(s string) string {
	return os.Expand(strings.ReplaceAll(strings.ReplaceAll(s, "$(", "${"), ")", "}"), func(k string) string { return r.vars[k] })
}

// source reads the files a source statement names; optional ones
// (osource) may be missing, relative ones (rsource) are relative to the
// file that names them.
func (r *kconfigReader) source(from, word, arg string) error {
	name := r.expand(strings.Trim(arg, `"`))
	if strings.HasPrefix(word, "r") || strings.HasPrefix(word, "or") {
		name = filepath.Join(filepath.Dir(from), name)
	} else {
		name = filepath.Join(r.tree, name)
	}
	optional := strings.HasPrefix(word, "o")
	matches := []string{name}
	if strings.ContainsAny(name, "*?[") {
		matches, _ = filepath.Glob(name)
		optional = true
	}
	for _, m := range matches {
		if err := r.file(m, optional); err != nil {
			return err
		}
	}
	return nil
}

// file reads one Kconfig file.
func (r *kconfigReader) file(path string, optional bool) error {
	if r.seen[path] {
		return nil
	}
	r.seen[path] = true
	f, err := os.Open(path)
	if err != nil {
		if optional && os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("kconfig: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)

	// attach is where a depends on line goes: the entry or block opened
	// last, until another opens.
	var attach func(expr string)
	helpIndent := -1 // inside a help text: the indentation of its first line (0 until known)
	inHelp := false
	var pending string // a line continued with a backslash
	for sc.Scan() {
		raw := sc.Text()
		if inHelp {
			if strings.TrimSpace(raw) == "" {
				continue
			}
			ind := indent(raw)
			if helpIndent < 0 {
				helpIndent = ind
			}
			if ind >= helpIndent && helpIndent > 0 {
				continue
			}
			inHelp = false
		}
		if strings.HasSuffix(raw, `\`) {
			pending += strings.TrimSuffix(raw, `\`) + " "
			continue
		}
		line := pending + raw
		pending = ""
		text := stripComment(strings.TrimSpace(line))
		if text == "" {
			continue
		}
		word, rest, _ := strings.Cut(text, " ")
		if i := strings.IndexByte(word, '\t'); i >= 0 {
			word, rest = word[:i], word[i+1:]+" "+rest
		}
		rest = strings.TrimSpace(rest)
		switch word {
		case "config", "menuconfig":
			sym := rest
			r.kc.DependsOn[sym] = append(r.kc.DependsOn[sym], r.inherited()...)
			if n := len(r.blocks); n > 0 && r.blocks[n-1].kind == "choice" {
				r.blocks[n-1].members = append(r.blocks[n-1].members, sym)
			}
			attach = func(expr string) { r.kc.DependsOn[sym] = append(r.kc.DependsOn[sym], expr) }
		case "choice", "menu":
			b := &kblock{kind: word}
			r.blocks = append(r.blocks, b)
			attach = func(expr string) { b.deps = append(b.deps, expr) }
		case "if":
			r.blocks = append(r.blocks, &kblock{kind: "if", deps: []string{rest}})
			attach = nil
		case "endchoice", "endmenu", "endif":
			want := strings.TrimPrefix(word, "end")
			for n := len(r.blocks) - 1; n >= 0; n-- {
				if r.blocks[n].kind == want {
					b := r.blocks[n]
					r.blocks = r.blocks[:n]
					if b.kind == "choice" {
						for _, m := range b.members {
							r.kc.Choice[m] = b.members
						}
					}
					break
				}
			}
			attach = nil
		case "help", "---help---":
			inHelp, helpIndent = true, -1
			// The help text's lines are indented deeper than the
			// keyword; kconfig ends it at the first line indented less
			// than its own first line.
		case "depends":
			if strings.HasPrefix(rest, "on ") || strings.HasPrefix(rest, "on\t") {
				if attach != nil {
					attach(strings.TrimSpace(rest[3:]))
				}
			}
		case "comment", "mainmenu":
			attach = func(string) {}
		case "source", "osource", "rsource", "orsource":
			if err := r.source(path, word, rest); err != nil {
				return err
			}
			attach = nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("kconfig: %s: %v", path, err)
	}
	return nil
}

// indent is a line's indentation with tabs every 8 columns, as kconfig
// counts it.
func indent(s string) int {
	n := 0
	for _, c := range s {
		switch c {
		case ' ':
			n++
		case '\t':
			n = (n/8 + 1) * 8
		default:
			return n
		}
	}
	return n
}

// stripComment cuts a # comment that is not inside a quoted string.
func stripComment(s string) string {
	quote := rune(0)
	for i, c := range s {
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '#':
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}
