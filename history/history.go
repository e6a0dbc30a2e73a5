// Package history is what nightly runs keep about each machine: the
// release tags measured, with every measurement's numbers per CPU and
// its verdict, and the regressions found (incidents) with their
// bisection's answer. It is an SQLite file (modernc.org/sqlite, pure
// Go), versioned with migrations. Every change is one transaction in
// write-ahead-log mode, synced before it returns: a nightly run killed
// mid-write leaves the database as it was before the change, and two
// nightly runs on one controller (two machines) wait for each other's
// writes instead of failing.
//
// It imports only verdict and the internal packages: nightly turns its
// measurements and bisections into rows.
package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"kbisect/verdict"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite" // the database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DB is an open history database.
type DB struct {
	Path string
	db   *sql.DB
}

// migrations are the schema, one step per version: migrations[i] takes
// a database from version i to i+1. A step is never changed once
// released; a new version appends one.
var migrations = []string{
	`CREATE TABLE machines (
		id   INTEGER PRIMARY KEY,
		name TEXT NOT NULL UNIQUE
	);
	CREATE TABLE trees (
		id     INTEGER PRIMARY KEY,
		remote TEXT NOT NULL,
		branch TEXT NOT NULL,
		UNIQUE (remote, branch)
	);
	CREATE TABLE measurements (
		id          INTEGER PRIMARY KEY,
		machine_id  INTEGER NOT NULL REFERENCES machines(id),
		tree_id     INTEGER NOT NULL REFERENCES trees(id),
		tag         TEXT NOT NULL,
		commit_hash TEXT NOT NULL,
		release     TEXT NOT NULL,
		signature   TEXT NOT NULL,
		metric      TEXT NOT NULL,
		kind        TEXT NOT NULL,
		samples     TEXT NOT NULL,
		median      REAL NOT NULL,
		threshold   REAL NOT NULL,
		verdict     TEXT NOT NULL,
		reason      TEXT NOT NULL,
		night       TEXT NOT NULL,
		measured_at TEXT NOT NULL,
		state_dir   TEXT NOT NULL
	);
	CREATE INDEX measurements_by_tag ON measurements (machine_id, tree_id, tag);
	CREATE TABLE cpu_values (
		measurement_id INTEGER NOT NULL REFERENCES measurements(id) ON DELETE CASCADE,
		cpu            INTEGER NOT NULL,
		name           TEXT NOT NULL,
		value          REAL NOT NULL,
		PRIMARY KEY (measurement_id, cpu, name)
	);
	CREATE TABLE incidents (
		id               INTEGER PRIMARY KEY,
		machine_id       INTEGER NOT NULL REFERENCES machines(id),
		tree_id          INTEGER NOT NULL REFERENCES trees(id),
		last_good_tag    TEXT NOT NULL,
		first_bad_tag    TEXT NOT NULL,
		result           TEXT NOT NULL,
		first_bad_commit TEXT NOT NULL,
		subject          TEXT NOT NULL,
		state_dir        TEXT NOT NULL,
		opened_at        TEXT NOT NULL,
		closed_tag       TEXT NOT NULL,
		closed_at        TEXT NOT NULL
	);`,
	// 2: the release a measurement was judged against, when it was (a
	// ratio or auto threshold, or the baseline measured beside it).
	`ALTER TABLE measurements ADD COLUMN baseline_tag TEXT NOT NULL DEFAULT '';`,
}

// SchemaVersion is the schema this kbisect writes.
func SchemaVersion() int { return len(migrations) }

// Open opens (or creates) the database at path and brings its schema up
// to date. A database made by a newer kbisect is refused, not changed.
func Open(ctx context.Context, path string) (*DB, error) {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("history %s: the directory %s does not exist", path, filepath.Dir(path))
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(30000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(FULL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate") // writers queue at BEGIN, not at their first write
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	d := &DB{Path: path, db: db}
	if err := d.setUp(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	return d, nil
}

// setUp opens the first connection (which switches a new file to
// write-ahead-log mode) and migrates. Two processes that open a new file
// at once both hold a read lock when they ask for the write lock the
// switch needs: SQLite answers one of them busy at once, without its
// busy timeout, rather than deadlock. The loser starts over, as SQLite
// says to, until the busy timeout's 30 s are spent.
func (d *DB) setUp(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := d.migrate(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

func (d *DB) migrate(ctx context.Context) error {
	// Read first: a reader (kbisect history) need not be able to write.
	var have int
	if err := d.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have); err != nil {
		return err
	}
	if have == len(migrations) {
		return nil
	}
	return d.write(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this kbisect's (%d): use a newer kbisect, or another --db", v, len(migrations))
		}
		for ; v < len(migrations); v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migration to version %d: %w", v+1, err)
			}
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
		return err
	})
}

// write runs f in one transaction: all of it is kept, or none.
func (d *DB) write(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Where names a machine's history on one tree: the machine (its job's
// machine.name), the remote and the branch nightly follows.
type Where struct {
	Machine, Remote, Branch string
}

// ids finds (or makes) the machine's and the tree's rows.
func ids(ctx context.Context, tx *sql.Tx, w Where) (machine, tree int64, err error) {
	if _, err = tx.ExecContext(ctx, "INSERT OR IGNORE INTO machines (name) VALUES (?)", w.Machine); err != nil {
		return
	}
	if err = tx.QueryRowContext(ctx, "SELECT id FROM machines WHERE name = ?", w.Machine).Scan(&machine); err != nil {
		return
	}
	if _, err = tx.ExecContext(ctx, "INSERT OR IGNORE INTO trees (remote, branch) VALUES (?, ?)", w.Remote, w.Branch); err != nil {
		return
	}
	err = tx.QueryRowContext(ctx, "SELECT id FROM trees WHERE remote = ? AND branch = ?", w.Remote, w.Branch).Scan(&tree)
	return
}

// addRow inserts one row of the machine's history on the tree, and what
// more (when not nil) adds for it, in one transaction, and returns the
// row's id. query's first two values are the machine's and the tree's
// ids, which the row's own values follow.
func (d *DB) addRow(ctx context.Context, w Where, more func(tx *sql.Tx, id int64) error, query string, values ...any) (int64, error) {
	var id int64
	err := d.write(ctx, func(tx *sql.Tx) error {
		machine, tree, err := ids(ctx, tx, w)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, query, append([]any{machine, tree}, values...)...)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil || more == nil {
			return err
		}
		return more(tx, id)
	})
	return id, err
}

// inTree joins the rows of a table (by its alias: m for measurements, i
// for incidents) to their machine and tree, and keeps those of one; its
// values are Where.values.
func inTree(alias string) string {
	return "JOIN machines a ON a.id = " + alias + ".machine_id JOIN trees t ON t.id = " + alias + ".tree_id WHERE a.name = ? AND t.remote = ? AND t.branch = ?"
}

// values are the values of inTree's query.
func (w Where) values() []any { return []any{w.Machine, w.Remote, w.Branch} }

// Measurement is one release tag measured on a machine: its samples'
// values of the verdict's metric, their median, the verdict and the
// per-CPU numbers of the sample with the median.
type Measurement struct {
	ID        int64
	Tag       string
	Commit    string
	Release   string
	Signature string
	Metric    string
	Kind      string
	Values    []float64
	Median    float64
	Threshold float64
	// Verdict is good, bad, skip or unsure, or drift: the baseline,
	// measured again beside it, is bad too (the machine changed). The
	// column holds its word (TEXT).
	Verdict verdict.Verdict
	Reason  string
	// Baseline is the release it was judged against ("" for none: an
	// absolute threshold decided it alone).
	Baseline string
	// Night is the nightly run that measured it (its start, RFC 3339).
	Night      string
	MeasuredAt time.Time
	StateDir   string
	CPUs       []CPUValue
}

// CPUValue is one CPU's value of one summary metric.
type CPUValue struct {
	CPU   int
	Name  string
	Value float64
}

const timeFormat = time.RFC3339Nano

// AddMeasurement records a measurement, with its per-CPU values, in one
// transaction.
func (d *DB) AddMeasurement(ctx context.Context, w Where, m Measurement) (int64, error) {
	values, err := json.Marshal(m.Values)
	if err != nil {
		return 0, err
	}
	cpus := func(tx *sql.Tx, id int64) error {
		for _, c := range m.CPUs {
			if _, err := tx.ExecContext(ctx, "INSERT INTO cpu_values (measurement_id, cpu, name, value) VALUES (?, ?, ?, ?)", id, c.CPU, c.Name, c.Value); err != nil {
				return err
			}
		}
		return nil
	}
	return d.addRow(ctx, w, cpus, `INSERT INTO measurements (machine_id, tree_id, tag, commit_hash, release, signature, metric, kind,
			samples, median, threshold, verdict, reason, night, measured_at, state_dir, baseline_tag)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.Tag, m.Commit, m.Release, m.Signature, m.Metric, m.Kind, string(values), m.Median, m.Threshold,
		string(m.Verdict), m.Reason, m.Night, m.MeasuredAt.UTC().Format(timeFormat), m.StateDir, m.Baseline)
}

// Measurements returns the machine's measurements on the tree, oldest
// first, with their per-CPU values.
func (d *DB) Measurements(ctx context.Context, w Where) ([]Measurement, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT m.id, m.tag, m.commit_hash, m.release, m.signature, m.metric, m.kind, m.samples, m.median,
		m.threshold, m.verdict, m.reason, m.night, m.measured_at, m.state_dir, m.baseline_tag
		FROM measurements m `+inTree("m")+` ORDER BY m.id`, w.values()...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Measurement
	byID := map[int64]int{}
	for rows.Next() {
		var m Measurement
		var samples, at string
		if err := rows.Scan(&m.ID, &m.Tag, &m.Commit, &m.Release, &m.Signature, &m.Metric, &m.Kind, &samples, &m.Median,
			&m.Threshold, &m.Verdict, &m.Reason, &m.Night, &at, &m.StateDir, &m.Baseline); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(samples), &m.Values); err != nil {
			return nil, fmt.Errorf("measurement %d: samples: %w", m.ID, err)
		}
		m.MeasuredAt, _ = time.Parse(timeFormat, at)
		byID[m.ID] = len(out)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	cpus, err := d.db.QueryContext(ctx, `SELECT c.measurement_id, c.cpu, c.name, c.value FROM cpu_values c
		JOIN measurements m ON m.id = c.measurement_id `+inTree("m")+` ORDER BY c.measurement_id, c.cpu, c.name`, w.values()...)
	if err != nil {
		return nil, err
	}
	defer cpus.Close()
	for cpus.Next() {
		var id int64
		var c CPUValue
		if err := cpus.Scan(&id, &c.CPU, &c.Name, &c.Value); err != nil {
			return nil, err
		}
		if i, ok := byID[id]; ok {
			out[i].CPUs = append(out[i].CPUs, c)
		}
	}
	return out, cpus.Err()
}

// Incident is a regression found by a nightly run: the last good and the
// first bad tag, and what the bisection between them answered. It stays
// open until a later tag measures good again.
type Incident struct {
	ID          int64
	LastGood    string
	FirstBadTag string
	// Result is the bisection's ("found", "inconclusive", …; "" while it
	// has not ended), FirstBad the commit it named and Subject its
	// subject line.
	Result   string
	FirstBad string
	Subject  string
	StateDir string
	OpenedAt time.Time
	// ClosedTag is the tag that measured good again ("" while open).
	ClosedTag string
	ClosedAt  time.Time
}

// Open reports whether the incident is still open.
func (i Incident) Open() bool { return i.ClosedTag == "" }

// OpenIncident records a new incident.
func (d *DB) OpenIncident(ctx context.Context, w Where, inc Incident) (int64, error) {
	return d.addRow(ctx, w, nil, `INSERT INTO incidents (machine_id, tree_id, last_good_tag, first_bad_tag, result, first_bad_commit,
			subject, state_dir, opened_at, closed_tag, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', '')`,
		inc.LastGood, inc.FirstBadTag, inc.Result, inc.FirstBad, inc.Subject, inc.StateDir, inc.OpenedAt.UTC().Format(timeFormat))
}

// SetBisection records what the incident's bisection answered.
func (d *DB) SetBisection(ctx context.Context, id int64, result, firstBad, subject string) error {
	return d.update(ctx, "UPDATE incidents SET result = ?, first_bad_commit = ?, subject = ? WHERE id = ?", result, firstBad, subject, id)
}

// CloseIncident records the tag that fixed the incident.
func (d *DB) CloseIncident(ctx context.Context, id int64, tag string, at time.Time) error {
	return d.update(ctx, "UPDATE incidents SET closed_tag = ?, closed_at = ? WHERE id = ? AND closed_tag = ''", tag, at.UTC().Format(timeFormat), id)
}

func (d *DB) update(ctx context.Context, query string, args ...any) error {
	return d.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, fmt.Errorf("incident %v: no such incident, or closed already", args[len(args)-1]))
		}
		return nil
	})
}

// Incidents returns the machine's incidents on the tree, oldest first.
func (d *DB) Incidents(ctx context.Context, w Where) ([]Incident, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT i.id, i.last_good_tag, i.first_bad_tag, i.result, i.first_bad_commit, i.subject, i.state_dir,
		i.opened_at, i.closed_tag, i.closed_at
		FROM incidents i `+inTree("i")+` ORDER BY i.id`, w.values()...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Incident
	for rows.Next() {
		var i Incident
		var opened, closed string
		if err := rows.Scan(&i.ID, &i.LastGood, &i.FirstBadTag, &i.Result, &i.FirstBad, &i.Subject, &i.StateDir, &opened, &i.ClosedTag, &closed); err != nil {
			return nil, err
		}
		i.OpenedAt, _ = time.Parse(timeFormat, opened)
		i.ClosedAt, _ = time.Parse(timeFormat, closed)
		out = append(out, i)
	}
	return out, rows.Err()
}

// Check runs SQLite's integrity check: nil when the file is sound.
func (d *DB) Check(ctx context.Context) error {
	var res string
	if err := d.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil {
		return err
	}
	if res != "ok" {
		return fmt.Errorf("history %s: integrity check: %s", d.Path, res)
	}
	return nil
}

// Machines returns the machines the database holds measurements of, in
// the order first measured.
func (d *DB) Machines(ctx context.Context) ([]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT a.name FROM machines a JOIN measurements m ON m.machine_id = a.id
		GROUP BY a.id ORDER BY MIN(m.id)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// Trees returns where the machine has a history, in the order first
// measured.
func (d *DB) Trees(ctx context.Context, machine string) ([]Where, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT t.remote, t.branch FROM trees t JOIN measurements m ON m.tree_id = t.id
		JOIN machines a ON a.id = m.machine_id WHERE a.name = ? GROUP BY t.id ORDER BY MIN(m.id)`, machine)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Where
	for rows.Next() {
		w := Where{Machine: machine}
		if err := rows.Scan(&w.Remote, &w.Branch); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}
