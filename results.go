package oke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/tracing"
)

// Results by key. A durable flow that parks (a durable sleep) answers 204 No
// Content at once, and spec 004 stores that 204 under the request's
// Idempotency-Key: a plain retry replays it. The run goes on in the
// scheduler and ends with a response of its own, kept in the journal
// (driver.Run.Result). Two things reach it:
//
//   - Over HTTP, by key (as Restate's attach by idempotency key): the parked
//     204, first and replayed, names its run in the header Oke-Run-Id. A
//     retry with the same key and "Prefer: wait=N" is held until the run
//     ends, up to N seconds (at most 60), and answered the run's final
//     response — its status, body, Content-Type and Location, with
//     Idempotent-Replayed: true and Preference-Applied: wait=N; a run that
//     has ended is answered at once. Still unfinished after N, the retry
//     gets the 204 again. The key's scope (tenant, principal, flow) is the
//     authorization: the request passed the gate, and only the caller who
//     started the run holds a key that reaches it.
//   - From Go, by run ID (as DBOS's workflow handle): App.AwaitRun.
//
// A waiter wakes at once when the run ends in this process (the scheduler
// that continued it, or App.Cancel); a run ended by another instance on a
// shared Postgres is seen by reading the run, every 20 ms at first, then
// less often up to Config.WaitPollInterval (250 ms by default); a sleeping
// run, before its wake time, only every 5 s (only a cancel could end it).

// HeaderRunID is the response header that names the journal run of a
// durable flow's parked answer (a 204 whose run has not given its final
// response yet). Retry with the same Idempotency-Key and "Prefer: wait=N"
// to get that response; App.AwaitRun waits for it from Go.
const HeaderRunID = "Oke-Run-Id"

// The requests held waiting for a parked run count against the caps of
// Prefer: wait (Config.MaxWaitersPerKey, MaxWaiters; wait.go), with those
// held for keys in progress. A request past them is answered at once, as
// without Prefer: wait (no Preference-Applied), so a client falls back to
// retrying after a backoff.

// RunResult is the final response of a journal run: what the request that
// started it would have answered had it not parked.
type RunResult struct {
	RunID       string
	Flow        string
	Status      int // the HTTP status, e.g. 201
	ContentType string
	Location    string
	Body        []byte
}

// Decode decodes the result's JSON body into v; an empty body (a 204)
// leaves v as it is.
func (r RunResult) Decode(v any) error {
	if len(r.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("run %s (%s): decode its result into %T: %w", r.RunID, r.Flow, v, err)
	}
	return nil
}

// ErrRunNotFound is returned, wrapped, by App.AwaitRun for a run the journal
// does not hold: a mistyped ID, or a finished run deleted by retention. The
// error also matches driver.ErrNotFound.
var ErrRunNotFound = errors.New("oke: no such run")

// RunFailedError is returned by App.AwaitRun for a run that ended in a
// failure: a declared one (fx.Fail, any *Error), a 500, or a cancel
// (errors.Is(err, ErrRunCancelled)). Result is the failure's response, as a
// retry of the request by key gets it; Err is the failure as an *Error.
type RunFailedError struct {
	RunID  string
	Flow   string
	Err    *Error    // the failure's status, code and message
	Result RunResult // the stored error envelope
}

func (e *RunFailedError) Error() string {
	return fmt.Sprintf("run %s (%s) failed: %v", e.RunID, e.Flow, e.Err)
}

// Unwrap returns the failure, so errors.Is(err, ErrRunCancelled) and
// errors.As(err, &okeErr) work.
func (e *RunFailedError) Unwrap() error { return e.Err }

// AwaitRun waits for the journal run runID to end and returns its final
// response (RunResult.Decode reads its body): at once for a run that has
// ended, else when it does. A run that failed returns its result with a
// *RunFailedError; an unknown run ErrRunNotFound. It ends with ctx (its
// error wraps ctx's), and when the app closes (ErrShuttingDown). A run whose
// flow this app does not bind, or one parked while no scheduler runs
// (Config.PollInterval < 0), waits for whoever continues it.
//
// Run IDs come from oke.Run, from the Oke-Run-Id header of a parked answer,
// and from the journal (admin API, oke runs ls). AwaitRun checks no
// identity: it is for the app's own code.
func (a *App) AwaitRun(ctx context.Context, runID string) (RunResult, error) {
	if a.journal == nil {
		return RunResult{}, fmt.Errorf("await run %s: %w", runID, ErrNotDurable)
	}
	run, err := a.waitRun(ctx, runID, nil)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return RunResult{}, fmt.Errorf("await run %s: %w (%w)", runID, ErrRunNotFound, err)
		}
		return RunResult{}, fmt.Errorf("await run %s: %w", runID, err)
	}
	res := runResult(run)
	if run.Status == driver.RunFailed {
		return res, &RunFailedError{RunID: run.ID, Flow: run.Flow, Err: failureOf(run), Result: res}
	}
	return res, nil
}

// runResult is run's final response as a RunResult.
func runResult(run driver.Run) RunResult {
	res := RunResult{RunID: run.ID, Flow: run.Flow}
	if r := run.Result; r != nil {
		res.Status, res.ContentType, res.Location, res.Body = r.Status, r.ContentType, r.Location, r.Body
	}
	return res
}

// failureOf reads a failed run's error envelope back into an *Error.
func failureOf(run driver.Run) *Error {
	e := &Error{Status: http.StatusInternalServerError, Code: ErrInternal.Code, Message: run.Error}
	if r := run.Result; r != nil {
		e.Status = r.Status
		var env struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(r.Body, &env) == nil && env.Error.Code != "" {
			e.Code, e.Message = env.Error.Code, env.Error.Message
		}
	}
	return e
}

// waitRun reads run id until it has ended, and returns it then; or, when
// until fires first (nil: never), the run as last read. It wakes when the
// run ends in this process (App.ended) and otherwise reads the run every
// 20 ms at first, doubling up to Config.WaitPollInterval (250 ms when
// zero; negative: only when told), and a sleeping run before its wake time
// only every sleepingPoll. It returns ctx's error when ctx ends, ErrShuttingDown when the app
// closes, and the journal's error when the run cannot be read.
func (a *App) waitRun(ctx context.Context, id string, until <-chan time.Time) (driver.Run, error) {
	poll := waitPollMin
	maxPoll := a.cfg.WaitPollInterval
	if maxPoll == 0 {
		maxPoll = waitPollMax
	}
	for {
		// Watch before reading: an end between the read and the wait is
		// not missed.
		ended, stop := a.ended.watch(id)
		run, _, err := a.runs.GetRun(ctx, id)
		if err != nil || run.Status.Finished() {
			stop()
			if err != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
			return run, err
		}
		var tick <-chan time.Time // nil (never ready) when not polling
		var t *time.Timer
		if maxPoll > 0 {
			next := poll
			if run.Status == driver.RunSleeping {
				// Nothing but a cancel ends it before its wake time; one
				// in another process is seen within sleepingPoll.
				next = max(next, min(time.Until(run.WakeAt), sleepingPoll))
			}
			t = time.NewTimer(next)
			tick = t.C
			poll = min(2*poll, maxPoll)
		}
		var werr error
		select {
		case <-ended:
		case <-tick:
		case <-until:
			werr = errWaitOver
		case <-ctx.Done():
			werr = ctx.Err()
		case <-a.stop:
			werr = ErrShuttingDown
		}
		if t != nil {
			t.Stop()
		}
		stop()
		if werr == errWaitOver {
			return run, nil
		}
		if werr != nil {
			return run, werr
		}
	}
}

// sleepingPoll is the longest waitRun goes without reading a sleeping run
// before its wake time (when only a cancel in another process could end it).
const sleepingPoll = 5 * time.Second

// errWaitOver: waitRun's until fired (not returned).
var errWaitOver = errors.New("wait over")

// parkedRun reports whether dec replays a durable flow's stored 204 that may
// stand for a parked run: one linked to a run, whose final response may be
// another.
func parkedRun(f *flow, dec idem.Decision) bool {
	return f.opts.Durable && dec.Outcome == idem.Replay && dec.RunID != "" &&
		dec.Response != nil && dec.Response.Status == http.StatusNoContent
}

// answerParked answers a keyed request that replays a durable flow's stored
// 204 (parkedRun): without Prefer: wait, the 204 (naming its run while the
// run has not given its final response); with it, the run's final response
// once the run has ended — at once, or after waiting up to wait — else the
// 204 again.
func (a *App) answerParked(f *flow, k keyed, dec idem.Decision, wait time.Duration, w http.ResponseWriter) {
	ctx := k.waitCtx
	f.metrics.count(ctx, OutcomeReplayed)
	tracing.Link(ctx, dec.Response.Trace, "produced_response")
	run, _, err := a.runs.GetRun(context.WithoutCancel(ctx), dec.RunID)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		writeStored(w, dec.Response) // the run is gone (retention): the stored 204 is all there is
		return
	case err != nil:
		a.log.ErrorContext(ctx, "oke: read a parked run's result", "flow", f.name, "run", dec.RunID, "err", err)
		w.Header().Set(HeaderRunID, dec.RunID)
		writeStored(w, dec.Response)
		return
	}
	if k.wait > 0 && !run.Status.Finished() && wait > 0 {
		if release, ok := a.holdForRun(k.key); !ok {
			f.metrics.waitRefused.Inc()
		} else {
			w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(k.wait/time.Second)))
			f.metrics.waiting.Inc()
			deadline := time.NewTimer(wait)
			if r, werr := a.waitRun(ctx, run.ID, deadline.C); werr == nil {
				run = r
			}
			deadline.Stop()
			f.metrics.waiting.Dec()
			release()
		}
	}
	if run.Status.Finished() && run.Result != nil {
		if k.wait > 0 {
			w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(k.wait/time.Second)))
			writeStored(w, run.Result)
			return
		}
		if r := run.Result; r.Status == http.StatusNoContent && len(r.Body) == 0 && r.Location == "" {
			writeStored(w, dec.Response) // the run's own answer is this 204: nothing else to look for
			return
		}
	}
	w.Header().Set(HeaderRunID, run.ID)
	writeStored(w, dec.Response)
}
