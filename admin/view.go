package admin

import (
	"encoding/json"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/httpx"
)

// RunView is a journal run as the admin API and the CLI show it.
type RunView struct {
	ID         string      `json:"id"`
	Flow       string      `json:"flow"`
	Status     string      `json:"status"`
	Input      any         `json:"input,omitempty"`
	Tenant     string      `json:"tenant,omitempty"`
	Principal  string      `json:"principal,omitempty"`
	Attempts   int         `json:"attempts"`
	Owner      string      `json:"owner,omitempty"`
	LeaseUntil *time.Time  `json:"leaseUntil,omitempty"`
	WakeAt     *time.Time  `json:"wakeAt,omitempty"`
	ReplayOf   string      `json:"replayOf,omitempty"`
	Parent     string      `json:"parent,omitempty"`
	Event      string      `json:"event,omitempty"`
	Error      string      `json:"error,omitempty"`
	Result     *StoredView `json:"result,omitempty"`
	CreatedAt  time.Time   `json:"createdAt"`
	UpdatedAt  time.Time   `json:"updatedAt"`
	StepCount  int         `json:"stepCount"` // saved steps (also in listings, which carry no Steps)
	Steps      []StepView  `json:"steps,omitempty"`
	Next       *NextView   `json:"next,omitempty"` // unfinished runs: the step after the saved ones
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
		StepCount: max(r.Steps, len(steps))}
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
	for _, s := range steps {
		v.Steps = append(v.Steps, StepView{Seq: s.Seq, Name: s.Name, Result: rawJSON(s.Result), Failure: rawJSON(s.Failure),
			Attempts: s.Attempts, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
			Millis: float64(s.FinishedAt.Sub(s.StartedAt).Microseconds()) / 1000})
	}
	return v
}

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
type RowView struct {
	Tenant    string      `json:"tenant"`
	Principal string      `json:"principal"`
	Flow      string      `json:"flow"`
	Key       string      `json:"key"`
	State     string      `json:"state"`
	RunID     string      `json:"runId,omitempty"`
	ExpiresAt time.Time   `json:"expiresAt"`
	CreatedAt time.Time   `json:"createdAt"`
	Response  *StoredView `json:"response,omitempty"`
}

// ViewRow turns an idempotency row into a RowView.
func ViewRow(row driver.Row) RowView {
	return RowView{Tenant: row.Key.Tenant, Principal: row.Key.Principal, Flow: row.Key.Flow, Key: row.Key.Key,
		State: row.State.String(), RunID: row.RunID, ExpiresAt: row.ExpiresAt, CreatedAt: row.CreatedAt,
		Response: viewStored(row.Response)}
}
