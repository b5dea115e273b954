package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/okengine/oke/driver"
)

// File names inside the folder.
const (
	logName     = "idempotency.json"
	journalName = "journal.json"
	lockName    = "LOCK"
	compactName = logName + ".compact"
)

// maxKeptBuf is the largest encode buffer kept between writes.
const maxKeptBuf = 64 << 10

// Driver is the file driver. Open it with Open (or OpenReadOnly); it is safe
// for concurrent use.
type Driver struct {
	dir    string
	cfg    config
	unlock func() error // releases the folder lock
	ck     *checkpoint  // the folder's CHECKPOINT
	ro     bool         // opened by OpenReadOnly

	mu      sync.Mutex // guards rows, closed and the rows log
	rows    map[driver.Key]*entry
	closed  bool
	logFile // idempotency.json

	jr journal // the runs, in journal.json (journal.go)
}

var _ driver.Driver = (*Driver)(nil)

// entry is one row in memory and the write that stored it.
type entry struct {
	row driver.Row
	seq uint64 // 0 for rows read at Open (already fsynced)
}

type config struct {
	compactMin int
	retention  time.Duration // 0: finished runs are kept
	// Tests only: fault injection, and the wait between repair attempts.
	hooks       *hooks
	healBackoff func(elapsed time.Duration) time.Duration
}

// Option configures Open.
type Option func(*config)

// WithCompactAfter sets how many dead records the log must hold, at least,
// before it is compacted (default 10 000). Compaction also needs dead records
// to outnumber live rows 2 to 1. n < 1 means 1.
func WithCompactAfter(n int) Option {
	return func(c *config) { c.compactMin = max(n, 1) }
}

// WithRetention makes the journal forget finished runs (completed or
// failed) once d has passed since they finished: their steps, their dedupe
// key and the business keys they claimed go with them, so a duplicate that
// arrives later starts over. Runs are dropped by the journal's next write
// after they pass d, and at Open. d <= 0 (the default) keeps every run.
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.retention = d }
}

// Open opens the store in dir, creating dir and empty logs if needed, and
// locks dir until Close. If another process (or another Driver in this one)
// has dir open, the error is ErrLocked. A log damaged in the middle is a
// *CorruptError; a log that lost records it had fsynced (truncated,
// emptied, deleted, replaced, or damaged inside what was fsynced) is a
// *LossError; both are ErrCorrupt. A torn record at a log's end, after what
// was fsynced, is dropped.
func Open(dir string, opts ...Option) (*Driver, error) {
	cfg := config{compactMin: 10_000}
	for _, o := range opts {
		o(&cfg)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("oke file driver: create folder: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	d, err := openLocked(dir, cfg, unlock, false)
	if err != nil {
		_ = unlock()
		return nil, err
	}
	return d, nil
}

// openLocked reads both logs of dir, whose lock is held, and (unless ro)
// makes the folder ready to write: an older oke's logs upgraded, a log
// whose fsync failed rewritten, the checkpoint written, the logs compacted
// if they need it. On error every file it opened is closed.
func openLocked(dir string, cfg config, unlock func() error, ro bool) (_ *Driver, err error) {
	ck, err := readCheckpoint(dir, cfg.hooks, ro)
	if err != nil {
		return nil, err
	}
	d := &Driver{dir: dir, cfg: cfg, unlock: unlock, ck: ck, ro: ro}
	d.initLog(dir, logName, 0, ck, &d.cfg)
	d.logFile.ro = ro
	d.rebuild = d.compactLocked
	defer func() {
		if err != nil {
			if d.f != nil {
				_ = d.f.Close()
			}
			if d.jr.f != nil {
				_ = d.jr.f.Close()
			}
			_ = ck.close()
		}
	}()
	if d.rows, err = replayRows(&d.logFile); err != nil {
		return nil, err
	}
	if err := d.jr.open(dir, ck, cfg, ro); err != nil {
		return nil, err
	}
	if ro {
		if d.missing && d.jr.missing {
			return nil, &noDataError{dir: dir}
		}
		return d, nil
	}
	// Make the logs' creation durable.
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("oke file driver: fsync folder %s: %w", dir, err)
	}
	// A log an older oke wrote has no generation, or unchained records
	// (format version 1): rewrite it once, chained, before the folder gets
	// its first checkpoint (or the checkpoint records the new generation).
	// A log whose fsync failed in the last process may hold pages that
	// never reached the disk: rewrite it from what was read.
	for i, l := range []*logFile{&d.logFile, &d.jr.logFile} {
		why := "written by an older oke"
		if e := ck.want(i); e != nil && e.suspect {
			why = "an fsync of it failed in the last process"
		} else if l.gen != "" && l.chained {
			continue
		}
		mu := &d.mu
		if i == 1 {
			mu = &d.jr.mu
		}
		mu.Lock()
		err := l.rebuild()
		mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("oke file driver: rewrite %s (%s): %w", l.path, why, err)
		}
	}
	if err := ck.settle([2]logState{d.state(), d.jr.state()}); err != nil {
		return nil, fmt.Errorf("oke file driver: write %s: %w", ck.path(), err)
	}
	d.mu.Lock()
	d.maybeCompact()
	d.mu.Unlock()
	d.jr.mu.Lock()
	d.jr.maintain()
	d.jr.mu.Unlock()
	return d, nil
}

// now is the store's clock: the wall clock in UTC, as stored in the log.
func now() time.Time { return time.Now().UTC() }

// usable reports why the driver cannot serve a call, if it cannot: only
// when it is closed or ctx is done. A rows log whose write or fsync failed
// tries to heal here (see logFile.heal); if it cannot yet, calls that write
// fail, and calls that show what is durable (a replay) go on. mu held.
func (d *Driver) usable(ctx context.Context) error {
	if d.closed {
		return driver.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.fault.Load() != nil {
		_ = d.heal(false)
	}
	return nil
}

// write appends recs to the log in one write and returns its sequence number.
// mu held. On error nothing was appended (or the driver is stopped).
func (d *Driver) write(recs ...*record) (uint64, error) {
	buf, chain := d.buf[:0], d.last
	for _, r := range recs {
		var err error
		if buf, err = appendRecord(buf, r, &chain); err != nil {
			return 0, err
		}
	}
	return d.appendLines(buf, len(recs), d.last, chain)
}

// Claim implements driver.Driver.
func (d *Driver) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	if d.ro {
		return driver.ClaimResult{}, readOnlyError("claim", d.dir)
	}
	if !validKey(req.Key) {
		// JSON would store U+FFFD in place of the bad bytes: after a restart
		// the row would answer to another key, or two scopes would share it.
		return driver.ClaimResult{}, fmt.Errorf("oke file driver: claim: key %+q is not valid UTF-8 and cannot be stored", req.Key)
	}
	d.mu.Lock()
	if err := d.usable(ctx); err != nil {
		d.mu.Unlock()
		return driver.ClaimResult{}, err
	}
	t := now()
	res := driver.ClaimResult{Now: t}
	old, ok := d.rows[req.Key]
	var oldRow *driver.Row
	if ok {
		oldRow = &old.row
		var replace bool
		if replace, res.TookOver = driver.MayReplace(oldRow, req.Fingerprint, t); !replace {
			res.Row = copyRow(&old.row)
			seq := old.seq
			d.mu.Unlock()
			if res.Row.State == driver.Completed {
				// A replay: show only a response that is durable.
				if err := d.waitDurable(seq); err != nil {
					return driver.ClaimResult{}, err
				}
			}
			return res, nil
		}
		prev := copyRow(&old.row)
		res.Previous = &prev
	}
	row := driver.ClaimedRow(req, oldRow, res.TookOver, t)
	seq, err := d.write(putRecord(&row))
	if err != nil {
		d.mu.Unlock()
		return driver.ClaimResult{}, err
	}
	d.rows[req.Key] = &entry{row: row, seq: seq}
	d.maybeCompact()
	d.mu.Unlock()
	res.Claimed = true
	res.Row = row
	if row.RunID != "" {
		// The link to a journal run must survive an OS crash, or a retry
		// would start the run over instead of resuming it.
		if err := d.waitDurable(seq); err != nil {
			return driver.ClaimResult{}, err
		}
	}
	return res, nil
}

func validKey(k driver.Key) bool {
	return utf8.ValidString(k.Tenant) && utf8.ValidString(k.Principal) &&
		utf8.ValidString(k.Flow) && utf8.ValidString(k.Key)
}

// held returns the Running row with key held by owner. mu held.
func (d *Driver) held(key driver.Key, owner string) (*entry, error) {
	e, ok := d.rows[key]
	if !ok || e.row.State != driver.Running || e.row.Owner != owner {
		return nil, driver.ErrNotOwner
	}
	return e, nil
}

// Renew implements driver.Driver.
func (d *Driver) Renew(ctx context.Context, key driver.Key, owner string, lease time.Duration) error {
	if d.ro {
		return readOnlyError("renew", d.dir)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(ctx); err != nil {
		return err
	}
	e, err := d.held(key, owner)
	if err != nil {
		return err
	}
	row := e.row
	row.LeaseUntil = now().Add(lease)
	seq, err := d.write(putRecord(&row))
	if err != nil {
		return err
	}
	d.rows[key] = &entry{row: row, seq: seq}
	d.maybeCompact()
	return nil
}

// Complete implements driver.Driver. It returns once the response is fsynced.
func (d *Driver) Complete(ctx context.Context, key driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	if d.ro {
		return readOnlyError("complete", d.dir)
	}
	d.mu.Lock()
	if err := d.usable(ctx); err != nil {
		d.mu.Unlock()
		return err
	}
	e, err := d.held(key, owner)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	t := now()
	stored := resp
	stored.Body = slices.Clone(resp.Body)
	row := e.row
	row.State = driver.Completed
	row.Owner = ""
	row.LeaseUntil = time.Time{}
	row.CompletedAt = t
	row.ExpiresAt = t.Add(ttl)
	row.Response = &stored
	seq, err := d.write(putRecord(&row))
	if err != nil {
		d.mu.Unlock()
		return err
	}
	d.rows[key] = &entry{row: row, seq: seq}
	d.maybeCompact()
	d.mu.Unlock()
	return d.waitDurable(seq)
}

// Release implements driver.Driver.
func (d *Driver) Release(ctx context.Context, key driver.Key, owner string) error {
	if d.ro {
		return readOnlyError("release", d.dir)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(ctx); err != nil {
		return err
	}
	if _, err := d.held(key, owner); err != nil {
		return err
	}
	if _, err := d.write(delRecord(key)); err != nil {
		return err
	}
	delete(d.rows, key)
	d.maybeCompact()
	return nil
}

// Get implements driver.Driver.
func (d *Driver) Get(ctx context.Context, key driver.Key) (driver.Row, error) {
	d.mu.Lock()
	if err := d.usable(ctx); err != nil {
		d.mu.Unlock()
		return driver.Row{}, err
	}
	e, ok := d.rows[key]
	if !ok {
		d.mu.Unlock()
		return driver.Row{}, driver.ErrNotFound
	}
	row, seq := copyRow(&e.row), e.seq
	d.mu.Unlock()
	if row.State == driver.Completed {
		if err := d.waitDurable(seq); err != nil {
			return driver.Row{}, err
		}
	}
	return row, nil
}

// List implements driver.Driver. A limit < 1 lists every row.
func (d *Driver) List(ctx context.Context, after driver.Key, limit int) ([]driver.Row, error) {
	d.mu.Lock()
	if err := d.usable(ctx); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	keys := make([]driver.Key, 0, len(d.rows))
	for k := range d.rows {
		if after == (driver.Key{}) || driver.KeyLess(after, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b driver.Key) int {
		switch {
		case driver.KeyLess(a, b):
			return -1
		case driver.KeyLess(b, a):
			return 1
		}
		return 0
	})
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]driver.Row, len(keys))
	var seq uint64
	for i, k := range keys {
		e := d.rows[k]
		out[i] = copyRow(&e.row)
		if e.row.State == driver.Completed {
			seq = max(seq, e.seq)
		}
	}
	d.mu.Unlock()
	if err := d.waitDurable(seq); err != nil {
		return nil, err
	}
	return out, nil
}

// Sweep implements driver.Driver. A limit < 1 deletes every expired row.
func (d *Driver) Sweep(ctx context.Context, limit int) (int, error) {
	if d.ro {
		return 0, readOnlyError("sweep", d.dir)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(ctx); err != nil {
		return 0, err
	}
	t := now()
	var dels []*record
	for k, e := range d.rows {
		if limit > 0 && len(dels) >= limit {
			break
		}
		if e.row.Expired(t) {
			dels = append(dels, delRecord(k))
		}
	}
	if len(dels) == 0 {
		return 0, nil
	}
	if _, err := d.write(dels...); err != nil {
		return 0, err
	}
	for _, r := range dels {
		delete(d.rows, *r.Key)
	}
	d.maybeCompact()
	return len(dels), nil
}

// Close fsyncs both logs, closes them and releases the folder lock. Later calls
// fail with driver.ErrClosed. Closing twice is a no-op. If a log's write or
// fsync failed and it cannot be healed now, what was written to it since is
// not durable, and Close says so (driver.ErrUnavailable).
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	rowsErr := d.closeLog()
	d.rows = nil
	journalErr := d.jr.close()
	return errors.Join(rowsErr, journalErr, d.ck.close(), d.unlock())
}

// copyRow returns a copy that shares no memory with the stored row.
func copyRow(r *driver.Row) driver.Row {
	c := *r
	if r.Response != nil {
		resp := *r.Response
		resp.Body = slices.Clone(r.Response.Body)
		c.Response = &resp
	}
	return c
}
