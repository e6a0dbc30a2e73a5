package run

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kbisect/configs"
	"kbisect/internal/simlab"
	"kbisect/internal/usage"
	"kbisect/progress"
	"kbisect/report"
)

// The shipped job files, includes and fragments and all, are kept in a
// state directory that reads back as the same job, key by key, with no
// file beside the original.
func TestShippedJobsReadBackFromTheStateAlone(t *testing.T) {
	for _, file := range []string{"../configs/system-0.yaml", "../configs/qemu-local.yaml"} {
		job, err := configs.Load(file, configs.LoadOptions{LookupEnv: func(string) (string, bool) { return "", true }})
		if err != nil {
			t.Fatal(err)
		}
		now, err := snapshot(job)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := now.save(dir, "job.yaml"); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "job.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("\ninclude:")) || !bytes.Contains(data, []byte("inputs/")) {
			t.Errorf("%s: the state's copy still includes, or names no copied input:\n%s", file, data)
		}
		was, err := loadSnapshot(dir, "job.yaml")
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if mix, reach := jobChanges(was, now); len(mix)+len(reach) > 0 {
			t.Errorf("%s reads back changed: %q %q", file, mix, reach)
		}
		if was.identity() == "" || len(was.settings) < 30 {
			t.Errorf("%s: %d settings", file, len(was.settings))
		}
	}
}

// A state remembers the job whole: an edit in an included file or in a
// config fragment refuses to resume and says which key changed; a change
// of how the host is reached goes on, said; report needs the state alone.
func TestResumeRefusesAnotherResolvedJobAndSaysWhatChanged(t *testing.T) {
	l := newSimLab(t, simlab.Options{Seed: 5, Commits: 60})
	// The verdict moves to a defaults file the job includes, as the
	// shipped lab-defaults.yaml does.
	job := read(t, l.JobFile)
	at := strings.Index(job, "\nverdict:\n")
	defaults := filepath.Join(l.Dir, "lab-defaults.yaml")
	write(t, defaults, "apiVersion: kbisect/v1\nkind: Defaults\n"+job[at:])
	write(t, l.JobFile, strings.Replace(job[:at+1], "\nmachine:\n", "\ninclude: lab-defaults.yaml\n\nmachine:\n", 1))

	var msgs bytes.Buffer
	o := JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad}, Jobs: []string{l.JobFile},
		State: filepath.Join(t.TempDir(), "state"), Messages: &msgs}
	res, err := Job(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, msgs.String())
	}
	res.Close()
	want := res.JSON.FirstBad

	for _, c := range []struct {
		name, file, from, to string
		says                 []string
	}{
		{"threshold in the include", defaults, "  threshold: ", "  threshold: 1", []string{"verdict.threshold: was ", ", now 1"}},
		{"fragment's content", l.Fragment, "CONFIG_PREEMPT_RT=y", "CONFIG_PREEMPT_RT=y\nCONFIG_HZ_1000=y", []string{"build.fragments[0]: " + l.Fragment + " has other content"}},
		{"a sample more", defaults, "max: 5", "max: 6", []string{"verdict.samples.max: was 5, now 6"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := read(t, c.file)
			if !strings.Contains(before, c.from) {
				t.Fatalf("%s has no %q", c.file, c.from)
			}
			write(t, c.file, strings.Replace(before, c.from, c.to, 1))
			defer write(t, c.file, before)
			msgs.Reset()
			res, err := Job(context.Background(), o)
			if err == nil {
				res.Close()
				t.Fatalf("resumed with %s changed:\n%s", c.name, msgs.String())
			}
			if !usage.Is(err) || !strings.Contains(err.Error(), "what changed:") {
				t.Fatalf("error: %v", err)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q:\n%v", s, err)
				}
			}
		})
	}

	// How the host is reached may change; what was measured stands.
	write(t, l.JobFile, strings.Replace(read(t, l.JobFile), "connect_timeout: 5s", "connect_timeout: 7s", 1))
	msgs.Reset()
	res, err = Job(context.Background(), o)
	if err != nil {
		t.Fatalf("a new connect_timeout refused to resume: %v\n%s", err, msgs.String())
	}
	res.Close()
	if res.JSON.FirstBad != want || !strings.Contains(msgs.String(), "host.connect_timeout: was 5s, now 7s") {
		t.Errorf("resumed: %s (want %s), messages:\n%s", res.JSON.FirstBad, want, msgs.String())
	}

	// The state alone: the job file, its include and its fragment gone.
	for _, f := range []string{l.JobFile, defaults, l.Fragment} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	var text bytes.Buffer
	if err := report.FromState(context.Background(), o.State, "text", &text); err != nil {
		t.Fatalf("report --state without the job's files: %v", err)
	}
	if !strings.HasPrefix(text.String(), want+" is the first bad commit") {
		t.Errorf("the report:\n%s", text.String())
	}
}

func TestOnlyHowTheLabIsReachedMayChange(t *testing.T) {
	for key, may := range map[string]bool{
		"host.address": true, "host.known_hosts": true, "build.jobs": true, "report.formats[1]": true,
		"boot.power_cycle": true, "machine.description": true, "verdict.max_boots": true,
		"build.compiler_wrapper": true, "build.ccache_remote": true, "build.make_vars.CC": false,
		"build.job": false, "verdict.threshold": false, "boot.params": false, "machine.cpus": false,
		"build.fragments[0]": false, "workload.duration": false, "boot.timeouts": false, "hostname": false,
		"build.host.address": true, "build.host.known_hosts": true, "build.remote_tree": true, "build.slots": true,
		"build.host_kbisect": true, "build.hosts": false, "build.tree": false,
	} {
		if mayChange(key) != may {
			t.Errorf("mayChange(%q) = %v", key, !may)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// cancelOnFirst cancels the run at its first event.
type cancelOnFirst struct{ cancel context.CancelFunc }

func (c cancelOnFirst) Emit(progress.Event) { c.cancel() }

// In the default state directory an edited job is a run of its own, and
// the user is told which run of the same range it does not go on with.
func TestAnEditedJobBeginsAfreshAndSaysWhichRunItLeaves(t *testing.T) {
	l := newSimLab(t, simlab.Options{Seed: 5, Commits: 60})
	var msgs bytes.Buffer
	o := JobOptions{Range: Range{Goods: []string{l.Tree.Good}, Bad: l.Tree.Bad}, Jobs: []string{l.JobFile}, Messages: &msgs}
	res, err := Job(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, msgs.String())
	}
	res.Close()
	first := res.JSON.StateDir

	write(t, l.JobFile, strings.Replace(read(t, l.JobFile), "max: 5", "max: 7", 1))
	msgs.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Progress = cancelOnFirst{cancel}
	if res, err := Job(ctx, o); err == nil {
		res.Close()
	}
	want := first + " holds a run of this range made with another job (verdict.samples.max: was 5, now 7); this one begins afresh in "
	if !strings.Contains(msgs.String(), want) {
		t.Errorf("messages:\n%s\nwant %q", msgs.String(), want)
	}
}

// newSimLab is a simulated lab for the test, closed after it; the test is
// skipped where the lab cannot be made (no make or gcc).
func newSimLab(t *testing.T, opt simlab.Options) *simlab.Lab {
	t.Helper()
	if err := simlab.Requirements(); err != nil {
		t.Skip(err)
	}
	l, err := simlab.New(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
