package kbuild

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Kconfig is what a kernel tree's Kconfig files say each symbol depends
// on: enough to explain why olddefconfig dropped a requested option.
type Kconfig struct {
	// DependsOn holds, per symbol (without CONFIG_), its "depends on"
	// expressions, those of the if blocks and choice around it included.
	DependsOn map[string][]string
}

// ReadKconfig reads every Kconfig file of a tree (Kconfig, Kconfig.*),
// without the git directory.
func ReadKconfig(tree string) (*Kconfig, error) {
	kc := &Kconfig{DependsOn: map[string][]string{}}
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "Kconfig" || strings.HasPrefix(d.Name(), "Kconfig.") {
			return kc.readFile(p)
		}
		return nil
	})
	return kc, err
}

// readFile reads one Kconfig file: config and menuconfig entries, their
// "depends on" lines, and the if and choice blocks around them.
func (kc *Kconfig) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var ifs []string    // conditions of the enclosing if blocks
	var choice []string // depends on of the enclosing choice
	inChoice := false
	current := "" // the symbol whose attributes follow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		text := strings.TrimSpace(line)
		if i := strings.Index(text, "#"); i >= 0 && !strings.Contains(text[:i], `"`) {
			text = strings.TrimSpace(text[:i])
		}
		word, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		switch {
		case text == "":
		case word == "config" || word == "menuconfig":
			current = rest
			deps := append(append([]string{}, ifs...), choice...)
			kc.DependsOn[current] = append(kc.DependsOn[current], deps...)
		case word == "if":
			ifs = append(ifs, rest)
			current = ""
		case text == "endif":
			if len(ifs) > 0 {
				ifs = ifs[:len(ifs)-1]
			}
			current = ""
		case text == "choice" || strings.HasPrefix(text, "choice "):
			inChoice, choice, current = true, nil, ""
		case text == "endchoice":
			inChoice, choice, current = false, nil, ""
		case word == "depends" && strings.HasPrefix(rest, "on "):
			expr := strings.TrimSpace(strings.TrimPrefix(rest, "on "))
			switch {
			case current != "":
				kc.DependsOn[current] = append(kc.DependsOn[current], expr)
			case inChoice:
				choice = append(choice, expr)
			}
		case word == "menu" || word == "endmenu" || word == "comment" || word == "source" || word == "mainmenu":
			current = ""
		}
	}
	return sc.Err()
}
