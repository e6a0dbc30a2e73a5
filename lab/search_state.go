package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"kbisect/internal/atomicfile"
	"kbisect/progress"
	"kbisect/verdict"
)

// SearchRecord is one line of a noise-robust search's journal: a boot of
// an endpoint at calibration, a boot the search asked for, or a kernel
// that could not be measured. Replayed in order, the journal rebuilds the
// search.
type SearchRecord struct {
	// Kind is "good" or "bad" (a calibration boot of that endpoint),
	// "release" (a boot of an older release on the walk back from a good
	// endpoint that measured bad; no Values when it could not be
	// measured), "boot", or "skip".
	Kind   string `json:"kind"`
	Commit string `json:"commit"`
	// Reverted: the bad endpoint with Commit reverted (Built is that
	// kernel's commit).
	Reverted bool   `json:"reverted,omitempty"`
	Built    string `json:"built,omitempty"`
	// Confirming marks a boot of the leading commit's confirmation.
	Confirming bool `json:"confirming,omitempty"`
	// Sub names the boot's files: commits/<built>/<sub>.json, its
	// evidence, and commits/<built>/<sub>/, its raw outputs.
	Sub string `json:"sub,omitempty"`
	// Values are the boot's samples, as the job's metric measured them.
	Values  []float64 `json:"values,omitempty"`
	Release string    `json:"release,omitempty"`
	BootID  string    `json:"boot_id,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	// Failure is a skip's class and evidence.
	Failure *Failure `json:"failure,omitempty"`
	Seconds float64  `json:"seconds"`
	// Machine names the machine the boot ran on, when a run has several
	// (its job's machine.name).
	Machine string `json:"machine,omitempty"`
	// BuildSeconds is the part of Seconds a build took (0: the kernel was
	// built before, or came from the cache).
	BuildSeconds float64 `json:"build_seconds,omitempty"`
	Time         string  `json:"time"`
}

// The kinds of search records.
const (
	SearchGood = "good"
	SearchBad  = "bad"
	SearchBoot = "boot"
	SearchSkip = "skip"
	// SearchRelease is a boot of an older release on the walk back.
	SearchRelease = "release"
)

// SearchJournal is the journal file, search.jsonl in the state
// directory: each record is written and synced before the next step.
type SearchJournal struct {
	f       *os.File
	records []SearchRecord
}

// OpenSearchJournal opens the state directory's journal, reading what
// earlier runs wrote; a last line cut short by a crash is dropped.
func OpenSearchJournal(dir string) (*SearchJournal, error) {
	path := filepath.Join(dir, "search.jsonl")
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	j := &SearchJournal{}
	keep := 0
	for line := 1; keep < len(data); line++ {
		end := bytes.IndexByte(data[keep:], '\n')
		if end < 0 {
			break // the line a crash cut short, before its newline
		}
		var r SearchRecord
		if err := json.Unmarshal(data[keep:keep+end], &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v (the journal of this state directory is damaged; give another --state)", path, line, err)
		}
		j.records = append(j.records, r)
		keep += end + 1
	}
	if keep < len(data) {
		if err := os.Truncate(path, int64(keep)); err != nil {
			return nil, err
		}
	}
	if j.f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	return j, nil
}

// Records are the journal's records, oldest first.
func (j *SearchJournal) Records() []SearchRecord { return j.records }

// Append writes a record and syncs it to disk.
func (j *SearchJournal) Append(r SearchRecord) error {
	if r.Time == "" {
		r.Time = time.Now().UTC().Format(time.RFC3339)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.records = append(j.records, r)
	return nil
}

// Close closes the journal.
func (j *SearchJournal) Close() error { return j.f.Close() }

// SearchSummary is where a noise-robust search stands: search.json in the
// state directory, rewritten after every boot, read by the reports.
type SearchSummary struct {
	// Result is found, inconclusive or not-reproduced once it ended.
	Result      string  `json:"result,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	Confidence  float64 `json:"confidence"`
	Probability float64 `json:"probability"`
	// None is the probability that no commit of the range is bad.
	None  float64 `json:"none"`
	Boots int     `json:"boots"`
	// CalibrationBoots are the endpoints' boots the model was learned
	// from (not counted in Boots).
	CalibrationBoots int                `json:"calibration_boots"`
	Candidates       []SearchCandidate  `json:"candidates"`
	Commits          []SearchCommit     `json:"commits"`
	Model            map[string]float64 `json:"model"`
	// Shape says where the regression or the machine is not the plain
	// case: a regression that shows on some boots only, one in how often
	// the machine spikes, a drift (culprit.Search.Shape).
	Shape []string `json:"shape,omitempty"`
	// RangeCommits is how many commits the range holds.
	RangeCommits int `json:"range_commits"`
	// Forecast is, while the search goes, where it expected to end as
	// its last step began.
	Forecast *SearchForecast `json:"forecast,omitempty"`
	// Machines are the machines of a run on several, in the jobs'
	// order.
	Machines []SearchMachine `json:"machines,omitempty"`
	// Later are, when the answer is the first of two steps, the later
	// steps the search converged on first (culprit.Step.Later).
	Later []string `json:"later_steps,omitempty"`
}

// SearchMachine is one machine of a run on several: its boots taken in
// (the endpoints' included), and why it was lost, if it was.
type SearchMachine struct {
	Name  string `json:"name"`
	Boots int    `json:"boots"`
	Lost  string `json:"lost,omitempty"`
}

// SearchForecast is a search's forecast of its end (culprit.Forecast):
// the boots left, the step beginning at At included, and the seconds they
// take, each the median of the searches it ran ahead and the range that
// holds most of them.
type SearchForecast struct {
	At          time.Time `json:"at"`
	Boots       int       `json:"boots"`
	BootsLow    int       `json:"boots_low"`
	BootsHigh   int       `json:"boots_high"`
	Seconds     float64   `json:"seconds"`
	SecondsLow  float64   `json:"seconds_low"`
	SecondsHigh float64   `json:"seconds_high"`
}

// String is the forecast in words, as a step's line says it.
func (f SearchForecast) String() string {
	return progress.Forecast{Boots: f.Boots, BootsLow: f.BootsLow, BootsHigh: f.BootsHigh, Seconds: f.Seconds, SecondsLow: f.SecondsLow, SecondsHigh: f.SecondsHigh}.String()
}

// SearchCandidate is a commit and its probability of being the first
// bad one: search.json's candidates, and the probabilities of run --exec
// --confidence's JSON answer.
type SearchCandidate struct {
	Commit      string  `json:"commit"`
	Probability float64 `json:"probability"`
}

// SearchCommit is what the search measured of one commit: each boot's
// median, what the boots say together, and the probability it is bad.
type SearchCommit struct {
	Commit   string    `json:"commit"`
	Reverted bool      `json:"reverted,omitempty"`
	Medians  []float64 `json:"medians"`
	Evidence float64   `json:"evidence"`
	PBad     float64   `json:"p_bad"`
	// Calibration is how many of the boots were the endpoint's at
	// calibration (the bad endpoint's).
	Calibration int `json:"calibration,omitempty"`
}

// WriteSearchSummary writes search.json atomically.
func WriteSearchSummary(dir string, s *SearchSummary) error {
	return atomicfile.WriteJSON(filepath.Join(dir, "search.json"), s)
}

// ReadSearchSummary reads search.json (nil when the run did not search
// that way).
func ReadSearchSummary(dir string) (*SearchSummary, error) {
	return readIfThere[SearchSummary](filepath.Join(dir, "search.json"))
}

// WriteCalibration writes a calibration into the state directory, for
// the reports: a posterior search calibrates its own way.
func WriteCalibration(dir string, c *Calibration) error {
	return atomicfile.WriteJSON(filepath.Join(dir, "calibration.json"), c)
}

// bootPath is where one boot of a posterior search keeps its evidence,
// samples parsed: beside its raw outputs.
func bootPath(dir, commit, sub string) string {
	return filepath.Join(dir, "commits", commit, sub+".json")
}

// SaveBoot writes one boot's evidence into the state directory.
func SaveBoot(dir, sub string, ev *Evidence) error {
	return atomicfile.WriteJSON(bootPath(dir, ev.Commit, sub), ev)
}

// GatherBoots reads the boots of a commit (by their subs) into one
// evidence, with the verdict and reason given, and writes it where the
// reports read a commit's evidence (commits/<hash>.json).
func GatherBoots(dir, commit string, subs []string, v verdict.Verdict, reason string) error {
	all := &Evidence{Commit: commit, Verdict: v, Reason: reason}
	for _, sub := range subs {
		var ev Evidence
		if err := atomicfile.ReadJSON(bootPath(dir, commit, sub), &ev); err != nil {
			if os.IsNotExist(err) {
				continue // a boot from before its evidence was kept
			}
			return err
		}
		all.Release, all.Signature, all.Metric, all.Kind = ev.Release, ev.Signature, ev.Metric, ev.Kind
		if all.Build == nil {
			all.Build = ev.Build
		}
		all.Boots = append(all.Boots, ev.Boots...)
		all.Values = append(all.Values, ev.Values...)
		all.Samples = append(all.Samples, ev.Samples...)
		all.Seconds += ev.Seconds
	}
	if len(all.Values) == 0 {
		return nil
	}
	return atomicfile.WriteJSON(filepath.Join(dir, "commits", commit+".json"), all)
}
