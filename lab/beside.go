package lab

import (
	"context"
	"fmt"
	"path/filepath"

	"kbisect/configs"
	"kbisect/internal/atomicfile"
	"kbisect/internal/commitid"
)

// Sample measures a commit with exactly n samples and no verdict: the
// caller judges them, against another commit's (JudgeBeside). The
// evidence is kept as <state dir>/<name>.json and read back when asked
// again. A kernel that does not build or boot gives evidence without
// values that says why.
func (p *Pipeline) Sample(ctx context.Context, commit string, n int, name string) (*Evidence, error) {
	if n < 1 {
		return nil, fmt.Errorf("sample %s: %d samples", commitid.Short(commit), n)
	}
	path := filepath.Join(p.StateDir, name+".json")
	var kept Evidence
	if err := atomicfile.ReadJSON(path, &kept); err == nil && kept.Commit == commit {
		return &kept, nil
	}
	if err := p.initAlone(); err != nil {
		return nil, err
	}
	p.measureOnly = true
	defer func() { p.measureOnly = false }()
	ev, err := p.test(ctx, commit, n, name)
	if err != nil {
		return nil, err
	}
	return ev, atomicfile.WriteJSON(path, ev)
}

// JudgeBeside decides a candidate against a baseline known to be good,
// both measured (the baseline perhaps on another night), the way
// calibration decides its endpoints: a ratio or auto threshold is set
// from the baseline's samples (and the candidate's); an absolute one
// decides each with the spread of both. Each evidence gets its verdict.
// Reproduced says the candidate is bad and the baseline good; GoodIsBad,
// with an absolute threshold, that the baseline is bad too (the machine,
// not the kernel, changed), and with a relative one that the two measure
// alike.
func JudgeBeside(job *configs.Job, baseline, candidate *Evidence, baseName, candName string) (*Calibration, error) {
	base, err := Rule(job, nil, nil)
	if err != nil {
		return nil, err
	}
	if len(baseline.Values) == 0 || len(candidate.Values) == 0 {
		return nil, fmt.Errorf("judging %s against %s: no samples", candName, baseName)
	}
	c := &Calibration{Good: baseline, Bad: candidate}
	if err := c.judge(base, baseName, candName); err != nil {
		return nil, err
	}
	return c, nil
}

// JudgeTonight judges a candidate beside a baseline, both measured on
// this pipeline the same night, as calibration judges its endpoints
// (JudgeBeside); one left unsure by the spread of both gets more samples,
// on a new boot, up to verdict.samples.max.
func (p *Pipeline) JudgeTonight(ctx context.Context, baseline, candidate *Evidence, baseName, candName string) (*Calibration, error) {
	c, err := JudgeBeside(p.Job, baseline, candidate, baseName, candName)
	if err != nil {
		return nil, err
	}
	was := p.rule
	defer p.SetRule(was)
	base, err := Rule(p.Job, nil, nil)
	if err != nil {
		return nil, err
	}
	return c, p.resample(ctx, c, base, baseName, candName, p.SetRule, func(*Evidence) error { return nil })
}
