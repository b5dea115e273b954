package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/httpx"
	"github.com/okengine/oke/internal/journal"
)

// SignalView is a signal sent to a run (oke.App.Signal), as the admin API
// and the CLI show it.
type SignalView struct {
	Seq     int64     `json:"seq"`
	Name    string    `json:"name"`
	Key     string    `json:"key"`
	Payload any       `json:"payload,omitempty"`
	SentAt  time.Time `json:"sentAt"`
	// Step is the run's step that received it; 0 while it waits for a wait.
	Step int `json:"step,omitempty"`
}

// WaitView is what a run parked in oke.AwaitSignal waits for.
type WaitView struct {
	Signal string    `json:"signal"`
	Until  time.Time `json:"until"`
}

// ViewSignals turns a run's signals into SignalViews.
func ViewSignals(list []driver.Signal) []SignalView {
	out := make([]SignalView, len(list))
	for i, s := range list {
		out[i] = SignalView{Seq: s.Seq, Name: s.Name, Key: s.Key, Payload: rawJSON(s.Payload), SentAt: s.SentAt, Step: s.Step}
	}
	return out
}

// waiting sets v.Waiting when the run is parked in a wait for a signal.
func waiting(v *RunView, r driver.Run, steps []driver.Step) {
	if r.Status != driver.RunSleeping {
		return
	}
	if name, until, ok := journal.Waiting(steps); ok {
		v.Waiting = &WaitView{Signal: name, Until: until}
	}
}

// addSignals sets v.Signals from the journal, when it keeps signals.
func addSignals(ctx context.Context, j driver.Journal, v *RunView) error {
	sg, ok := j.(driver.Signaler)
	if !ok {
		return nil
	}
	list, err := sg.Signals(ctx, v.ID)
	if err != nil {
		return err
	}
	if len(list) > 0 {
		v.Signals = ViewSignals(list)
	}
	return nil
}

// SignalRequest is the body of POST /runs/{id}/signal.
type SignalRequest struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"` // the payload, any JSON (none: null)
	Key  string          `json:"key,omitempty"`  // dedupes the send (oke.SignalKey)
}

// signal serves POST /runs/{id}/signal: App.Signal with the body's name,
// data and key. It answers 202 with the run's ID, the name and the key.
func (a *api) signal(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req SignalRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		oke.WriteError(w, badRequest("The body must be a JSON object {\"name\":…, \"data\":…, \"key\":…} of at most 1 MiB: %v.", err))
		return
	}
	if req.Name == "" {
		oke.WriteError(w, badRequest("The body names no signal: set \"name\"."))
		return
	}
	var opts []oke.SignalOption
	if req.Key != "" {
		opts = append(opts, oke.SignalKey(req.Key))
	}
	if e := signalError(a.app.Signal(r.Context(), id, req.Name, req.Data, opts...), id); e != nil {
		oke.WriteError(w, e)
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, map[string]any{"id": id, "name": req.Name, "key": req.Key})
}

// signalError is the answer to a failed App.Signal, or nil.
func signalError(err error, id string) *oke.Error {
	var e *oke.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, oke.ErrNotDurable):
		return noJournal()
	case errors.Is(err, oke.ErrCannotSignal):
		return &oke.Error{Status: http.StatusNotImplemented, Code: "CannotSignal", Message: err.Error()}
	case errors.Is(err, oke.ErrSignalNoRun):
		return oke.ErrNotFound.WithMessage("No run has id %s.", oke.Quote(id))
	case errors.As(err, &e):
		return e.WithMessage("%s", fmt.Sprintf("Run %s: %s", id, e.Message))
	}
	return storeError(err)
}
