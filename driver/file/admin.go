package file

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/okengine/oke/driver"
)

// The operator's primitives: the optional interfaces the admin surface and
// the CLI use to delete and find rows and to cancel runs.
var (
	_ driver.RowDeleter     = (*Driver)(nil)
	_ driver.IdleRowDeleter = (*Driver)(nil)
	_ driver.RowFinder      = (*Driver)(nil)
	_ driver.RunCanceller   = (*Driver)(nil)
	_ driver.RunResumer     = (*Driver)(nil)
)

// Delete implements driver.RowDeleter: one del record, fsynced before it
// returns.
func (d *Driver) Delete(ctx context.Context, key driver.Key) error {
	if d.ro {
		return readOnlyError("delete row", d.dir)
	}
	d.mu.Lock()
	if err := d.usable(ctx); err != nil {
		d.mu.Unlock()
		return err
	}
	if _, ok := d.rows[key]; !ok {
		d.mu.Unlock()
		return driver.ErrNotFound
	}
	seq, err := d.write(delRecord(key))
	if err != nil {
		d.mu.Unlock()
		return err
	}
	delete(d.rows, key)
	d.maybeCompact()
	d.mu.Unlock()
	return d.waitDurable(seq)
}

// DeleteIdle implements driver.IdleRowDeleter: Delete's del record,
// written only when no live lease holds the row, under the same lock as
// every claim.
func (d *Driver) DeleteIdle(ctx context.Context, key driver.Key) (driver.Row, bool, error) {
	if d.ro {
		return driver.Row{}, false, readOnlyError("delete row", d.dir)
	}
	d.mu.Lock()
	if err := d.usable(ctx); err != nil {
		d.mu.Unlock()
		return driver.Row{}, false, err
	}
	r, ok := d.rows[key]
	if !ok {
		d.mu.Unlock()
		return driver.Row{}, false, driver.ErrNotFound
	}
	if r.row.State == driver.Running && now().Before(r.row.LeaseUntil) {
		row := copyRow(&r.row)
		d.mu.Unlock()
		return row, true, nil
	}
	seq, err := d.write(delRecord(key))
	if err != nil {
		d.mu.Unlock()
		return driver.Row{}, false, err
	}
	delete(d.rows, key)
	d.maybeCompact()
	d.mu.Unlock()
	return driver.Row{}, false, d.waitDurable(seq)
}

// FindRows implements driver.RowFinder. It reads every row (one map walk):
// an operator's look-up, not a request's.
func (d *Driver) FindRows(ctx context.Context, key driver.Key, limit int) ([]driver.Row, error) {
	d.mu.Lock()
	if err := d.usable(ctx); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	var out []driver.Row
	var seq uint64
	if key.Tenant != "" && key.Principal != "" && key.Flow != "" {
		if e, ok := d.rows[key]; ok {
			out, seq = append(out, copyRow(&e.row)), e.seq
		}
	} else {
		for k, e := range d.rows {
			if driver.MatchKey(k, key) {
				out = append(out, copyRow(&e.row))
				seq = max(seq, e.seq)
			}
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b driver.Row) int {
		switch {
		case driver.KeyLess(a.Key, b.Key):
			return -1
		case driver.KeyLess(b.Key, a.Key):
			return 1
		}
		return 0
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	if err := d.waitDurable(seq); err != nil {
		return nil, err
	}
	return out, nil
}

// CancelRun implements driver.RunCanceller: one finish record, fsynced
// before it returns.
func (d *Driver) CancelRun(ctx context.Context, id string, result driver.Response, msg string) (driver.Run, error) {
	if d.ro {
		return driver.Run{}, readOnlyError("cancel run", d.dir)
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return driver.Run{}, err
	}
	e := j.runs[id]
	if e == nil {
		j.mu.Unlock()
		return driver.Run{}, fmt.Errorf("oke file driver: cancel run %q: %w", id, driver.ErrNotFound)
	}
	t := now()
	switch {
	case e.run.Status.Finished():
		j.mu.Unlock()
		return driver.Run{}, fmt.Errorf("oke file driver: cancel run %q: %w", id, driver.ErrRunFinished)
	case e.run.Owner != "" && t.Before(e.run.LeaseUntil):
		j.mu.Unlock()
		return driver.Run{}, fmt.Errorf("oke file driver: cancel run %q: %w", id, driver.ErrRunHeld)
	}
	r := e.run
	r.Status, r.WakeAt, r.UpdatedAt = driver.RunFailed, time.Time{}, t
	r.Result, r.Error = storedResponse(&result), strings.ToValidUTF8(msg, "\uFFFD")
	seq, size, err := j.write(finishRecord(&r, 0))
	if err != nil {
		j.mu.Unlock()
		return driver.Run{}, err
	}
	j.applyFinish(e, r.Status, r.WakeAt, r.Result, r.Error, r.UpdatedAt, seq, size)
	out := copyRun(&e.run)
	out.Steps = len(e.steps)
	j.maintain()
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return driver.Run{}, err
	}
	return out, nil
}

// ResumeRun implements driver.RunResumer: one resume record, fsynced
// before it returns.
func (d *Driver) ResumeRun(ctx context.Context, id string) (driver.Run, error) {
	if d.ro {
		return driver.Run{}, readOnlyError("resume run", d.dir)
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return driver.Run{}, err
	}
	e := j.runs[id]
	if e == nil {
		j.mu.Unlock()
		return driver.Run{}, fmt.Errorf("oke file driver: resume run %q: %w", id, driver.ErrNotFound)
	}
	if e.run.Status != driver.RunDead {
		j.mu.Unlock()
		return driver.Run{}, fmt.Errorf("oke file driver: resume run %q (%v): %w", id, e.run.Status, driver.ErrRunNotDead)
	}
	t := now()
	r := e.run
	r.WakeAt, r.UpdatedAt = t, t
	seq, size, err := j.write(resumeRecord(&r))
	if err != nil {
		j.mu.Unlock()
		return driver.Run{}, err
	}
	j.applyResume(e, r.WakeAt, r.UpdatedAt, seq, size)
	out := copyRun(&e.run)
	out.Steps = len(e.steps)
	j.maintain()
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return driver.Run{}, err
	}
	return out, nil
}
