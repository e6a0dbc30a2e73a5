package run

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"kbisect/bisect"
	"kbisect/configs"
	"kbisect/lab"
)

// preflight checks every job's lab before anything is built and before
// the state directory is made: a run that cannot reach its lab stops in
// seconds and leaves nothing behind, so the same command, once the lab is
// fixed, starts afresh instead of resuming a run that never began. On a
// resume it runs again (a host may have changed overnight), and waits for
// a host the run before may have left rebooting.
//
// With spare set (several machines of one posterior search), machines
// whose lab is not ready are left out while one is: down says why each
// is (nil for a ready one), and the run goes on with the others.
func preflight(ctx context.Context, jobs []*configs.Job, stateDir string, resume, spare bool, say func(string, ...any)) (down []error, err error) {
	var errs []error
	down = make([]error, len(jobs))
	for i, job := range jobs {
		known := fileExists(baseFile(stateDir, "")) || fileExists(baseFile(stateDir, job.Machine.Name))
		rd, err := lab.Preflight(ctx, job, lab.PreflightOptions{StateDir: stateDir, Resume: resume, Say: say, BaseKnown: known})
		if err != nil {
			return nil, err
		}
		if err := rd.Err(); err != nil {
			errs, down[i] = append(errs, err), err
			continue
		}
		if rd.Host != "" {
			say("preflight: %s is ready (%s)", rd.Host, job.File)
		}
	}
	if len(errs) == 0 {
		return down, nil
	}
	if !spare || len(errs) == len(jobs) {
		return nil, errors.Join(errs...)
	}
	for i, err := range down {
		if err != nil {
			say("preflight: %s (%s) is left out of this run, the other machines go on: %v", jobs[i].Machine.Name, jobs[i].File, err)
		}
	}
	return down, nil
}

// answered says whether a state directory holds a run that found its
// first bad commit: running it again reads the answer from the state and
// needs no lab.
func answered(stateDir string) bool {
	data, err := os.ReadFile(filepath.Join(stateDir, "result.json"))
	if err != nil {
		return false
	}
	var out struct {
		Result string `json:"result"`
	}
	return json.Unmarshal(data, &out) == nil && out.Result == string(bisect.Found)
}

// holdsRun says whether a state directory holds a run's session log with
// something in it: a resume.
func holdsRun(stateDir string) bool {
	fi, err := os.Stat(filepath.Join(stateDir, bisect.LogName))
	return err == nil && fi.Size() > 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
