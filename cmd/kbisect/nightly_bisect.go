package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"kbisect/nightly"
)

// nightlyBisector bisects a night's regression with kbisect run, whose
// JSON answer it reads.
func nightlyBisector(verbose bool, stderr io.Writer) nightly.Bisector {
	return func(ctx context.Context, req nightly.BisectRequest) (nightly.BisectResult, error) {
		var out bytes.Buffer
		err := runRun(ctx, runOptions{Jobs: []string{req.JobFile}, Goods: []string{req.Good}, Bad: req.Bad, State: req.StateDir, JSON: true,
			Verbose: verbose, ReportDir: req.ReportDir}, &out, stderr)
		var res runJSON
		var re *resultError
		switch jerr := json.Unmarshal(out.Bytes(), &res); {
		case jerr != nil:
			err = errors.Join(err, fmt.Errorf("the bisection's answer: %v", jerr))
		case errors.As(err, &re):
			err = nil // an answer, if not the one hoped for
		}
		var ue *usageError
		if errors.As(err, &ue) {
			return nightly.BisectResult{}, &nightly.UsageError{Err: err}
		}
		if err != nil {
			return nightly.BisectResult{}, err
		}
		return nightly.BisectResult{Result: res.Result, FirstBad: res.FirstBad}, nil
	}
}
