package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/httpx"
)

// api is the JSON admin API over one app.
type api struct {
	app *oke.App
	j   driver.Journal
	d   driver.Driver
	// poll is how often a live feed (SSE) reads the journal.
	poll time.Duration
	// timeout bounds each call to the store (the app's
	// Config.StoreTimeout): under a hung store a request of the API or the
	// console gets its 503 StoreUnavailable then, not when the store
	// answers again.
	timeout time.Duration
}

// bound is ctx with a.timeout more to run n store calls (at least one).
func (a *api) bound(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	return storeBound(ctx, a.timeout, n)
}

// storeBound is ctx with n times d more (at least once), or ctx with a
// cancel and no deadline when d is zero or less (Config.StoreTimeout's
// "no bound").
func storeBound(ctx context.Context, d time.Duration, n int) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(max(n, 1))*d)
}

// Limits of the API.
const (
	defaultLimit = 100
	maxLimit     = 1000
	// maxBatch bounds a batch replay or cancel.
	maxBatch = 500
	// maxReplays is how many replays of a run its view lists.
	maxReplays = 50
	// maxFound bounds a key look-up across scopes.
	maxFound = 100
)

func badRequest(format string, args ...any) *oke.Error {
	return &oke.Error{Status: http.StatusBadRequest, Code: oke.CodeInvalidInput, Message: fmt.Sprintf(format, args...)}
}

func noJournal() *oke.Error {
	return oke.ErrNotFound.WithMessage("This app's driver keeps no journal, so it has no runs.")
}

func storeError(err error) *oke.Error {
	if errors.Is(err, context.Canceled) {
		return oke.ErrStoreUnavailable.WithMessage("The request ended before the store answered.").WithCause(err)
	}
	return oke.ErrStoreUnavailable.WithCause(err)
}

// limitParam reads ?limit= (default def, at most max).
func limitParam(r *http.Request, def, max int) (int, *oke.Error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("limit must be a whole number from 1 to %d, got %s.", max, oke.Quote(s))
	}
	return n, nil
}

// runFilter reads the runs listing's filters: flow, status (one or more,
// comma-separated), tenant, createdAfter and createdBefore (RFC 3339),
// replayOf, the cursors after and before, and order (asc, the default, or
// desc: newest first).
func runFilter(r *http.Request) (driver.RunFilter, *oke.Error) {
	q := r.URL.Query()
	f := driver.RunFilter{After: q.Get("after"), Before: q.Get("before"), Flow: q.Get("flow"),
		Tenant: q.Get("tenant"), ReplayOf: q.Get("replayOf")}
	if s := q.Get("status"); s != "" {
		for _, p := range strings.Split(s, ",") {
			st, ok := parseStatus(strings.TrimSpace(p))
			if !ok {
				return f, badRequest("status must be running, sleeping, completed, failed or dead (or several, comma-separated), got %s.", oke.Quote(p))
			}
			f.Status = append(f.Status, st)
		}
	}
	for name, dst := range map[string]*time.Time{"createdAfter": &f.CreatedAfter, "createdBefore": &f.CreatedBefore} {
		if s := q.Get(name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return f, badRequest("%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %s.", name, oke.Quote(s))
			}
			*dst = t
		}
	}
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		f.Desc = true
	default:
		return f, badRequest("order must be asc or desc, got %s.", oke.Quote(q.Get("order")))
	}
	return f, nil
}

// listRuns serves GET /runs: a page of runs, and the cursor of the next
// page ("next": pass it as after, or as before with order=desc) when the
// page is full.
func (a *api) listRuns(w http.ResponseWriter, r *http.Request) {
	if a.j == nil {
		oke.WriteError(w, noJournal())
		return
	}
	f, e := runFilter(r)
	if e == nil {
		var limit int
		if limit, e = limitParam(r, defaultLimit, maxLimit); e == nil {
			page, err := a.runsPage(r.Context(), f, limit)
			if err != nil {
				oke.WriteError(w, storeError(err))
				return
			}
			httpx.WriteJSON(w, http.StatusOK, page)
			return
		}
	}
	oke.WriteError(w, e)
}

// RunsPage is a page of runs.
type RunsPage struct {
	Runs []RunView `json:"runs"`
	// Next is the cursor of the next page when this one is full: the last
	// run's ID, to pass as after (ascending) or before (order=desc).
	Next string `json:"next,omitempty"`
}

func (a *api) runsPage(ctx context.Context, f driver.RunFilter, limit int) (RunsPage, error) {
	ctx, cancel := a.bound(ctx, 1)
	defer cancel()
	runs, err := a.j.ListRuns(ctx, f, limit)
	if err != nil {
		return RunsPage{}, err
	}
	p := RunsPage{Runs: make([]RunView, len(runs))}
	for i, run := range runs {
		p.Runs[i] = ViewRun(run, nil)
	}
	if len(runs) == limit && limit > 0 {
		p.Next = runs[len(runs)-1].ID
	}
	return p, nil
}

// getRun serves GET /runs/{id}: the run, its steps, its timing, and its
// replays.
func (a *api) getRun(w http.ResponseWriter, r *http.Request) {
	if a.j == nil {
		oke.WriteError(w, noJournal())
		return
	}
	v, e := a.runView(r.Context(), r.PathValue("id"))
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, v)
}

func (a *api) runView(ctx context.Context, id string) (RunView, *oke.Error) {
	ctx, cancel := a.bound(ctx, 3) // the run, its replays, its signals
	defer cancel()
	run, steps, err := a.j.GetRun(ctx, id)
	if errors.Is(err, driver.ErrNotFound) {
		return RunView{}, oke.ErrNotFound.WithMessage("No run has id %s.", oke.Quote(id))
	}
	if err != nil {
		return RunView{}, storeError(err)
	}
	v := ViewRun(run, steps)
	replays, err := a.j.ListRuns(ctx, driver.RunFilter{ReplayOf: id}, maxReplays)
	if err != nil {
		return RunView{}, storeError(err)
	}
	for _, rp := range replays {
		v.Replays = append(v.Replays, rp.ID)
	}
	if err := addSignals(ctx, a.j, &v); err != nil {
		return RunView{}, storeError(err)
	}
	return v, nil
}

// replay serves POST /runs/{id}/replay[?fromStep=N].
func (a *api) replay(w http.ResponseWriter, r *http.Request) {
	from := 1
	if s := r.URL.Query().Get("fromStep"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			oke.WriteError(w, badRequest("fromStep must be a step number, counting from 1, got %s.", oke.Quote(s)))
			return
		}
		from = n
	}
	id := r.PathValue("id")
	newID, e := a.replayOne(r.Context(), id, from)
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, map[string]any{"id": newID, "replayOf": id, "fromStep": from})
}

func (a *api) replayOne(ctx context.Context, id string, from int) (string, *oke.Error) {
	newID, err := a.app.ReplayFrom(ctx, id, from)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return "", oke.ErrNotFound.WithMessage("No run has id %s.", oke.Quote(id))
	case errors.Is(err, oke.ErrBadStep):
		return "", &oke.Error{Status: http.StatusBadRequest, Code: "BadStep", Message: err.Error()}
	case errors.Is(err, oke.ErrNotDurable):
		return "", noJournal()
	case err != nil:
		return "", &oke.Error{Status: http.StatusConflict, Code: "ReplayFailed", Message: err.Error()}
	}
	return newID, nil
}

// cancel serves POST /runs/{id}/cancel.
func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	run, e := a.cancelOne(r.Context(), r.PathValue("id"))
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, ViewRun(run, nil))
}

func (a *api) cancelOne(ctx context.Context, id string) (driver.Run, *oke.Error) {
	run, err := a.app.Cancel(ctx, id)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return run, oke.ErrNotFound.WithMessage("No run has id %s.", oke.Quote(id))
	case errors.Is(err, oke.ErrRunRunning):
		return run, &oke.Error{Status: http.StatusConflict, Code: "RunRunning",
			Message: fmt.Sprintf("Run %s is running now; cancel it again when it parks (sleeps, waits for a retry, or its lease lapses).", id)}
	case errors.Is(err, oke.ErrRunFinished):
		return run, &oke.Error{Status: http.StatusConflict, Code: "RunFinished", Message: fmt.Sprintf("Run %s has finished; there is nothing to cancel.", id)}
	case errors.Is(err, oke.ErrNotDurable):
		return run, noJournal()
	case errors.Is(err, oke.ErrCannotCancel):
		return run, &oke.Error{Status: http.StatusNotImplemented, Code: "CannotCancel", Message: err.Error()}
	case err != nil:
		return run, storeError(err)
	}
	return run, nil
}

// resume serves POST /runs/{id}/resume.
func (a *api) resume(w http.ResponseWriter, r *http.Request) {
	run, e := a.resumeOne(r.Context(), r.PathValue("id"))
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, ViewRun(run, nil))
}

func (a *api) resumeOne(ctx context.Context, id string) (driver.Run, *oke.Error) {
	run, err := a.app.Resume(ctx, id)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return run, oke.ErrNotFound.WithMessage("No run has id %s.", oke.Quote(id))
	case errors.Is(err, driver.ErrRunNotDead):
		return run, &oke.Error{Status: http.StatusConflict, Code: "RunNotDead",
			Message: fmt.Sprintf("Run %s is not dead-lettered; only a dead run can be resumed.", id)}
	case errors.Is(err, oke.ErrNotDurable):
		return run, noJournal()
	case errors.Is(err, oke.ErrCannotResume):
		return run, &oke.Error{Status: http.StatusNotImplemented, Code: "CannotResume", Message: err.Error()}
	case err != nil:
		return run, storeError(err)
	}
	return run, nil
}

// BatchResult is the answer of a batch replay, cancel or resume.
type BatchResult struct {
	Action   string      `json:"action"`
	Selected int         `json:"selected"`
	Done     int         `json:"done"`
	Failed   int         `json:"failed"`
	Results  []BatchItem `json:"results"`
}

// BatchItem is what a batch did to one run.
type BatchItem struct {
	ID    string `json:"id"`
	NewID string `json:"newId,omitempty"` // replays: the new run
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// batch serves POST /runs/replay and POST /runs/cancel: the action on each
// run of a selection — the IDs of a JSON body {"ids":[…]}, or else the runs
// the listing's filters select (query parameters, as GET /runs) — at most
// limit of them (default 100, at most 500), one after another. It answers
// how many were done and how many failed, and why.
func (a *api) batch(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.j == nil {
			oke.WriteError(w, noJournal())
			return
		}
		limit, e := limitParam(r, defaultLimit, maxBatch)
		if e != nil {
			oke.WriteError(w, e)
			return
		}
		var body struct {
			IDs []string `json:"ids"`
		}
		if r.ContentLength != 0 {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
				oke.WriteError(w, badRequest("The body must be JSON: {\"ids\": [\"run_…\", …]} (or none, to select with the filters): %v", err))
				return
			}
		}
		ids := body.IDs
		if len(ids) > maxBatch {
			oke.WriteError(w, badRequest("A batch takes at most %d runs, got %d.", maxBatch, len(ids)))
			return
		}
		if ids == nil {
			f, e := runFilter(r)
			if e != nil {
				oke.WriteError(w, e)
				return
			}
			lctx, cancel := a.bound(r.Context(), 1)
			runs, err := a.j.ListRuns(lctx, f, limit)
			cancel()
			if err != nil {
				oke.WriteError(w, storeError(err))
				return
			}
			for _, run := range runs {
				ids = append(ids, run.ID)
			}
		}
		res := BatchResult{Action: action, Selected: len(ids), Results: []BatchItem{}}
		for _, id := range ids {
			item := BatchItem{ID: id}
			var e *oke.Error
			switch action {
			case "replay":
				item.NewID, e = a.replayOne(r.Context(), id, 1)
			case "resume":
				_, e = a.resumeOne(r.Context(), id)
			default:
				_, e = a.cancelOne(r.Context(), id)
			}
			if e != nil {
				item.Error, item.Code = e.Message, e.Code
				res.Failed++
			} else {
				res.Done++
			}
			res.Results = append(res.Results, item)
		}
		httpx.WriteJSON(w, http.StatusOK, res)
	}
}

// --- idempotency rows --------------------------------------------------------

// RowsPage is a page of idempotency rows, with the server's clock (which the
// rows' leaseLeftMs and ttlLeftMs were computed on).
type RowsPage struct {
	Rows []RowView `json:"rows"`
	Now  time.Time `json:"now"`
	// Next is the cursor of the next page when this one is full (pass its
	// fields as afterTenant, afterPrincipal, afterFlow, afterKey).
	Next *driver.Key `json:"next,omitempty"`
}

// listRows serves GET /idempotency: rows in key order, their stored bodies
// hidden, or with ?key=K the rows of that key in every scope (narrowed by
// tenant, principal, flow).
func (a *api) listRows(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, e := limitParam(r, defaultLimit, maxLimit)
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	var rows []driver.Row
	var err error
	var next *driver.Key
	if k := q.Get("key"); k != "" {
		rows, err = a.findRows(r.Context(), driver.Key{Tenant: q.Get("tenant"), Principal: q.Get("principal"), Flow: q.Get("flow"), Key: k}, min(limit, maxFound))
	} else {
		after := driver.Key{Tenant: q.Get("afterTenant"), Principal: q.Get("afterPrincipal"), Flow: q.Get("afterFlow"), Key: q.Get("afterKey")}
		lctx, cancel := a.bound(r.Context(), 1)
		rows, err = a.d.List(lctx, after, limit)
		cancel()
		if err == nil && len(rows) == limit {
			k := rows[len(rows)-1].Key
			next = &k
		}
	}
	if err != nil {
		oke.WriteError(w, storeError(err))
		return
	}
	now := time.Now()
	p := RowsPage{Rows: make([]RowView, len(rows)), Now: now, Next: next}
	for i, row := range rows {
		p.Rows[i] = viewRow(row, now, false)
	}
	httpx.WriteJSON(w, http.StatusOK, p)
}

// findRows finds the rows of one key: with the driver's FindRows, else by
// reading every row (List) and keeping the matches.
func (a *api) findRows(ctx context.Context, key driver.Key, limit int) ([]driver.Row, error) {
	if f, ok := a.d.(driver.RowFinder); ok {
		ctx, cancel := a.bound(ctx, 1)
		defer cancel()
		return f.FindRows(ctx, key, limit)
	}
	var out []driver.Row
	var after driver.Key
	for {
		lctx, cancel := a.bound(ctx, 1)
		rows, err := a.d.List(lctx, after, maxLimit)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if driver.MatchKey(row.Key, key) {
				out = append(out, row)
				if len(out) == limit {
					return out, nil
				}
			}
		}
		if len(rows) < maxLimit {
			return out, nil
		}
		after = rows[len(rows)-1].Key
	}
}

// rowKey reads one row's whole key from the query: tenant, principal, flow
// and key, each required (the empty tenant or principal is written as
// itself: tenant= is the empty tenant).
func rowKey(r *http.Request) (driver.Key, *oke.Error) {
	q := r.URL.Query()
	for _, p := range []string{"tenant", "principal", "flow", "key"} {
		if !q.Has(p) {
			return driver.Key{}, badRequest("Name the row with tenant, principal, flow and key (missing %s); GET /idempotency?key=K finds a key's rows in every scope.", p)
		}
	}
	return driver.Key{Tenant: q.Get("tenant"), Principal: q.Get("principal"), Flow: q.Get("flow"), Key: q.Get("key")}, nil
}

// getRow serves GET /idempotency/row?tenant=&principal=&flow=&key=: one
// row, its stored body shown only with reveal=1.
func (a *api) getRow(w http.ResponseWriter, r *http.Request) {
	k, e := rowKey(r)
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	gctx, cancel := a.bound(r.Context(), 1)
	defer cancel()
	row, err := a.d.Get(gctx, k)
	if errors.Is(err, driver.ErrNotFound) {
		oke.WriteError(w, oke.ErrNotFound.WithMessage("No idempotency row has that key in that scope."))
		return
	}
	if err != nil {
		oke.WriteError(w, storeError(err))
		return
	}
	reveal := r.URL.Query().Get("reveal") == "1" || r.URL.Query().Get("reveal") == "true"
	now := time.Now()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"row": viewRow(row, now, reveal), "now": now})
}

// deleteRow serves DELETE /idempotency/row?tenant=&principal=&flow=&key=[&force=1]:
// DeleteRow's rule, so a row still in flight is 409 RowInProgress unless
// forced.
func (a *api) deleteRow(w http.ResponseWriter, r *http.Request) {
	k, e := rowKey(r)
	if e != nil {
		oke.WriteError(w, e)
		return
	}
	force := false
	switch s := r.URL.Query().Get("force"); s {
	case "", "0", "false":
	case "1", "true":
		force = true
	default:
		oke.WriteError(w, badRequest("force must be 1 or 0, got %q.", clip(s)))
		return
	}
	dctx, cancel := a.bound(r.Context(), 4) // DeleteRow makes up to four calls
	defer cancel()
	err := DeleteRow(dctx, a.d, k, force, time.Now())
	var inFlight *RowInProgressError
	switch {
	case errors.Is(err, errCannotDelete):
		oke.WriteError(w, &oke.Error{Status: http.StatusNotImplemented, Code: "CannotDelete",
			Message: "This app's driver cannot delete a row (it does not implement driver.RowDeleter)."})
		return
	case errors.Is(err, driver.ErrNotFound):
		oke.WriteError(w, oke.ErrNotFound.WithMessage("No idempotency row has that key in that scope."))
		return
	case errors.As(err, &inFlight):
		oke.WriteError(w, &oke.Error{Status: http.StatusConflict, Code: "RowInProgress",
			Message: fmt.Sprintf("This row is held by a request still running (its lease ends in %s): deleting it would let a second execution start beside the first. "+
				"Wait for it to finish, or delete with force=1 (oke idempotency delete -force) if you know its holder is gone.",
				max(inFlight.LeaseUntil.Sub(inFlight.Now), 0).Round(time.Millisecond))})
		return
	case err != nil:
		oke.WriteError(w, storeError(err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"deleted": ViewRow(driver.Row{Key: k})})
}

// sweep serves POST /idempotency/sweep: deletes the expired rows in batches
// of ?batch= (default 1000), each its own driver call (so the store is held
// for one batch at a time), at most ?limit= rows when given (the CLI sweeps
// one batch per request, to show its progress), and answers how many rows
// it deleted and in how many batches.
func (a *api) sweep(w http.ResponseWriter, r *http.Request) {
	batch := sweepBatch
	if s := r.URL.Query().Get("batch"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100000 {
			oke.WriteError(w, badRequest("batch must be a whole number from 1 to 100000, got %s.", oke.Quote(s)))
			return
		}
		batch = n
	}
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			oke.WriteError(w, badRequest("limit must be a whole number of rows, at least 1, got %s.", oke.Quote(s)))
			return
		}
		limit = n
	}
	total, batches := 0, 0
	for {
		n := batch
		if limit > 0 {
			n = min(n, limit-total)
		}
		sctx, cancel := a.bound(r.Context(), 1)
		got, err := a.d.Sweep(sctx, n)
		cancel()
		total += got
		batches++
		if err != nil {
			oke.WriteError(w, storeError(fmt.Errorf("sweep after %d rows: %w", total, err)))
			return
		}
		if got < n || (limit > 0 && total >= limit) {
			break
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]int{"deleted": total, "batches": batches})
}

// sweepBatch is how many rows one Sweep call deletes at most.
const sweepBatch = 1000

// --- flows -----------------------------------------------------------------------

// FlowView is a flow as the console shows it: FlowInfo (with the why of
// its effects and its steps, from its generated contract), and the pill.
type FlowView struct {
	oke.FlowInfo
	// Pill is the idempotency pill's text ("required · 24h"), set when a
	// binding honors the Idempotency-Key header and the mode is auto or
	// required.
	Pill string `json:"pill,omitempty"`
	// Stats are the flow's numbers in this process since it started, read
	// from the app's Prometheus registry (App.Registry): the same series
	// /metrics serves.
	Stats FlowStats `json:"stats"`
}

// FlowStats are one flow's counters from the app's metrics, in this
// process since it started.
type FlowStats struct {
	// Executions: oke_flow_executions_total, the flow's function started.
	Executions float64 `json:"executions"`
	// Replays: oke_idempotency_outcomes_total{outcome="replayed"}.
	Replays float64 `json:"replays"`
	// Errors: oke_unavailable_total (every 503 the flow's route answered)
	// plus the outcomes refused with a 4xx for the key (in_progress,
	// reused, invalid, missing).
	Errors float64 `json:"errors"`
	// Outcomes: oke_idempotency_outcomes_total by outcome (non-zero ones).
	Outcomes map[string]float64 `json:"outcomes,omitempty"`
	// ClaimCount and ClaimMeanMs: oke_idempotency_claim_seconds, the
	// latency of the key's claim-or-read (the app measures no other
	// per-flow latency).
	ClaimCount  uint64  `json:"claimCount"`
	ClaimMeanMs float64 `json:"claimMeanMs"`
}

// flowStats reads every flow's numbers from the app's registry.
func (a *api) flowStats() map[string]*FlowStats {
	out := map[string]*FlowStats{}
	mfs, err := a.app.Registry().Gather()
	if err != nil {
		return out
	}
	get := func(flow string) *FlowStats {
		s := out[flow]
		if s == nil {
			s = &FlowStats{}
			out[flow] = s
		}
		return s
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var flow, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "flow":
					flow = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			if flow == "" {
				continue
			}
			switch mf.GetName() {
			case "oke_flow_executions_total":
				get(flow).Executions += m.GetCounter().GetValue()
			case "oke_unavailable_total":
				get(flow).Errors += m.GetCounter().GetValue()
			case "oke_idempotency_outcomes_total":
				v := m.GetCounter().GetValue()
				if v == 0 {
					continue
				}
				s := get(flow)
				if s.Outcomes == nil {
					s.Outcomes = map[string]float64{}
				}
				s.Outcomes[outcome] += v
				switch outcome {
				case oke.OutcomeReplayed:
					s.Replays += v
				case oke.OutcomeInProgress, oke.OutcomeReused, oke.OutcomeInvalid, oke.OutcomeMissing:
					s.Errors += v
				}
			case "oke_idempotency_claim_seconds":
				h := m.GetHistogram()
				s := get(flow)
				s.ClaimCount += h.GetSampleCount()
				if s.ClaimCount > 0 {
					s.ClaimMeanMs = float64(int64(h.GetSampleSum()/float64(h.GetSampleCount())*1e6)) / 1000
				}
			}
		}
	}
	return out
}

func (a *api) flows(w http.ResponseWriter, r *http.Request) {
	infos := a.app.Flows()
	stats := a.flowStats()
	out := make([]FlowView, len(infos))
	for i, fi := range infos {
		v := FlowView{FlowInfo: fi}
		if st := stats[fi.Name]; st != nil {
			v.Stats = *st
		}
		if fi.Honored && (fi.Mode == "auto" || fi.Mode == "required") {
			v.Pill = fi.Mode + " · " + fi.TTL
		}
		out[i] = v
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"flows": out})
}
