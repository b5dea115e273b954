package admin

import (
	"encoding/json"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/httpx"
	"github.com/okengine/oke/internal/tracing"
)

// RunView is a journal run as the admin API and the CLI show it.
type RunView struct {
	ID         string     `json:"id"`
	Flow       string     `json:"flow"`
	Status     string     `json:"status"`
	Input      any        `json:"input,omitempty"`
	Tenant     string     `json:"tenant,omitempty"`
	Principal  string     `json:"principal,omitempty"`
	Attempts   int        `json:"attempts"`
	Owner      string     `json:"owner,omitempty"`
	LeaseUntil *time.Time `json:"leaseUntil,omitempty"`
	WakeAt     *time.Time `json:"wakeAt,omitempty"`
	ReplayOf   string     `json:"replayOf,omitempty"`
	Parent     string     `json:"parent,omitempty"`
	Event      string     `json:"event,omitempty"`
	// Error: for a failed or dead run, why it ended so; for an unfinished
	// one, the last failed attempt's error (a step waiting for its retry,
	// a store failure) — the console shows it as the last error.
	Error  string      `json:"error,omitempty"`
	Result *StoredView `json:"result,omitempty"`
	// Strikes: the failed pick-ups in a row (driver.Run.Strikes) that
	// dead-letter the run at Config.DeadLetterAfter.
	Strikes int `json:"strikes"`
	// Dead: the run is dead-lettered (status "dead"); POST
	// /runs/{id}/resume makes it due again.
	Dead      bool       `json:"dead,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	StepCount int        `json:"stepCount"` // saved steps (also in listings, which carry no Steps)
	Steps     []StepView `json:"steps,omitempty"`
	Next      *NextView  `json:"next,omitempty"` // unfinished runs: the step after the saved ones
	// Replays are the runs that replay this one (GET /runs/{id} only; the
	// first 50, oldest first).
	Replays []string `json:"replays,omitempty"`
	// Timing splits the run's time (GET /runs/{id} only).
	Timing *TimingView `json:"timing,omitempty"`
	// Waiting is what a run parked in oke.AwaitSignal waits for.
	Waiting *WaitView `json:"waiting,omitempty"`
	// Signals are the signals sent to the run, in send order (GET
	// /runs/{id} only, when the driver keeps signals).
	Signals []SignalView `json:"signals,omitempty"`
	// IdemKey is the Idempotency-Key row that started the run, when a
	// keyed request did (driver.Run.IdemKey): the console links the run to
	// its row, and the row (runId) back to the run.
	IdemKey *driver.Key `json:"idemKey,omitempty"`
	// TraceID is the OpenTelemetry trace of the request (or step) that
	// created the run, when it was traced (32 hex digits; docs/tracing.md).
	TraceID string `json:"traceId,omitempty"`
}

// TimingView is where a run's time went, derived from its steps' times:
//
//   - QueueMs: from its creation to the start of its first step (waiting
//     for the scheduler to pick it up), when this run ran that step;
//   - RunMs: the steps' own durations, added up;
//   - WaitMs: the gaps between one step's end and the next one's start —
//     asleep, parked for a retry, or waiting to be picked up after a lapse;
//   - TotalMs: from its creation to its end (finished runs only; 0 for
//     the others).
//
// Steps copied by a replay from step N (their times are the original
// run's) count in none of them.
type TimingView struct {
	QueueMs float64 `json:"queueMs"`
	RunMs   float64 `json:"runMs"`
	WaitMs  float64 `json:"waitMs"`
	TotalMs float64 `json:"totalMs"`
}

// NextView is the step an unfinished run takes next, after its saved ones:
// only its position is known (its name is the code's, once it gets there).
// Attempts is how many executions have begun it (driver.Run.NextAttempts):
// for a held run, its holder included; for a run waiting to be picked up
// after a lapse or a release, those so far (the next pick-up adds one); for
// a sleeping run, 1, the execution that wakes it. An execution cut off
// between two steps counts as an attempt of the later one.
type NextView struct {
	Seq      int `json:"seq"`
	Attempts int `json:"attempts"`
}

// StepView is a saved step.
type StepView struct {
	Seq        int       `json:"seq"`
	Name       string    `json:"name"`
	Result     any       `json:"result,omitempty"`
	Failure    any       `json:"failure,omitempty"`
	Attempts   int       `json:"attempts"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Millis     float64   `json:"ms"`
	// WaitMs is the gap before the step started: since the previous step
	// finished, or, for the first, since the run was created (its queue
	// time). Zero within one execution; a sleep, a retry or a pick-up
	// after a lapse shows here.
	WaitMs float64 `json:"waitMs"`
	// Copied is set on the steps a replay from step N copied from the run
	// it replays (Attempts 0: this run never ran them).
	Copied bool `json:"copied,omitempty"`
	// Concurrent is set on steps that ran at the same time as the step
	// before or after them (started with oke.Go): a step began before the
	// one before it finished. Steps one after another begin exactly when
	// the one before ended, so the journal's times tell them apart.
	Concurrent bool `json:"concurrent,omitempty"`
}

// StoredView is a stored response.
type StoredView struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	Location    string `json:"location,omitempty"`
	Body        any    `json:"body,omitempty"`
}

// ViewRun turns a run and its steps into a RunView.
func ViewRun(r driver.Run, steps []driver.Step) RunView {
	v := RunView{ID: r.ID, Flow: r.Flow, Status: r.Status.String(), Input: rawJSON(r.Input), Tenant: r.Tenant,
		Principal: r.Principal, Attempts: r.Attempts, Owner: r.Owner, ReplayOf: r.ReplayOf, Parent: r.Parent,
		Event: r.Event, Error: r.Error, Result: viewStored(r.Result), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		StepCount: max(r.Steps, len(steps)), Strikes: r.Strikes, Dead: r.Status == driver.RunDead,
		TraceID: tracing.TraceID(r.Trace)}
	if r.IdemKey != nil {
		k := *r.IdemKey
		v.IdemKey = &k
	}
	if !r.LeaseUntil.IsZero() && r.Owner != "" {
		t := r.LeaseUntil
		v.LeaseUntil = &t
	}
	if !r.WakeAt.IsZero() {
		t := r.WakeAt
		v.WakeAt = &t
	}
	if !r.Status.Finished() {
		v.Next = &NextView{Seq: v.StepCount + 1, Attempts: r.NextAttempts}
	}
	if steps == nil {
		return v
	}
	waiting(&v, r, steps)
	v.Steps = []StepView{}
	t := &TimingView{}
	prev := r.CreatedAt
	first := true
	for i, s := range steps {
		sv := StepView{Seq: s.Seq, Name: s.Name, Result: rawJSON(s.Result), Failure: rawJSON(s.Failure),
			Attempts: s.Attempts, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
			Millis: ms(s.FinishedAt.Sub(s.StartedAt)), Copied: r.ReplayOf != "" && s.Attempts == 0}
		if i > 0 && !sv.Copied && !s.StartedAt.IsZero() && s.StartedAt.Before(steps[i-1].FinishedAt) {
			// It began before the step before it ended: they ran at once.
			sv.Concurrent = true
			v.Steps[i-1].Concurrent = true
		}
		if !sv.Copied {
			if gap := s.StartedAt.Sub(prev); gap > 0 && !s.StartedAt.IsZero() {
				sv.WaitMs = ms(gap)
				if first {
					t.QueueMs = sv.WaitMs
				} else {
					t.WaitMs += sv.WaitMs
				}
			}
			t.RunMs += sv.Millis
			first = false
			prev = s.FinishedAt
		}
		v.Steps = append(v.Steps, sv)
	}
	if r.Status.Finished() {
		t.TotalMs = ms(r.UpdatedAt.Sub(r.CreatedAt))
	}
	t.RunMs, t.WaitMs = roundMs(t.RunMs), roundMs(t.WaitMs) // sums: no float noise
	v.Timing = t
	return v
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func viewStored(r *driver.Response) *StoredView {
	if r == nil {
		return nil
	}
	v := &StoredView{Status: r.Status, ContentType: r.ContentType, Location: r.Location}
	if httpx.IsJSON(r.ContentType) {
		v.Body = rawJSON(r.Body)
	} else if len(r.Body) > 0 {
		v.Body = string(r.Body)
	}
	return v
}

func rawJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	if !json.Valid(b) {
		return string(b)
	}
	return json.RawMessage(b)
}

// RowView is an idempotency row as the admin API shows it.
//
// A stored body may hold personal data, so listings and look-ups hide it:
// Response then has no Body, BodyHidden is set and BodyBytes says how big it
// is. GET /idempotency/row?…&reveal=1 shows it.
type RowView struct {
	Tenant    string      `json:"tenant"`
	Principal string      `json:"principal"`
	Flow      string      `json:"flow"`
	Key       string      `json:"key"`
	State     string      `json:"state"` // running or completed, as stored
	RunID     string      `json:"runId,omitempty"`
	ExpiresAt time.Time   `json:"expiresAt"`
	CreatedAt time.Time   `json:"createdAt"`
	Response  *StoredView `json:"response,omitempty"`
	// Expired: the row no longer protects its key (its TTL passed and no
	// live lease holds it) and waits for a sweep; the next claim of the key
	// replaces it. Computed on the server's clock, as are the times left.
	Expired bool `json:"expired"`
	// LeaseLeftMs: a running row's lease left (0 once it lapsed).
	LeaseLeftMs *int64 `json:"leaseLeftMs,omitempty"`
	// TTLLeftMs: time until the row expires (0 once it has).
	TTLLeftMs  int64 `json:"ttlLeftMs"`
	BodyHidden bool  `json:"bodyHidden,omitempty"`
	BodyBytes  int   `json:"bodyBytes,omitempty"`
	// TraceID is the OpenTelemetry trace of the request that produced the
	// stored response, when it was traced (32 hex digits): a replay's span
	// links to it (docs/tracing.md).
	TraceID string `json:"traceId,omitempty"`
}

// ViewRow turns an idempotency row into a RowView, stored body included,
// with its times left at the present time.
func ViewRow(row driver.Row) RowView { return viewRow(row, time.Now(), true) }

// ViewRowHidden is ViewRow without the stored body, as listings show it.
func ViewRowHidden(row driver.Row, now time.Time) RowView { return viewRow(row, now, false) }

func viewRow(row driver.Row, now time.Time, reveal bool) RowView {
	v := RowView{Tenant: row.Key.Tenant, Principal: row.Key.Principal, Flow: row.Key.Flow, Key: row.Key.Key,
		State: row.State.String(), RunID: row.RunID, ExpiresAt: row.ExpiresAt, CreatedAt: row.CreatedAt,
		Response: viewStored(row.Response), Expired: row.State != 0 && row.Expired(now),
		TTLLeftMs: max(row.ExpiresAt.Sub(now).Milliseconds(), 0)}
	if row.Response != nil {
		v.TraceID = tracing.TraceID(row.Response.Trace)
	}
	if row.State == driver.Running {
		left := max(row.LeaseUntil.Sub(now).Milliseconds(), 0)
		v.LeaseLeftMs = &left
	}
	if v.Response != nil && !reveal && row.Response != nil && len(row.Response.Body) > 0 {
		v.Response.Body, v.BodyHidden, v.BodyBytes = nil, true, len(row.Response.Body)
	}
	return v
}
