package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/okengine/oke/driver"
)

// runEntry is a run with its steps and the attempts of steps not yet saved.
//
// The bytes the driver keeps for a run (its input, its steps' results and
// failures) are copied into one buffer per run, arena, so that a step costs
// no allocation of its own; each kept slice is capped at its length, so an
// append by anyone never reaches the next one.
type runEntry struct {
	run   driver.Run
	steps []stepRec
	arena []byte
	// Attempts started of the steps not saved yet: startSeq's count in
	// starts (nearly always the next step), any other seq's in more.
	startSeq, starts int
	more             map[int]int
}

// stepRec is a saved step as the driver keeps it: times as Unix
// nanoseconds, so that the journal holds fewer pointers for the GC to scan.
type stepRec struct {
	name              string
	result, failure   []byte
	attempts          int
	started, finished int64
}

// noTime stands for the zero time.Time in a stepRec.
const noTime = math.MinInt64

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

// keep copies b into e's arena and returns the copy (nil stays nil).
func (e *runEntry) keep(b []byte) []byte {
	if b == nil {
		return nil
	}
	if cap(e.arena)-len(e.arena) < len(b) {
		e.arena = make([]byte, 0, max(2*cap(e.arena), len(b), 256))
	}
	n := len(e.arena)
	e.arena = append(e.arena, b...)
	return e.arena[n:len(e.arena):len(e.arena)]
}

// attempts returns a pointer to the attempts counter of unsaved step seq.
func (e *runEntry) attempts(seq int) *int {
	if seq != e.startSeq {
		if e.starts != 0 {
			if e.more == nil {
				e.more = make(map[int]int)
			}
			e.more[e.startSeq] = e.starts
		}
		e.startSeq, e.starts = seq, 0
		if n, ok := e.more[seq]; ok {
			e.starts = n
			delete(e.more, seq)
		}
	}
	return &e.starts
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

func copySteps(steps []stepRec) []driver.Step {
	out := make([]driver.Step, len(steps))
	for i, s := range steps {
		out[i] = driver.Step{Seq: i + 1, Name: s.name, Result: slices.Clone(s.result), Failure: slices.Clone(s.failure),
			Attempts: s.attempts, StartedAt: fromNanos(s.started), FinishedAt: fromNanos(s.finished)}
	}
	return out
}

// due reports whether AcquireRun would take e at now.
func (e *runEntry) due(now time.Time) bool {
	r := &e.run
	if r.Status.Finished() {
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
	if run.Owner != "" {
		run.LeaseUntil = now.Add(lease)
		run.Attempts = 1
	}
	e := &runEntry{run: run}
	e.run.Input = e.keep(run.Input)
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
	return copyRun(&e.run), copySteps(e.steps), nil
}

// ListRuns implements driver.Journal.
func (d *Driver) ListRuns(ctx context.Context, f driver.RunFilter, limit int) ([]driver.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	var out []driver.Run
	for id, e := range d.runs {
		if f.After != "" && id <= f.After {
			continue
		}
		if f.Flow != "" && e.run.Flow != f.Flow {
			continue
		}
		if len(f.Status) > 0 && !slices.Contains(f.Status, e.run.Status) {
			continue
		}
		out = append(out, copyRun(&e.run))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
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
	r.Status = driver.RunRunning
	r.Owner = owner
	r.LeaseUntil = now.Add(lease)
	r.Attempts++
	r.UpdatedAt = now
	return copyRun(r), copySteps(e.steps), nil
}

// heldRun returns the run id held by owner.
func (d *Driver) heldRun(id, owner string) (*runEntry, error) {
	e, ok := d.runs[id]
	if !ok || e.run.Owner != owner || owner == "" || e.run.Status.Finished() {
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

// StartStep implements driver.Journal.
func (d *Driver) StartStep(ctx context.Context, id, owner string, seq int, name string) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return 0, err
	}
	if seq < 1 {
		return 0, fmt.Errorf("memory: start step: seq %d", seq)
	}
	n := e.attempts(seq)
	*n++
	return *n, nil
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
	if step.Seq != len(e.steps)+1 {
		return driver.ErrStepOrder
	}
	if e.steps == nil {
		e.steps = make([]stepRec, 0, 16)
	}
	e.steps = append(e.steps, stepRec{name: step.Name, result: e.keep(step.Result), failure: e.keep(step.Failure),
		attempts: step.Attempts, started: nanos(step.StartedAt), finished: nanos(step.FinishedAt)})
	if step.Seq == e.startSeq {
		e.startSeq, e.starts = 0, 0
	} else if e.more != nil {
		delete(e.more, step.Seq)
	}
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
	case driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed:
	default:
		return fmt.Errorf("memory: finish run: unknown status %d", f.Status)
	}
	e, err := d.heldRun(id, owner)
	if err != nil {
		return err
	}
	r := &e.run
	r.Status = f.Status
	r.Owner = ""
	r.LeaseUntil = time.Time{}
	r.WakeAt = f.WakeAt
	r.Error = f.Error
	if f.Result != nil {
		res := *f.Result
		res.Body = slices.Clone(res.Body)
		r.Result = &res
	}
	r.UpdatedAt = d.now()
	return nil
}

// DueRuns implements driver.Journal.
func (d *Driver) DueRuns(ctx context.Context, limit int) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	now := d.now()
	var due []*runEntry
	for _, e := range d.runs {
		if e.due(now) {
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
