package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/okengine/oke/driver"
)

// runEntry is a run with its steps.
//
// Saved steps are appended to one buffer per run, steps, each as a
// fixed-size header (the lengths of its name, result and failure, its
// attempts and times) followed by those bytes: saving a step allocates
// nothing of its own (the buffer grows by doubling), and the journal holds no
// pointers per step for the GC to scan. Reading the steps back (GetRun,
// AcquireRun) walks the buffer.
type runEntry struct {
	run    driver.Run
	steps  []byte
	nsteps int
	result driver.Response // what run.Result points to once finished
}

// A step's header in runEntry.steps: name, result and failure lengths
// (noBytes for nil), attempts, started and finished (Unix nanoseconds, or
// noTime).
const (
	stepHeader = 4*4 + 2*8
	noBytes    = math.MaxUint32
	noTime     = math.MinInt64
)

var le = binary.LittleEndian

// errTooBig: a step's name, result or failure does not fit a header.
var errTooBig = errors.New("memory: save step: a name, result or failure of 4 GiB or more")

// appendStep appends step to e's steps. size is how many bytes of steps
// the flow's last finished run kept (0 if none): the buffer is made that
// big, or it grows by doubling.
func (e *runEntry) appendStep(step *driver.Step, size int) error {
	if uint64(len(step.Name)) >= noBytes || uint64(len(step.Result)) >= noBytes || uint64(len(step.Failure)) >= noBytes {
		return errTooBig
	}
	if e.steps == nil {
		e.steps = make([]byte, 0, max(size, 256, 2*(stepHeader+len(step.Name)+len(step.Result)+len(step.Failure))))
	}
	n := len(e.steps)
	b := slices.Grow(e.steps, stepHeader+len(step.Name)+len(step.Result)+len(step.Failure))[:n+stepHeader]
	h := b[n:]
	le.PutUint32(h, uint32(len(step.Name)))
	le.PutUint32(h[4:], lenOf(step.Result))
	le.PutUint32(h[8:], lenOf(step.Failure))
	le.PutUint32(h[12:], uint32(step.Attempts))
	le.PutUint64(h[16:], uint64(nanos(step.StartedAt)))
	le.PutUint64(h[24:], uint64(nanos(step.FinishedAt)))
	b = append(b, step.Name...)
	b = append(b, step.Result...)
	e.steps = append(b, step.Failure...)
	e.nsteps++
	return nil
}

func lenOf(b []byte) uint32 {
	if b == nil {
		return noBytes
	}
	return uint32(len(b))
}

// copySteps returns copies of e's saved steps.
func (e *runEntry) copySteps() []driver.Step {
	out := make([]driver.Step, e.nsteps)
	b := e.steps
	for i := range out {
		nname, nres, nfail := le.Uint32(b), le.Uint32(b[4:]), le.Uint32(b[8:])
		out[i] = driver.Step{Seq: i + 1, Attempts: int(le.Uint32(b[12:])),
			StartedAt: fromNanos(int64(le.Uint64(b[16:]))), FinishedAt: fromNanos(int64(le.Uint64(b[24:])))}
		b = b[stepHeader:]
		out[i].Name, b = string(b[:nname]), b[nname:]
		out[i].Result, b = take(b, nres)
		out[i].Failure, b = take(b, nfail)
	}
	return out
}

// take returns a copy of the first n bytes of b (nil for noBytes) and the
// rest.
func take(b []byte, n uint32) ([]byte, []byte) {
	if n == noBytes {
		return nil, b
	}
	return slices.Clone(b[:n:n]), b[n:]
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return noTime
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == noTime {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func copyRun(r *driver.Run) driver.Run {
	c := *r
	c.Input = slices.Clone(r.Input)
	if r.IdemKey != nil {
		k := *r.IdemKey
		c.IdemKey = &k
	}
	if r.Result != nil {
		res := *r.Result
		res.Body = slices.Clone(res.Body)
		c.Result = &res
	}
	return c
}

// due reports whether AcquireRun would take e at now.
func (e *runEntry) due(now time.Time) bool {
	r := &e.run
	if r.Status.Finished() || r.Status == driver.RunDead {
		return false
	}
	if r.Owner != "" && now.Before(r.LeaseUntil) {
		return false
	}
	return !now.Before(r.WakeAt)
}

// dueSince is when the run became due, for ordering.
func (e *runEntry) dueSince() time.Time {
	r := &e.run
	t := r.WakeAt
	if r.Owner != "" && r.LeaseUntil.After(t) {
		t = r.LeaseUntil
	}
	if t.IsZero() {
		t = r.CreatedAt
	}
	return t
}

// CreateRun implements driver.Journal.
func (d *Driver) CreateRun(ctx context.Context, run driver.Run, lease time.Duration) (driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, err
	}
	if run.DedupeKey != "" {
		if id, ok := d.dedupe[run.DedupeKey]; ok {
			return copyRun(&d.runs[id].run), driver.ErrDuplicate
		}
	}
	if run.ID == "" {
		return driver.Run{}, errors.New("memory: create run: empty ID")
	}
	if _, ok := d.runs[run.ID]; ok {
		return driver.Run{}, fmt.Errorf("memory: create run: ID %q is taken", run.ID)
	}
	now := d.now()
	run.CreatedAt, run.UpdatedAt = now, now
	if run.Status == 0 {
		run.Status = driver.RunRunning
	}
	run.Attempts, run.NextAttempts = 0, 0
	if run.Owner != "" {
		run.LeaseUntil = now.Add(lease)
		run.Attempts, run.NextAttempts = 1, 1
	}
	e := &runEntry{run: run}
	e.run.Input = slices.Clone(run.Input)
	if run.IdemKey != nil {
		k := *run.IdemKey
		e.run.IdemKey = &k
	}
	if run.Result != nil {
		res := *run.Result
		res.Body = slices.Clone(res.Body)
		e.run.Result = &res
	}
	d.runs[run.ID] = e
	d.lastRun = e
	if run.DedupeKey != "" {
		d.dedupe[run.DedupeKey] = run.ID
	}
	// run is the caller's, with the fields the driver set: its slices and
	// pointers are the caller's own, not the driver's.
	return run, nil
}

// GetRun implements driver.Journal.
func (d *Driver) GetRun(ctx context.Context, id string) (driver.Run, []driver.Step, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, nil, err
	}
	e, ok := d.runs[id]
	if !ok {
		return driver.Run{}, nil, driver.ErrNotFound
	}
	return copyRun(&e.run), e.copySteps(), nil
}

// ListRuns implements driver.Journal. It filters every run, then sorts the
// matches: the memory driver is for tests, not for 100 000 runs.
func (d *Driver) ListRuns(ctx context.Context, f driver.RunFilter, limit int) ([]driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	var out []driver.Run
	for id, e := range d.runs {
		if !f.InRange(id) || !f.Match(&e.run) {
			continue
		}
		r := copyRun(&e.run)
		r.Steps = e.nsteps
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return (out[i].ID < out[j].ID) != f.Desc })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// AcquireRun implements driver.Journal.
func (d *Driver) AcquireRun(ctx context.Context, id, owner string, lease time.Duration) (driver.Run, []driver.Step, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return driver.Run{}, nil, err
	}
	if owner == "" {
		return driver.Run{}, nil, errors.New("memory: acquire run: empty owner")
	}
	e, ok := d.runs[id]
	if !ok {
		return driver.Run{}, nil, driver.ErrNotFound
	}
	now := d.now()
	if !e.due(now) {
		return driver.Run{}, nil, driver.ErrNotDue
	}
	r := &e.run
	if r.Status == driver.RunSleeping {
		r.NextAttempts = max(r.NextAttempts, 1)
	} else {
		r.NextAttempts++
	}
	if r.Owner != "" {
		r.Strikes++ // its holder's lease lapsed
	}
	r.Status = driver.RunRunning
	r.Owner = owner
	r.LeaseUntil = now.Add(lease)
	r.Attempts++
	r.UpdatedAt = now
	return copyRun(r), e.copySteps(), nil
}

// heldRun returns the run id held by owner. The run a fenced call last
// found is checked before the map: an execution's calls (its steps, its
// finish) come one after another, so they mostly skip hashing the ID.
func (d *Driver) heldRun(id, owner string) (*runEntry, error) {
	e := d.lastRun
	if e == nil || e.run.ID != id {
		var ok bool
		if e, ok = d.runs[id]; !ok {
			return nil, driver.ErrNotOwner
		}
		d.lastRun = e
	}
	if e.run.Owner != owner || owner == "" || e.run.Status.Finished() {
		return nil, driver.ErrNotOwner
	}
	return e, nil
}

// RenewRun implements driver.Journal.
func (d *Driver) RenewRun(ctx context.Context, id, owner string, lease time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return err
	}
	e.run.LeaseUntil = d.now().Add(lease)
	return nil
}

// SaveStep implements driver.Journal.
func (d *Driver) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return err
	}
	if step.Seq != e.nsteps+1 {
		return driver.ErrStepOrder
	}
	size := 0
	if e.steps == nil {
		size = d.stepBytes[e.run.Flow]
	}
	if err := e.appendStep(&step, size); err != nil {
		return err
	}
	e.run.NextAttempts = 1
	if e.run.UpdatedAt = step.FinishedAt; step.FinishedAt.IsZero() {
		e.run.UpdatedAt = d.now()
	}
	return nil
}

// FinishRun implements driver.Journal.
func (d *Driver) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return err
	}
	switch f.Status {
	case driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed, driver.RunDead:
	default:
		return fmt.Errorf("memory: finish run: unknown status %d", f.Status)
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return err
	}
	r := &e.run
	if f.Status.Finished() && len(e.steps) > 0 {
		d.stepBytes[r.Flow] = len(e.steps)
	}
	r.Status = f.Status
	r.Owner = ""
	r.LeaseUntil = time.Time{}
	r.WakeAt = f.WakeAt
	r.Error = f.Error
	r.Strikes = f.Strikes
	if f.NextAttempts > 0 {
		r.NextAttempts = f.NextAttempts
	}
	if f.Result != nil {
		e.result = *f.Result
		e.result.Body = slices.Clone(f.Result.Body)
		r.Result = &e.result
	}
	r.UpdatedAt = d.now()
	return nil
}

// DueRuns implements driver.Journal.
func (d *Driver) DueRuns(ctx context.Context, flows []string, limit int) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	now := d.now()
	var due []*runEntry
	for _, e := range d.runs {
		if e.due(now) && (len(flows) == 0 || slices.Contains(flows, e.run.Flow)) {
			due = append(due, e)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := due[i].dueSince(), due[j].dueSince()
		if !a.Equal(b) {
			return a.Before(b)
		}
		return due[i].run.ID < due[j].run.ID
	})
	if limit > 0 && len(due) > limit {
		due = due[:limit]
	}
	ids := make([]string, len(due))
	for i, e := range due {
		ids[i] = e.run.ID
	}
	return ids, nil
}

// ClaimKey implements driver.Journal.
func (d *Driver) ClaimKey(ctx context.Context, key, runID string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if w, ok := d.claims[key]; ok {
		return w, nil
	}
	d.claims[key] = runID
	return runID, nil
}
