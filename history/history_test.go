package history

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var where = Where{Machine: "system-0", Remote: "https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git", Branch: "linux-6.12.y"}

// measurement is a night's measurement of tag with cpus CPUs' values.
func measurement(tag string, cpus int) Measurement {
	m := Measurement{Tag: tag, Commit: strings.Repeat("a", 40), Release: "6.12.57-rt", Metric: "noise", Kind: "time",
		Values: []float64{12000, 13000, 11000}, Median: 12000, Threshold: 1e6, Verdict: "good", Reason: "median 12 µs within 1,000 µs",
		Night: "2026-11-30T02:00:00Z", MeasuredAt: time.Date(2026, 11, 30, 2, 10, 0, 0, time.UTC), StateDir: "/var/lib/kbisect/nightly"}
	for c := 0; c < cpus; c++ {
		m.CPUs = append(m.CPUs, CPUValue{CPU: c, Name: "noise", Value: float64(1000 + c)})
	}
	return m
}

func TestAMeasurementAndAnIncidentComeBackAsWritten(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := measurement("v6.12.57", 4)
	if _, err := d.AddMeasurement(ctx, where, want); err != nil {
		t.Fatal(err)
	}
	other := where
	other.Machine = "system-1"
	judged := measurement("v6.12.58", 2)
	judged.Baseline = "v6.12.57"
	if _, err := d.AddMeasurement(ctx, other, judged); err != nil {
		t.Fatal(err)
	}
	got, err := d.Measurements(ctx, where)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d measurements of system-0, want 1", len(got))
	}
	g := got[0]
	if g.Tag != want.Tag || g.Median != want.Median || len(g.Values) != 3 || g.Values[2] != 11000 || !g.MeasuredAt.Equal(want.MeasuredAt) ||
		len(g.CPUs) != 4 || g.CPUs[3] != (CPUValue{CPU: 3, Name: "noise", Value: 1003}) || g.Verdict != "good" || g.Night != want.Night || g.Baseline != "" {
		t.Errorf("read back %+v\nwant %+v", g, want)
	}
	if o, err := d.Measurements(ctx, other); err != nil || len(o) != 1 || o[0].Baseline != "v6.12.57" {
		t.Errorf("system-1's measurement: %+v, %v", o, err)
	}

	id, err := d.OpenIncident(ctx, where, Incident{LastGood: "v6.12.57", FirstBadTag: "v6.12.58", OpenedAt: want.MeasuredAt})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetBisection(ctx, id, "found", strings.Repeat("b", 40), "eventpoll: Replace rwlock with spinlock"); err != nil {
		t.Fatal(err)
	}
	if err := d.CloseIncident(ctx, id, "v6.12.60", want.MeasuredAt.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := d.CloseIncident(ctx, id, "v6.12.61", want.MeasuredAt.Add(72*time.Hour)); err == nil {
		t.Error("an incident was closed twice")
	}
	incs, err := d.Incidents(ctx, where)
	if err != nil || len(incs) != 1 {
		t.Fatalf("incidents %+v, %v", incs, err)
	}
	if i := incs[0]; i.Open() || i.ClosedTag != "v6.12.60" || i.Result != "found" || i.Subject != "eventpoll: Replace rwlock with spinlock" || i.FirstBadTag != "v6.12.58" {
		t.Errorf("incident %+v", i)
	}
	if incs, _ := d.Incidents(ctx, other); len(incs) != 0 {
		t.Errorf("system-1 has system-0's incident: %+v", incs)
	}
}

// Machines are those with measurements, the first measured first: an
// incident alone does not make one.
func TestMachinesAreThoseMeasuredInTheOrderFirstMeasured(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got, err := d.Machines(ctx); err != nil || len(got) != 0 {
		t.Errorf("an empty database: %q, %v", got, err)
	}
	for _, m := range []string{"system-1", "system-0", "system-1"} {
		w := where
		w.Machine = m
		if _, err := d.AddMeasurement(ctx, w, measurement("v6.12.57", 1)); err != nil {
			t.Fatal(err)
		}
	}
	unmeasured := where
	unmeasured.Machine = "system-2"
	if _, err := d.OpenIncident(ctx, unmeasured, Incident{LastGood: "v6.12.57", FirstBadTag: "v6.12.58"}); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Machines(ctx); err != nil || strings.Join(got, " ") != "system-1 system-0" {
		t.Errorf("machines %q, %v; want system-1 system-0", got, err)
	}
}

func TestANewerSchemaIsRefusedAndAnOlderOneMigrated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := Open(ctx, path); err == nil || !strings.Contains(err.Error(), "newer than this kbisect's") {
		t.Errorf("a newer schema: %v", err)
	}

	// An empty file (version 0) is brought to the current version.
	path = filepath.Join(t.TempDir(), "old.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := d.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion() {
		t.Errorf("version %d, %v; want %d", v, err, SchemaVersion())
	}
	d.Close()
	if d, err = Open(ctx, path); err != nil { // and opened again, untouched
		t.Fatal(err)
	}
	d.Close()

	// A database of the first schema, with a measurement, gets the
	// columns of the later ones and keeps what it had.
	path = filepath.Join(t.TempDir(), "v1.db")
	raw, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], "PRAGMA user_version = 1", "INSERT INTO machines (name) VALUES ('system-0')",
		"INSERT INTO trees (remote, branch) VALUES ('" + where.Remote + "', '" + where.Branch + "')",
		`INSERT INTO measurements (machine_id, tree_id, tag, commit_hash, release, signature, metric, kind, samples, median, threshold,
			verdict, reason, night, measured_at, state_dir) VALUES (1, 1, 'v6.12.56', 'c', 'r', 's', 'noise', 'time', '[1,2]', 1.5, 1000,
			'good', 'quiet', '', '2026-11-01T00:00:00Z', '')`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	if d, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ms, err := d.Measurements(ctx, where)
	if err != nil || len(ms) != 1 || ms[0].Tag != "v6.12.56" || ms[0].Median != 1.5 || ms[0].Baseline != "" {
		t.Fatalf("after the migration: %+v, %v", ms, err)
	}
	m := measurement("v6.12.57", 1)
	m.Baseline = "v6.12.56"
	if _, err := d.AddMeasurement(ctx, where, m); err != nil {
		t.Fatal(err)
	}
	if ms, _ := d.Measurements(ctx, where); len(ms) != 2 || ms[1].Baseline != "v6.12.56" {
		t.Errorf("a measurement after the migration: %+v", ms)
	}
}

// TestTwoWritersShareTheDatabase: two nightly runs on one controller
// (two machines) write at once through their own connections: every
// write lands, none fails on the lock.
func TestTwoWritersShareTheDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	const each = 60
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := Open(ctx, path)
			if err != nil {
				errs <- err
				return
			}
			defer d.Close()
			at := where
			at.Machine = fmt.Sprintf("system-%d", w)
			for i := 0; i < each; i++ {
				if _, err := d.AddMeasurement(ctx, at, measurement(fmt.Sprintf("v6.12.%d", i), 16)); err != nil {
					errs <- fmt.Errorf("writer %d, measurement %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for w := 0; w < 2; w++ {
		at := where
		at.Machine = fmt.Sprintf("system-%d", w)
		ms, err := d.Measurements(ctx, at)
		if err != nil || len(ms) != each {
			t.Errorf("system-%d: %d measurements, %v; want %d", w, len(ms), err, each)
		}
	}
}

// TestAKillMidWriteLeavesNothingHalfWritten kills (SIGKILL) a process in
// the middle of its writes, several times: the database opens, passes
// SQLite's integrity check, and every measurement read back has all of
// its per-CPU values — a measurement is all there or not at all.
func TestAKillMidWriteLeavesNothingHalfWritten(t *testing.T) {
	if os.Getenv("KBISECT_HISTORY_WRITER") != "" {
		writeForever(os.Getenv("KBISECT_HISTORY_WRITER"))
		return
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	const cpus = 256
	for round := 0; round < 4; round++ {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestAKillMidWriteLeavesNothingHalfWritten$")
		cmd.Env = append(os.Environ(), "KBISECT_HISTORY_WRITER="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a few writes have gone through, at a different
		// point each round.
		buf := make([]byte, 1)
		for n := 0; n < 3+round*2; n++ {
			if _, err := out.Read(buf); err != nil {
				t.Fatalf("the writer stopped: %v", err)
			}
		}
		time.Sleep(time.Duration(round) * 3 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		d, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := d.Check(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		ms, err := d.Measurements(ctx, where)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) < 3+round*2 {
			t.Errorf("round %d: %d measurements kept, the writer had reported more", round, len(ms))
		}
		for _, m := range ms {
			if len(m.CPUs) != cpus {
				t.Fatalf("round %d: measurement %d (%s) has %d CPU values of %d: half-written", round, m.ID, m.Tag, len(m.CPUs), cpus)
			}
		}
		d.Close()
		t.Logf("round %d: killed with %d measurements kept, all whole", round, len(ms))
	}
}

// writeForever is the killed writer: it adds measurements of 256 CPUs
// and prints a dot after each commit.
func writeForever(path string) {
	ctx := context.Background()
	d, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		if _, err := d.AddMeasurement(ctx, where, measurement("v6.12."+strconv.Itoa(i), 256)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write([]byte("."))
	}
}
