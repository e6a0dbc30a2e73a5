package run

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/internal/usage"
)

// A state directory keeps each job as kbisect used it: job.yaml (and
// job-2.yaml, … for more machines) is what config show prints, includes
// merged and defaults filled in, and the files that are a build's inputs
// (config fragments, a build.config file) are copied beside it in inputs/
// and named from there. The state needs nothing else to be read again,
// and a resumed run is compared with it key by key, file contents
// included.

// stateFormat marks a state whose job files are resolved (an older one
// kept the job file as written, includes not followed).
const stateFormat = "resolved"

// jobSnapshot is one job's settings, inputs by content.
type jobSnapshot struct {
	job *configs.Job
	// settings are the job's values; an input file's is its content's
	// digest.
	settings map[string]configs.Setting
	// inputs are the keys naming a file of build inputs, with its path.
	inputs map[string]string
}

// snapshot reads job's settings and the content of its input files.
func snapshot(job *configs.Job) (*jobSnapshot, error) {
	s, err := job.Settings()
	if err != nil {
		return nil, err
	}
	snap := &jobSnapshot{job: job, settings: s, inputs: map[string]string{}}
	for key, path := range inputFiles(job) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", key, path, err)
		}
		sum := sha256.Sum256(data)
		v := s[key]
		v.Value = "sha256:" + hex.EncodeToString(sum[:])
		s[key], snap.inputs[key] = v, path
	}
	return snap, nil
}

// inputFiles are the job's keys that name a file whose content goes into
// every build.
func inputFiles(job *configs.Job) map[string]string {
	files := map[string]string{}
	for i, f := range job.Build.Fragments {
		files[fmt.Sprintf("build.fragments[%d]", i)] = string(f)
	}
	if c := job.Build.Config; c != "" && c != configs.ConfigHost && !configs.IsMakeConfig(c) {
		files["build.config"] = c
	}
	return files
}

// mayDiffer are the keys that say how the lab is reached, built on or
// reported, or how long the search may go on, not what is measured: a run
// may resume with them changed (a new address, more build jobs, more
// boots for a run that ran out of them), and they do not name the run.
var mayDiffer = []string{"host.", "report.", "nightly.", "machine.description",
	"build.jobs", "build.ccache", "build.compiler_wrapper", "build.ccache_remote", "build.cache_url", "build.cache_dir", "build.cache_size", "build.timeout",
	"build.host.", "build.remote_tree", "build.slots", "build.host_kbisect",
	"boot.timeout", "boot.power_cycle", "boot.console", "verdict.max_boots"}

func mayChange(key string) bool {
	for _, p := range mayDiffer {
		if strings.HasPrefix(key, p) && (strings.HasSuffix(p, ".") || len(key) == len(p) || key[len(p)] == '[') {
			return true
		}
	}
	return false
}

// identity names what the job measures: the values its files set, inputs
// by content, less how the lab is reached. Defaults are left out so that a
// newer kbisect's new settings do not make a resumed run another one;
// resume compares them all with the state's copy.
func (s *jobSnapshot) identity() string {
	keys := make([]string, 0, len(s.settings))
	for k, v := range s.settings {
		if !v.Default && !mayChange(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, s.settings[k].Value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// save writes the job into the state directory as name, with copies of its
// input files in inputs/.
func (s *jobSnapshot) save(dir, name string) error {
	c := *s.job
	c.Build.Fragments = slices.Clone(c.Build.Fragments)
	for i := range c.Build.Fragments {
		rel, err := s.copyInput(dir, fmt.Sprintf("build.fragments[%d]", i))
		if err != nil {
			return err
		}
		c.Build.Fragments[i] = configs.Path(rel)
	}
	if _, ok := s.inputs["build.config"]; ok {
		rel, err := s.copyInput(dir, "build.config")
		if err != nil {
			return err
		}
		c.Build.Config = rel
	}
	out, err := c.Effective()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, name), out)
}

// copyInput copies the input file of key into dir's inputs/, named by its
// content, and returns its path there, relative to dir.
func (s *jobSnapshot) copyInput(dir, key string) (string, error) {
	path := s.inputs[key]
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: %v", key, path, err)
	}
	rel := filepath.Join("inputs", strings.TrimPrefix(s.settings[key].Value, "sha256:")[:12]+"-"+filepath.Base(path))
	if err := os.MkdirAll(filepath.Join(dir, "inputs"), 0o755); err != nil {
		return "", err
	}
	return rel, atomicfile.WriteFile(filepath.Join(dir, rel), data)
}

// loadSnapshot reads the job the state directory keeps as name.
func loadSnapshot(dir, name string) (*jobSnapshot, error) {
	path := filepath.Join(dir, name)
	job, err := configs.Load(path, configs.LoadOptions{LookupEnv: func(string) (string, bool) { return "", true }})
	if err != nil {
		return nil, fmt.Errorf("the state's copy of the job: %w", err)
	}
	return snapshot(job)
}

// jobChanges says what differs between the job a state was made with and
// the one given now: changes that would mix verdicts, and changes of how
// the lab is reached that may.
func jobChanges(was, now *jobSnapshot) (mix, reach []string) {
	keys := map[string]bool{}
	for k := range was.settings {
		keys[k] = true
	}
	for k := range now.settings {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		a, inA := was.settings[k]
		b, inB := now.settings[k]
		if inA && inB && a.Value == b.Value {
			continue
		}
		var line string
		switch {
		case !inA:
			line = fmt.Sprintf("%s: now %s", k, b.Value)
		case !inB:
			line = fmt.Sprintf("%s: was %s, now unset", k, a.Value)
		case now.inputs[k] != "":
			line = fmt.Sprintf("%s: %s has other content", k, now.inputs[k])
		default:
			line = fmt.Sprintf("%s: was %s, now %s", k, a.Value, b.Value)
		}
		if mayChange(k) {
			reach = append(reach, line)
		} else {
			mix = append(mix, line)
		}
	}
	return mix, reach
}

// JobChangedError is a state directory whose verdicts were made with
// another job than the one given now: a change of what is measured
// (Changes, one line a key), which refuses to resume. The nightly, which
// has no one to ask, keeps such a state aside and begins again.
type JobChangedError struct {
	Dir, File string
	// Copy is the state's copy of the job the verdicts were made with.
	Copy    string
	Changes []string
}

func (e *JobChangedError) Error() string {
	return fmt.Sprintf("state directory %s holds verdicts made with another job than %s (its copy is %s); what changed:\n  %s\ngive another --state, undo the change, or remove the state to start over",
		e.Dir, e.File, e.Copy, strings.Join(e.Changes, "\n  "))
}

// checkSameJobs compares the jobs given now with the copies in the state
// directory: a change of what is measured refuses to resume, with every
// changed key; a change of how the lab is reached is said and goes on.
func checkSameJobs(dir string, files []string, now []*jobSnapshot, msg io.Writer) error {
	for i, snap := range now {
		name := stateJobName(i)
		was, err := loadSnapshot(dir, name)
		if err != nil {
			return err
		}
		mix, reach := jobChanges(was, snap)
		if len(mix) > 0 {
			return usage.Wrap(&JobChangedError{Dir: dir, File: files[i], Copy: filepath.Join(dir, name), Changes: mix})
		}
		for _, l := range reach {
			fmt.Fprintf(msg, "kbisect: %s changed since the run began, which does not change what is measured: %s\n", files[i], l)
		}
	}
	return nil
}

// jobsIdentity is one digest for the jobs of a run.
func jobsIdentity(snaps []*jobSnapshot) string {
	if len(snaps) == 1 {
		return snaps[0].identity()
	}
	ids := make([]string, len(snaps))
	for i, s := range snaps {
		ids[i] = s.identity()
	}
	all := sha256.Sum256([]byte(strings.Join(ids, " ")))
	return hex.EncodeToString(all[:])
}

// otherJobRuns says, for a run about to begin in the default state
// directory dir, which runs of the same range beside it were made with
// another job, and what changed: an edited job is another run, and the
// user should know the verdicts of the old one are not used.
func otherJobRuns(dir string, start bisect.Record, now []*jobSnapshot, msg io.Writer) {
	siblings, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "run-*"))
	for _, other := range siblings {
		if other == dir || !holdsRun(other) {
			continue
		}
		records, err := bisect.ReadState(other)
		if err != nil || len(records) == 0 || records[0].Meta["job_state"] != stateFormat {
			continue
		}
		have := records[0]
		if have.Bad != start.Bad || !slices.Equal(have.Good, start.Good) || have.FirstParent != start.FirstParent || have.Meta["exec"] != start.Meta["exec"] {
			continue
		}
		was, err := loadSnapshot(other, stateJobName(0))
		if err != nil {
			continue
		}
		mix, _ := jobChanges(was, now[0])
		if len(mix) > 3 {
			mix = append(mix[:3], fmt.Sprintf("and %d more", len(mix)-3))
		}
		fmt.Fprintf(msg, "kbisect: %s holds a run of this range made with another job (%s); this one begins afresh in %s\n",
			other, strings.Join(mix, "; "), dir)
	}
}
