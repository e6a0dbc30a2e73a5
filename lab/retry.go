package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kbisect/internal/atomicfile"
	"kbisect/verdict"
)

// RetrySkips readies a state directory to measure its skipped commits
// again (run --retry-skips): each skipped commit's evidence is kept aside
// as commits/<hash>.skipped-<n>.json, where the reports no longer read
// it, and the search journal's skips move to SkippedJournal. It returns the commits
// whose evidence it set aside or whose skips it dropped, each once. The
// session log's skips are the caller's (bisect.StateLog.Drop).
func RetrySkips(stateDir string) ([]string, error) {
	seen := map[string]bool{}
	var commits []string
	add := func(c string) {
		if !seen[c] {
			seen[c] = true
			commits = append(commits, c)
		}
	}
	files, err := filepath.Glob(filepath.Join(stateDir, "commits", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, path := range files {
		commit := strings.TrimSuffix(filepath.Base(path), ".json")
		if strings.Contains(commit, ".") {
			continue // one set aside before
		}
		ev, err := ReadEvidence(stateDir, commit)
		if err != nil {
			return nil, err
		}
		if ev.Verdict != verdict.Skip {
			continue
		}
		aside := ""
		for n := 1; ; n++ {
			aside = filepath.Join(stateDir, "commits", fmt.Sprintf("%s.skipped-%d.json", commit, n))
			if _, err := os.Stat(aside); os.IsNotExist(err) {
				break
			}
		}
		if err := os.Rename(path, aside); err != nil {
			return nil, err
		}
		add(commit)
	}
	dropped, err := dropSearchSkips(stateDir)
	for _, c := range dropped {
		add(c)
	}
	return commits, err
}

// dropSearchSkips rewrites the search journal without its skips, at once,
// and returns their commits.
func dropSearchSkips(stateDir string) ([]string, error) {
	path := filepath.Join(stateDir, "search.jsonl")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keep, aside bytes.Buffer
	var dropped []string
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if !bytes.HasSuffix(line, []byte("\n")) {
			continue // the line a crash cut short
		}
		var r SearchRecord
		if err := json.Unmarshal(line, &r); err == nil && r.Kind == SearchSkip {
			dropped = append(dropped, r.Commit)
			aside.Write(line)
			continue
		}
		keep.Write(line)
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	// Kept aside first: a kill between the two writes leaves the skips in
	// both, never in neither.
	old, err := os.ReadFile(filepath.Join(stateDir, SkippedJournal))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(stateDir, SkippedJournal), append(old, aside.Bytes()...)); err != nil {
		return nil, err
	}
	return dropped, atomicfile.WriteFile(path, keep.Bytes())
}

// SkippedJournal keeps the search journal's skips that run --retry-skips
// took out of it, as they were.
const SkippedJournal = "search-skipped.jsonl"
