package main

import (
	"context"
	"io"

	"kbisect/nightly"
)

// nightlyBisector bisects a night's regression with the run use case, as
// kbisect run --job would, its reports in the incident's directory.
func nightlyBisector(verbose bool, stderr io.Writer) nightly.Bisector {
	return func(ctx context.Context, req nightly.BisectRequest) (nightly.BisectResult, error) {
		res, err := runJob(ctx, runOptions{Jobs: []string{req.JobFile}, Goods: []string{req.Good}, Bad: req.Bad, State: req.StateDir,
			Verbose: verbose, ReportDir: req.ReportDir}, stderr)
		defer res.Close()
		if err != nil {
			return nightly.BisectResult{}, err // a usage error stays one: the night writes no reports for it
		}
		return nightly.BisectResult{Result: res.JSON.Result, FirstBad: res.JSON.FirstBad}, nil
	}
}
