package oke

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/flowtx"
	"github.com/okengine/oke/internal/httpx"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/token"
	"github.com/okengine/oke/internal/tracing"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ServeHTTP implements http.Handler.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.started.Load() {
		if err := a.Start(r.Context()); err != nil {
			a.log.Error("oke: refusing to serve", "err", err)
			writeEnvelope(w, ErrInternal.WithMessage("The app failed its start-up check; see the server log."))
			return
		}
	}
	a.mux.ServeHTTP(w, r)
}

// notFound answers requests that match no route: 405 when the path exists
// with another method, else 404, as JSON envelopes.
func (a *App) notFound(w http.ResponseWriter, r *http.Request) { httpx.NotFound(a.mux, w, r) }

// yieldLease is how long a request that found its run held elsewhere keeps
// the key before the next retry may take it over and look again.
const yieldLease = time.Second

// headerKey is the request header carrying the client's key.
const headerKey = "Idempotency-Key"

// serveRequest runs one request to rt, in named stages: admission (the app
// is not closing, the gate lets the caller in), decode (the body and the
// URL's parameters into the flow's input), protect (what keeps a retry
// from running the flow twice: nothing, the Idempotency-Key or a webhook's
// dedupe key, a durable run), then — past Config.MaxInFlight's shedding —
// dispatch to the mode's serve function. Every stage before dispatch
// stores nothing: a request it refuses can be sent again as is. serve
// (tracing.go) calls it in the request's span.
func (a *App) serveRequest(rt *route, w http.ResponseWriter, r *http.Request) {
	a.inflight.Add(1)
	defer a.inflight.Done()
	f := rt.f
	if a.closing.Load() {
		a.writeUnavailable(r.Context(), w, f, false, ErrShuttingDown)
		return
	}
	// Gate: 401/403.
	id, err := a.gate(r, f.name)
	if err != nil {
		e, _ := asError(err)
		writeEnvelope(w, e)
		return
	}
	body, in, e := a.decodeRequest(rt, w, r)
	if e != nil {
		writeEnvelope(w, e)
		return
	}
	if f.shape != shapeUnary { // streams and feeds honor no key
		if r.Header.Get(headerKey) != "" {
			f.metrics.count(r.Context(), OutcomeIgnored)
		}
		a.serveStream(f, in, id, w, r)
		return
	}
	p, e := a.protect(rt, body, in, r)
	if e != nil {
		writeEnvelope(w, e)
		return
	}

	// Past Config.MaxInFlight the request is shed before it touches the
	// store: a slow or hung store must not pile up a goroutine a request.
	if !a.admit() {
		f.metrics.shed.Inc()
		a.writeUnavailable(r.Context(), w, f, p.key != "", ErrStoreUnavailable.WithMessage("The server has too many requests in progress; the request was not run. Retry later with the same Idempotency-Key."))
		return
	}
	defer a.busy.Add(-1)

	// A GET reads: let the client's disconnect cancel it. Anything else may
	// change the world and runs to its end.
	ctx := r.Context()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		ctx = context.WithoutCancel(ctx)
	}
	switch p.mode {
	case modePlain:
		a.servePlain(ctx, f, in, id, w)
	case modeDurable:
		a.serveDurable(ctx, f, in, p.canon, id, w)
	case modeKeyed:
		k := keyed{key: driver.Key{Tenant: id.Tenant, Principal: id.Principal, Flow: f.name, Key: p.key}, fp: p.fp, ttl: p.ttl,
			waitCtx: r.Context(), wait: preferWait(r)}
		traceKey(ctx, f, k.key)
		a.serveClaimed(ctx, f, in, p.canon, id, k, w)
	}
}

// decodeRequest reads a request's body (within Config.MaxBodyBytes; a GET
// or HEAD has none) and decodes it, with the URL's parameters, into the
// flow's input, validated. A failure is the envelope to answer (400, 413,
// 415, 422).
func (a *App) decodeRequest(rt *route, w http.ResponseWriter, r *http.Request) (body []byte, in any, _ *Error) {
	query := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !query && r.Body != nil {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				return nil, nil, ErrPayloadTooLarge.WithMessage("The request body is larger than the limit of %d bytes.", mb.Limit)
			}
			return nil, nil, &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "The request body could not be read.", Err: err}
		}
	}
	if len(body) > 0 && !bodyTypeAccepted(r.Header.Get("Content-Type")) {
		return nil, nil, ErrUnsupportedMediaType
	}
	in, e := rt.f.decode(body, input{params: a.paramsOf(rt, r), path: rt.params, query: query})
	if e != nil {
		return nil, nil, e
	}
	return body, in, nil
}

// mode is how a unary request is protected from running twice.
type mode uint8

const (
	// modePlain: nothing protects it (idempotency off, or optional and no
	// key sent): the flow runs, in its transaction if it opens one, and
	// its answer is not stored (servePlain).
	modePlain mode = iota
	// modeDurable: a durable flow with no key: its run is journaled, so a
	// crash resumes it, but a retry starts another run (serveDurable).
	modeDurable
	// modeKeyed: a key (the Idempotency-Key header, or a webhook's dedupe
	// key) is claimed for it; the claim's outcome decides whether it runs
	// or is answered from the key's row (serveClaimed).
	modeKeyed
)

// protection is what protect chose for a request: its mode, and for a
// keyed one its key, fingerprint and how long its row is kept. canon is
// the input encoded as JSON when a fingerprint or a durable run needs it.
type protection struct {
	mode  mode
	key   string
	fp    string
	ttl   time.Duration
	canon []byte
}

// protect chooses a unary request's protection: a webhook's dedupe key
// read from its body, the Idempotency-Key header on a flow that honors it
// (checked: a missing key where it is required, a malformed or repeated
// one, are answered here, storing nothing), or none; a durable flow with
// no key runs as a durable run. It counts the key's outcome when the key
// decides it (missing, invalid, ignored, none).
func (a *App) protect(rt *route, body []byte, in any, r *http.Request) (protection, *Error) {
	f := rt.f
	m := f.metrics
	p := protection{ttl: f.ttl}
	switch {
	case rt.dedupe != nil:
		k, e := dedupeKey(body, rt.dedupe)
		if e != nil {
			return p, e
		}
		p.key, p.fp, p.ttl = k, idem.Fingerprint(f.name, nil), rt.dedupeT
	case rt.honors:
		vals := r.Header.Values(headerKey)
		switch {
		case len(vals) == 0:
			if f.opts.Idempotency.Mode == ModeRequired {
				m.count(r.Context(), OutcomeMissing)
				return p, ErrIdempotencyKeyMissing
			}
			m.count(r.Context(), OutcomeNone)
		case len(vals) > 1 || idem.ValidateKey(vals[0]) != nil:
			m.count(r.Context(), OutcomeInvalid)
			return p, ErrIdempotencyKeyInvalid
		default:
			canon, err := json.Marshal(in)
			if err != nil {
				return p, ErrInternal.WithCause(fmt.Errorf("encode input for fingerprint: %w", err))
			}
			p.key, p.fp, p.canon = vals[0], idem.Fingerprint(f.name, canon), canon
		}
	default:
		if r.Header.Get(headerKey) != "" {
			m.count(r.Context(), OutcomeIgnored)
		}
	}
	switch {
	case p.key != "":
		p.mode = modeKeyed
	case f.opts.Durable:
		p.mode = modeDurable
	default:
		return p, nil // modePlain
	}
	if f.opts.Durable && p.canon == nil { // a durable run journals its input
		canon, err := json.Marshal(in)
		if err != nil {
			return p, ErrInternal.WithCause(fmt.Errorf("encode input: %w", err))
		}
		p.canon = canon
	}
	return p, nil
}

// servePlain runs a unary flow that nothing protects, and answers it. Its
// transaction, if it opened one, commits before the answer.
func (a *App) servePlain(ctx context.Context, f *flow, in any, id Identity, w http.ResponseWriter) {
	res, fx, err := a.runUnary(ctx, f, in, id)
	if t := fx.takeTx(); t != nil {
		if err != nil {
			t.Rollback()
		} else if cerr := commitTx(t, fx); cerr != nil {
			// The commit may have happened, unless its error says
			// it did not (then only the flow's other effects did).
			a.logFailure(ctx, f, cerr)
			e := ErrOutcomeUnknown.WithCause(cerr)
			if errors.Is(cerr, driver.ErrNotCommitted) {
				e = startedUnavailable(fx.hasNonRead(), cerr)
			}
			a.writeUnavailable(ctx, w, f, false, e)
			return
		}
	}
	if err != nil {
		e, declared := asError(err)
		if !declared { // a declared failure (e.g. 404) is an answer, not a fault
			a.logFailure(ctx, f, err)
			if a.unavailable(err) {
				a.writeUnavailable(ctx, w, f, false, startedUnavailable(fx.hasNonRead(), err))
				return
			}
		}
		writeEnvelope(w, e)
		return
	}
	writeResult(w, res, false)
}

// serveDurable runs a durable flow's request that has no key: a journal
// run of its own, answered with its result, 204 once it parks, or 409
// while another instance holds it.
func (a *App) serveDurable(ctx context.Context, f *flow, in any, canon []byte, id Identity, w http.ResponseWriter) {
	o := a.runDurable(ctx, f, in, canon, id, nil)
	switch {
	case o.store != nil:
		a.writeUnavailable(ctx, w, f, false, o.unavailable())
	case o.busy > 0:
		w.Header().Set("Retry-After", idem.RetryAfterHeader(o.busy))
		writeEnvelope(w, ErrIdempotencyInProgress)
	case o.parked:
		writeResult(w, result{status: http.StatusNoContent}, false)
	case o.err != nil:
		e, _ := asError(o.err)
		writeEnvelope(w, e)
	default:
		writeResult(w, o.res, false)
	}
}

// admit takes one of the Config.MaxInFlight places of a request, and
// reports whether there was one; the caller gives it back (busy.Add(-1))
// once answered.
func (a *App) admit() bool {
	if a.busy.Add(1) > int64(a.cfg.MaxInFlight) && a.cfg.MaxInFlight > 0 {
		a.busy.Add(-1)
		return false
	}
	return true
}

// keyed is what a keyed request claims: its key's row, fingerprint and TTL,
// and how long it may wait (Prefer: wait) for a request with the key that
// is in progress, while its client is there (waitCtx).
type keyed struct {
	key     driver.Key
	fp      string
	ttl     time.Duration
	waitCtx context.Context
	wait    time.Duration
	asked   time.Duration // the wait asked for, when wait is what is left of it (awaitHeld)
}

// await holds the request while its key is in progress, if it asked to
// (Prefer: wait), and says so in Preference-Applied.
func (a *App) await(f *flow, k keyed, dec idem.Decision, err error, w http.ResponseWriter) idem.Decision {
	if err != nil {
		return dec
	}
	dec, held := a.awaitKey(k.waitCtx, f, k.key, k.fp, k.wait, dec)
	if held {
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(k.wait/time.Second)))
	}
	return dec
}

// serveClaimed runs the claim state machine for one keyed request.
func (a *App) serveClaimed(ctx context.Context, f *flow, in any, canon []byte, id Identity, k keyed, w http.ResponseWriter) {
	m := f.metrics
	key, fp, ttl := k.key, k.fp, k.ttl
	if f.opts.Durable && f.coalesced && a.serveCoalesced(ctx, f, in, canon, id, k, w) {
		return
	}
	if f.claim == ClaimInTx && !f.opts.Durable {
		if _, ok := a.cfg.Driver.(driver.TxClaimer); ok {
			// A key replayed here before is answered from its row, read
			// on its own, without starting the flow (idem's replayed.go).
			d, dec, took, answered := a.engine.Held(ctx, k.key, k.fp, k.ttl)
			if answered {
				observe(ctx, m.claim, took.Seconds())
				a.answerClaim(ctx, f, dec, nil, w)
				return
			}
			a.serveDeferred(ctx, f, in, id, k, d, w)
			return
		}
	}
	start := time.Now()
	runID := ""
	if f.opts.Durable {
		runID = token.RunID()
	}
	dec, err := a.engine.Begin(ctx, key, fp, ttl, runID)
	observe(ctx, m.claim, time.Since(start).Seconds())
	dec = a.await(f, k, dec, err, w)
	if err == nil && parkedRun(f, dec) {
		// A durable run's parked 204: its final response may be in the
		// journal now (results.go).
		a.answerParked(f, k, dec, k.wait-time.Since(start), w)
		return
	}
	if !a.answerClaim(ctx, f, dec, err, w) {
		return
	}
	defer a.timeRun(f).end() // its pace, for Retry-After (retryafter.go)
	claim := dec.Claim
	if !f.opts.Durable {
		res, fx, runErr := a.runUnary(ctx, f, in, id)
		a.finishUnary(ctx, f, claim, res, fx, runErr, w)
		return
	}
	a.serveRun(ctx, f, in, canon, id, claim, w)
}

// serveRun runs a durable flow's request that holds its key's claim: its
// journal run, and the answer.
func (a *App) serveRun(ctx context.Context, f *flow, in any, canon []byte, id Identity, claim *idem.Claim, w http.ResponseWriter) {
	m := f.metrics
	var (
		res    result
		runErr error
	)
	o := a.runDurable(ctx, f, in, canon, id, claim)
	switch {
	case o.store != nil:
		// Leave the row to lapse: the next request with the key takes
		// it over and resumes the run.
		claim.Abandon()
		m.notStored.Inc()
		a.writeUnavailable(ctx, w, f, true, o.unavailable())
		return
	case o.busy > 0:
		// The run is held elsewhere: hand the key back soon, so that a
		// retry after Retry-After checks the run again.
		claim.Yield(ctx, min(o.busy, yieldLease))
		m.count(ctx, OutcomeInProgress)
		w.Header().Set("Retry-After", idem.RetryAfterHeader(o.busy))
		writeEnvelope(w, ErrIdempotencyInProgress)
		return
	case o.parked:
		// The stored 204 is replayed as is; the live one names the run,
		// whose final response a retry can wait for (results.go).
		res = result{status: http.StatusNoContent, storable: true, header: http.Header{HeaderRunID: {claim.Row.RunID}}}
	case o.settled:
		res = o.res
	default:
		res, runErr = o.res, o.err
	}
	a.storeOutcome(ctx, f, claim, res, runErr, o.nonRead, nil, nil, nil, w)
}

// answerClaim answers a keyed request whose claim did not go to it (a
// replay, 409, 422, or the store unavailable) and reports whether the
// claim is the request's to run (idem.Live).
func (a *App) answerClaim(ctx context.Context, f *flow, dec idem.Decision, err error, w http.ResponseWriter) bool {
	m := f.metrics
	if err != nil {
		a.log.Error("oke: idempotency store unavailable; not running the flow", "flow", f.name, "err", err)
		a.writeUnavailable(ctx, w, f, true, ErrStoreUnavailable.WithCause(err))
		return false
	}
	switch dec.Outcome {
	case idem.Replay:
		m.count(ctx, OutcomeReplayed)
		tracing.Link(ctx, dec.Response.Trace, "produced_response")
		writeStored(w, dec.Response)
		return false
	case idem.InProgress:
		m.count(ctx, OutcomeInProgress)
		w.Header().Set("Retry-After", idem.RetryAfterHeader(a.retryAfter(f, dec)))
		writeEnvelope(w, ErrIdempotencyInProgress)
		return false
	case idem.Reused:
		m.count(ctx, OutcomeReused)
		writeEnvelope(w, ErrIdempotencyKeyReused)
		return false
	}
	m.count(ctx, OutcomeLive)
	return true
}

// serveDeferred runs a keyed request of a flow whose claim is held by its
// transaction (ClaimInTx) on a driver that makes it with the flow's first
// statement in that transaction (driver.TxClaimer). The function starts at
// once; the claim is made by that statement, by the flow's first other
// non-read effect (on its own), or after the function returns, whichever
// comes first. A claim that is not the request's stops the flow at that
// effect, and the request is answered as it would have been had the claim
// come first. d is the claim (idem.Engine.Held's: to be made, or decided
// by a read of the key's row).
func (a *App) serveDeferred(ctx context.Context, f *flow, in any, id Identity, k keyed, d *idem.Deferred, w http.ResponseWriter) {
	fx := &Fx{app: a, flow: f, identity: id, claim: d}
	timer := a.timeRun(f) // its pace, if the key is its own (retryafter.go)
	res, _, runErr := a.callUnary(ctx, f, in, fx)
	dec, err := d.Decide()
	observe(ctx, f.metrics.claim, d.Took().Seconds())
	a.engine.NoteHeld(k.key, dec, err)
	if dec.Outcome == idem.InProgress {
		// The flow's transaction never began; end it before waiting.
		fx.takeTx().Rollback()
		var again bool
		if dec, k, again = a.awaitHeld(f, k, dec, err, w); again {
			a.serveHeld(ctx, f, in, id, k, w) // the holder may have lost the key with its lease
			return
		}
	}
	if !a.answerClaim(ctx, f, dec, err, w) {
		// The flow's transaction, if it opened one, never began: the
		// claim went ahead of its BEGIN (or was made before it).
		fx.takeTx().Rollback()
		return
	}
	defer timer.end()
	f.metrics.executions.Inc() // the function ran with its key
	a.finishUnary(ctx, f, dec.Claim, res, fx, runErr, w)
}

// finishUnary ends a unary flow that ran under claim: it commits or rolls
// back the flow's transaction and stores the outcome.
func (a *App) finishUnary(ctx context.Context, f *flow, claim *idem.Claim, res result, fx *Fx, runErr error, w http.ResponseWriter) {
	ftx := fx.takeTx() // the flow's transaction, when its outcome joins it
	switch {
	case ftx == nil:
	case runErr != nil:
		// A failure, declared or not, rolls the flow's writes back.
		ftx.Rollback()
		ftx = nil
	case !ftx.Joined():
		// Another database than the store's: commit before storing.
		if err := commitTx(ftx, fx); err != nil {
			runErr = err
		}
		ftx = nil
	}
	a.storeOutcome(ctx, f, claim, res, runErr, fx.hasNonRead(), fx, ftx, nil, w)
}

// storeOutcome stores a claimed request's outcome (in ftx, when the flow's
// transaction joins the store) and answers it. commit, when not nil, is
// what stores it in ftx and commits (a coalesced run: with the run's
// journal); else claim.CommitComplete.
func (a *App) storeOutcome(ctx context.Context, f *flow, claim *idem.Claim, res result, runErr error, nonRead bool, fx *Fx, ftx *flowtx.Tx, commit func(conn *sql.Conn, stored driver.Response) error, w http.ResponseWriter) {
	m := f.metrics
	e, declared := (*Error)(nil), false
	if runErr != nil {
		if e, declared = asError(runErr); !declared {
			a.logFailure(ctx, f, runErr)
		}
	}
	action, answer := idem.Settle(idem.Ran{Failed: runErr != nil, Declared: declared, NonRead: nonRead,
		Unreachable: runErr != nil && (a.unavailable(runErr) || errors.Is(runErr, driver.ErrNotCommitted)), Storable: res.storable,
		TooLarge: len(res.body) > a.cfg.MaxStoredResponse})
	var stored driver.Response
	switch action {
	case idem.Release:
		if ftx != nil { // a raw response's writes: they stand, so commit them
			if err := commitTx(ftx, fx); err != nil {
				if errors.Is(err, driver.ErrNotCommitted) {
					// Rolled back: the key may run again.
					claim.Release(ctx)
					a.logFailure(ctx, f, err)
					a.writeUnavailable(ctx, w, f, true, startedUnavailable(fx.hasNonRead(), err))
					return
				}
				// The commit may have happened: leave the row to lapse.
				claim.Abandon()
				a.logFailure(ctx, f, err)
				a.writeUnavailable(ctx, w, f, true, ErrOutcomeUnknown.WithCause(err))
				return
			}
		}
		claim.Release(ctx)
		switch {
		case answer == idem.AnswerUnavailable:
			a.writeUnavailable(ctx, w, f, true, ErrUnavailable.WithCause(runErr))
		case runErr != nil:
			writeEnvelope(w, e)
		default:
			writeResult(w, res, false)
		}
		return
	case idem.StoreFailure:
		stored = driver.Response{Status: e.Status, ContentType: "application/json", Body: envelopeBytes(e)}
		res = result{status: e.Status, contentType: "application/json", body: stored.Body}
		if e.RetryAfter > 0 {
			res.header = http.Header{"Retry-After": {strconv.Itoa(e.RetryAfter)}}
		}
	case idem.StoreTombstone:
		stored = driver.Response{Status: ErrResponseNotStored.Status, ContentType: "application/json", Body: envelopeBytes(ErrResponseNotStored)}
	case idem.StoreResponse:
		stored = driver.Response{Status: res.status, ContentType: res.contentType, Location: res.location, Body: res.body}
	}
	// The request's span, for a replay's link to it.
	stored.Trace = tracing.FromContext(ctx)
	// Store before answering: once the client sees the response, a retry
	// replays it.
	if ftx != nil {
		// In the flow's transaction: the response commits with its writes.
		err := commitTxWith(ftx, fx, func(conn *sql.Conn) error {
			if commit != nil {
				return commit(conn, stored)
			}
			return claim.CommitComplete(ctx, conn, stored)
		})
		if err != nil {
			if errors.Is(err, driver.ErrNotOwner) {
				// Another attempt holds the key now; this one's writes
				// were rolled back. Answer what that attempt's row says.
				a.answerRefused(ctx, f, claim, w)
				return
			}
			if commit == nil && errors.Is(err, driver.ErrNotCommitted) {
				// The database said it rolled back: nothing of the
				// transaction happened. Settle the claim as for a flow
				// that failed with that error (spec 004 "Failures"): the
				// row is released and the answer is 503 Unavailable,
				// unless the flow had effects outside the transaction.
				a.storeOutcome(ctx, f, claim, res, err, fx.hasNonRead(), fx, nil, nil, w)
				return
			}
			// Unknown whether it committed: the row lapses, and the retry
			// replays the response or, if nothing committed, runs again.
			m.notStored.Inc()
			a.writeUnavailable(ctx, w, f, true, ErrOutcomeUnknown.WithCause(err))
			return
		}
		a.done.done(claim.Key)
		writeResult(w, res, false)
		return
	}
	if err := claim.Complete(ctx, stored); err != nil {
		if errors.Is(err, driver.ErrNotOwner) {
			a.answerRefused(ctx, f, claim, w)
			return
		}
		// The flow ran, but no retry could replay its answer: say so
		// rather than answer live. The row lapses; a retry with the key
		// then runs the flow again (a non-durable flow is at least once
		// across such a failure).
		m.notStored.Inc()
		a.writeUnavailable(ctx, w, f, true, ErrOutcomeUnknown.WithCause(err))
		return
	}
	a.done.done(claim.Key)
	writeResult(w, res, false)
}

// answerRefused answers a request whose completion was refused because
// another attempt holds its key now (this one's lease lapsed and a retry
// took the key over): never with its own result, which no retry would see,
// but with what the row holds now — that attempt's stored response, 409
// while it runs, or 422 if the key went to another request since. With no
// row to go by, the outcome is unknown.
func (a *App) answerRefused(ctx context.Context, f *flow, claim *idem.Claim, w http.ResponseWriter) {
	f.metrics.notStored.Inc()
	dec, ok, err := a.engine.Current(context.WithoutCancel(ctx), claim.Key, claim.Row.Fingerprint)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("flow %s: the key's row is gone after another attempt took it over", f.name)
		}
		a.writeUnavailable(ctx, w, f, true, ErrOutcomeUnknown.WithCause(err))
		return
	}
	a.answerClaim(ctx, f, dec, nil, w)
}

// writeUnavailable answers 503 with e (StoreUnavailable, OutcomeUnknown,
// Unavailable or ShuttingDown) and counts it: by code in
// oke_unavailable_total, and, for a keyed request, as its outcome.
func (a *App) writeUnavailable(ctx context.Context, w http.ResponseWriter, f *flow, keyed bool, e *Error) {
	m := f.metrics
	m.unavailable(e.Code).Inc()
	if span := tracing.Span(ctx); span.IsRecording() {
		span.SetStatus(codes.Error, "503 "+e.Code)
	}
	if keyed {
		if e.Code == ErrOutcomeUnknown.Code {
			m.count(ctx, OutcomeUnknown)
		} else {
			m.count(ctx, OutcomeUnavailable)
		}
	}
	writeEnvelope(w, e)
}

// startedUnavailable is the 503 of a flow whose function started and then
// failed because its store or database could not be reached: OutcomeUnknown
// after a non-read effect, else Unavailable (nothing was changed).
func startedUnavailable(nonRead bool, cause error) *Error {
	if nonRead {
		return ErrOutcomeUnknown.WithCause(cause)
	}
	return ErrUnavailable.WithCause(cause)
}

// runUnary runs a unary flow's function with a new effect handle.
func (a *App) runUnary(ctx context.Context, f *flow, in any, id Identity) (result, *Fx, error) {
	fx := &Fx{app: a, flow: f, identity: id}
	return a.callUnary(ctx, f, in, fx)
}

// callUnary runs a unary flow's function with fx, turning a panic into an
// error.
func (a *App) callUnary(ctx context.Context, f *flow, in any, fx *Fx) (res result, out *Fx, err error) {
	out = fx
	if f.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.opts.Timeout)
		defer cancel()
	}
	var span trace.Span
	ctx, span = flowSpan(ctx, f, fx.runID())
	defer func() { tracing.End(span, err) }() // after the recover below has set err
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("flow %s panicked: %v\n%s", f.name, p, debug.Stack())
		}
	}()
	if fx.claim == nil {
		// A flow with a deferred claim counts once its key is its own
		// (serveDeferred): a start its claim stops, having done nothing,
		// is a replay, 409 or 422 in the outcomes.
		f.metrics.executions.Inc()
	}
	// The deadlines of the flow's statements with rows end with it: their
	// rows are read by then, or never will be.
	fx.holdStatements()
	defer fx.releaseStatements()
	res, err = f.unary(ctx, in, fx)
	return res, fx, err
}

func (a *App) logFailure(ctx context.Context, f *flow, err error) {
	a.log.ErrorContext(ctx, "oke: flow failed", "flow", f.name, "err", err)
}

func (a *App) gate(r *http.Request, flow string) (Identity, error) {
	var id Identity
	if a.cfg.Gate != nil {
		var err error
		if id, err = a.cfg.Gate(r, flow); err != nil {
			return Identity{}, err
		}
	}
	if id.Tenant == "" {
		id.Tenant = "default"
	}
	if id.Principal == "" {
		id.Principal = "anon"
	}
	return id, nil
}

// paramsOf returns the lookup of URL parameters for a request: path values,
// and for GET and HEAD the query string too.
func (a *App) paramsOf(rt *route, r *http.Request) func(string) (string, bool) {
	query := r.Method == http.MethodGet || r.Method == http.MethodHead
	if len(rt.params) == 0 && (!query || r.URL.RawQuery == "") {
		return nil
	}
	var q map[string][]string
	if query {
		q = r.URL.Query()
	}
	return func(name string) (string, bool) {
		for _, p := range rt.params {
			if p == name {
				return r.PathValue(name), true
			}
		}
		if v, ok := q[name]; ok && len(v) > 0 {
			return v[0], true
		}
		return "", false
	}
}

// dedupeKey reads a webhook's dedupe key from its JSON payload.
func dedupeKey(body []byte, path []string) (string, *Error) {
	field := strings.Join(path, ".")
	missing := &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput,
		Message: fmt.Sprintf("The webhook payload has no %q field to dedupe on.", field)}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", missing
	}
	for _, p := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", missing
		}
		if v, ok = obj[p]; !ok {
			return "", missing
		}
	}
	var key string
	switch x := v.(type) {
	case string:
		key = x
	case float64:
		key = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return "", missing
	}
	if idem.ValidateDedupeKey(key) != nil {
		return "", &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput,
			Message: fmt.Sprintf("The webhook payload's %q must be 1–255 printable ASCII characters.", field)}
	}
	return key, nil
}

// writeResult writes a live response.
func writeResult(w http.ResponseWriter, res result, replayed bool) {
	h := w.Header()
	for k, v := range res.header {
		h[k] = v
	}
	// The values oke sets share one array, each slice capped at its own
	// element (an Add appends to a copy): one allocation, not one a header.
	// The keys are in canonical form, as Header.Set would make them.
	vals := make([]string, 0, 3)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if res.contentType != "" {
		set("Content-Type", res.contentType)
	}
	if res.location != "" {
		set("Location", res.location)
	}
	if replayed {
		set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(res.status)
	if len(res.body) > 0 {
		w.Write(res.body)
	}
}

// writeStored replays a stored response: status, body, Content-Type and
// Location only.
func writeStored(w http.ResponseWriter, s *driver.Response) {
	writeResult(w, result{status: s.Status, contentType: s.ContentType, location: s.Location, body: s.Body}, true)
}

// unavailable reports whether a flow's error says the store (or, on a
// driver.TxDriver, its database, which the flow's transaction uses) could not
// be reached: such a failure answers 503 StoreUnavailable, a retryable
// answer, instead of 500.
func (a *App) unavailable(err error) bool {
	if errors.Is(err, driver.ErrUnavailable) {
		return true
	}
	if a.cfg.Unavailable != nil && a.cfg.Unavailable(err) {
		return true
	}
	td, ok := a.cfg.Driver.(driver.TxDriver)
	return ok && td.Unavailable(err)
}

// bodyTypeAccepted says whether a request body with Content-Type ct is read
// (as JSON): JSON (application/json or any +json type), no Content-Type,
// or application/x-www-form-urlencoded, what curl -d sends unless told
// otherwise. Anything else is 415 UnsupportedMediaType: a body sent as
// text/plain or multipart is not what the operation takes.
func bodyTypeAccepted(ct string) bool {
	if ct == "" || httpx.IsJSON(ct) {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/x-www-form-urlencoded"
}
