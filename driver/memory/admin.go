package memory

import (
	"context"
	"slices"
	"sort"
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

// Delete implements driver.RowDeleter.
func (d *Driver) Delete(ctx context.Context, key driver.Key) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	if _, ok := d.rows[key]; !ok {
		return driver.ErrNotFound
	}
	delete(d.rows, key)
	return nil
}

// DeleteIdle implements driver.IdleRowDeleter.
func (d *Driver) DeleteIdle(ctx context.Context, key driver.Key) (driver.Row, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Row{}, false, err
	}
	r, ok := d.rows[key]
	if !ok {
		return driver.Row{}, false, driver.ErrNotFound
	}
	if r.State == driver.Running && d.now().Before(r.LeaseUntil) {
		return copyRow(r), true, nil
	}
	delete(d.rows, key)
	return driver.Row{}, false, nil
}

// FindRows implements driver.RowFinder.
func (d *Driver) FindRows(ctx context.Context, key driver.Key, limit int) ([]driver.Row, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	var keys []driver.Key
	for k := range d.rows {
		if driver.MatchKey(k, key) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return driver.KeyLess(keys[i], keys[j]) })
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]driver.Row, len(keys))
	for i, k := range keys {
		out[i] = copyRow(d.rows[k])
	}
	return out, nil
}

// CancelRun implements driver.RunCanceller.
func (d *Driver) CancelRun(ctx context.Context, id string, result driver.Response, msg string) (driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, err
	}
	e, ok := d.runs[id]
	if !ok {
		return driver.Run{}, driver.ErrNotFound
	}
	r := &e.run
	now := d.now()
	switch {
	case r.Status.Finished():
		return driver.Run{}, driver.ErrRunFinished
	case r.Owner != "" && now.Before(r.LeaseUntil):
		return driver.Run{}, driver.ErrRunHeld
	}
	if len(e.steps) > 0 {
		d.stepBytes[r.Flow] = len(e.steps)
	}
	e.result = result
	e.result.Body = slices.Clone(result.Body)
	r.Status, r.Owner, r.LeaseUntil, r.WakeAt = driver.RunFailed, "", time.Time{}, time.Time{}
	r.Result, r.Error, r.UpdatedAt = &e.result, msg, now
	out := copyRun(r)
	out.Steps = e.nsteps
	return out, nil
}

// ResumeRun implements driver.RunResumer.
func (d *Driver) ResumeRun(ctx context.Context, id string) (driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, err
	}
	e, ok := d.runs[id]
	if !ok {
		return driver.Run{}, driver.ErrNotFound
	}
	r := &e.run
	if r.Status != driver.RunDead {
		return driver.Run{}, driver.ErrRunNotDead
	}
	now := d.now()
	r.Status, r.Owner, r.LeaseUntil, r.WakeAt = driver.RunRunning, "", time.Time{}, now
	r.Strikes, r.NextAttempts, r.UpdatedAt = 0, 0, now
	out := copyRun(r)
	out.Steps = e.nsteps
	return out, nil
}
