package simlab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"kbisect/internal/atomicfile"
	"kbisect/internal/simhost"
)

// labFile records in a lab's directory what it was made with, so that
// New given the same directory again opens the same lab.
const labFile = "lab.json"

// record is lab.json: the options the lab was made with (defaults
// filled in), the tree's facts and the commits that carry the
// regression, and how many machines it has.
type record struct {
	Options  Options  `json:"options"`
	Tree     *Tree    `json:"tree"`
	Bad      []string `json:"bad"`
	Machines int      `json:"machines"`
}

// save writes lab.json: after the lab is made, and after each AddHost.
func (l *Lab) save() error {
	rec := record{Options: l.opt, Tree: l.Tree, Machines: len(l.Hosts) + 1}
	for _, c := range l.Tree.Commits {
		if l.Tree.bad[c] {
			rec.Bad = append(rec.Bad, c)
		}
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("simlab: %v", err)
	}
	return atomicfile.WriteFile(filepath.Join(l.Dir, labFile), append(b, '\n'))
}

// reopen starts again the lab made in dir before: its hosts come back
// with their keys and ports, so the job files and the run's state hold.
// It returns nil, nil when dir holds no lab yet.
func reopen(dir string, opt Options) (*Lab, error) {
	b, err := os.ReadFile(filepath.Join(dir, labFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("simlab: %v", err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Tree == nil || rec.Machines < 1 {
		return nil, fmt.Errorf("simlab: %s is not a lab's record (%v): remove %s, or give another directory", filepath.Join(dir, labFile), err, dir)
	}
	was, _ := json.Marshal(rec.Options)
	now, _ := json.Marshal(opt)
	if !bytes.Equal(was, now) {
		return nil, &OtherLabError{Dir: dir, Was: rec.Options}
	}
	t := rec.Tree
	t.bad, t.broken = map[string]bool{}, map[string]bool{}
	for _, c := range rec.Bad {
		t.bad[c] = true
	}
	for _, c := range t.Broken {
		t.broken[c] = true
	}
	if _, err := os.Stat(filepath.Join(t.Dir, ".git")); err != nil {
		return nil, fmt.Errorf("simlab: %s's tree %s is gone: remove %s, or give another directory", dir, t.Dir, dir)
	}
	l := labAt(dir, opt)
	l.Tree, l.Resumed = t, true
	if l.Host, err = l.resumeHost(filepath.Join(dir, "host"), uint64(opt.Seed)); err != nil {
		return nil, err
	}
	l.Identity = l.Host.Identity
	for n := 2; n <= rec.Machines; n++ {
		h, err := l.resumeHost(filepath.Join(dir, fmt.Sprintf("host-%d", n)), uint64(opt.Seed)*1000+uint64(n))
		if err != nil {
			l.Close()
			return nil, err
		}
		l.Hosts = append(l.Hosts, h)
		l.JobFiles = append(l.JobFiles, filepath.Join(dir, fmt.Sprintf("job-%d.yaml", n)))
	}
	return l, nil
}

// resumeHost starts a lab's host again as it was set up.
func (l *Lab) resumeHost(dir string, seed uint64) (*simhost.Host, error) {
	h, err := simhost.Resume(dir, l.Default)
	if err != nil {
		return nil, err
	}
	if err := l.setUp(h, seed); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// OtherLabError is a directory that holds a lab made with other options.
type OtherLabError struct {
	Dir string
	Was Options
}

func (e *OtherLabError) Error() string {
	return fmt.Sprintf("simlab: %s holds a lab made with other options (seed %d, %d commits, noise %s): give the same ones to go on with it, or another directory",
		e.Dir, e.Was.Seed, e.Was.Commits, e.Was.Noise)
}
