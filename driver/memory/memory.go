// Package memory is an in-process oke driver for tests and examples. It keeps
// everything in maps guarded by one mutex and loses it all when the process
// ends.
package memory

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/okengine/oke/driver"
)

// Driver is the in-memory driver. The zero value is not usable; call New.
type Driver struct {
	mu      sync.Mutex
	rows    map[driver.Key]*driver.Row
	runs    map[string]*runEntry
	lastRun *runEntry         // the run a fenced call last found (runs are never removed)
	dedupe  map[string]string // dedupe key → run ID
	// stepBytes: flow → how many bytes of steps its last finished run
	// kept, so that the next run's buffer is made the right size at once.
	stepBytes map[string]int
	claims    map[string]string          // business key → run ID
	signals   map[string][]driver.Signal // run ID → its signals, in Seq order (signal.go)
	now       func() time.Time
	closed    bool
}

var (
	_ driver.Driver   = (*Driver)(nil)
	_ driver.Journal  = (*Driver)(nil)
	_ driver.Signaler = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver)

// WithClock makes the driver read time from now instead of its own clock. Tests
// use it to move leases and TTLs forward without sleeping.
func WithClock(now func() time.Time) Option {
	return func(d *Driver) { d.now = now }
}

// New returns an empty in-memory driver.
func New(opts ...Option) *Driver {
	d := &Driver{
		rows:      make(map[driver.Key]*driver.Row),
		runs:      make(map[string]*runEntry),
		dedupe:    make(map[string]string),
		stepBytes: make(map[string]int),
		claims:    make(map[string]string),
		now:       clock(),
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// clock returns the driver's own clock: the wall time when it was made plus
// the monotonic time since, which is time.Now read with one clock instead of
// two. It keeps its monotonic reading, as time.Now's does; it differs from
// time.Now only if the wall clock is set while the driver lives.
func clock() func() time.Time {
	base := time.Now()
	return func() time.Time { return base.Add(time.Since(base)) }
}

func (d *Driver) check(ctx context.Context) error {
	if d.closed {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// Claim implements driver.Driver.
func (d *Driver) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.ClaimResult{}, err
	}
	now := d.now()
	res := driver.ClaimResult{Now: now}
	old, ok := d.rows[req.Key]
	if ok {
		var replace bool
		if replace, res.TookOver = driver.MayReplace(old, req.Fingerprint, now); !replace {
			res.Row = copyRow(old)
			return res, nil
		}
		prev := copyRow(old)
		res.Previous = &prev
	}
	claimed := driver.ClaimedRow(req, old, res.TookOver, now)
	row := &claimed
	d.rows[req.Key] = row
	res.Claimed = true
	res.Row = copyRow(row)
	return res, nil
}

// held returns the Running row with key held by owner.
func (d *Driver) held(key driver.Key, owner string) (*driver.Row, error) {
	r, ok := d.rows[key]
	if !ok || r.State != driver.Running || r.Owner != owner {
		return nil, driver.ErrNotOwner
	}
	return r, nil
}

// Renew implements driver.Driver.
func (d *Driver) Renew(ctx context.Context, key driver.Key, owner string, lease time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	r, err := d.held(key, owner)
	if err != nil {
		return err
	}
	r.LeaseUntil = d.now().Add(lease)
	return nil
}

// Complete implements driver.Driver.
func (d *Driver) Complete(ctx context.Context, key driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	r, err := d.held(key, owner)
	if err != nil {
		return err
	}
	now := d.now()
	stored := resp
	stored.Body = append([]byte(nil), resp.Body...)
	r.State = driver.Completed
	r.Owner = ""
	r.LeaseUntil = time.Time{}
	r.CompletedAt = now
	r.ExpiresAt = now.Add(ttl)
	r.Response = &stored
	return nil
}

// Release implements driver.Driver.
func (d *Driver) Release(ctx context.Context, key driver.Key, owner string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	if _, err := d.held(key, owner); err != nil {
		return err
	}
	delete(d.rows, key)
	return nil
}

// Get implements driver.Driver.
func (d *Driver) Get(ctx context.Context, key driver.Key) (driver.Row, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Row{}, err
	}
	r, ok := d.rows[key]
	if !ok {
		return driver.Row{}, driver.ErrNotFound
	}
	return copyRow(r), nil
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context, after driver.Key, limit int) ([]driver.Row, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	keys := make([]driver.Key, 0, len(d.rows))
	for k := range d.rows {
		if after == (driver.Key{}) || driver.KeyLess(after, k) {
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

// Sweep implements driver.Driver.
func (d *Driver) Sweep(ctx context.Context, limit int) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	now := d.now()
	n := 0
	for k, r := range d.rows {
		if limit > 0 && n >= limit {
			break
		}
		if r.Expired(now) {
			delete(d.rows, k)
			n++
		}
	}
	return n, nil
}

// Close implements driver.Driver.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}

// copyRow returns a copy that shares no memory the caller could mutate.
func copyRow(r *driver.Row) driver.Row {
	c := *r
	if r.Response != nil {
		resp := *r.Response
		resp.Body = slices.Clone(resp.Body)
		c.Response = &resp
	}
	return c
}
