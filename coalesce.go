package oke

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/flowtx"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/token"
	"github.com/okengine/oke/internal/tracing"
)

// A coalesced run
//
// A durable flow whose every non-read effect is a statement in its steps'
// transactions (Fx.Tx inside Step) — the contract's Coalesced, which oke
// extract proves from the code — changes nothing outside the journal's
// database. On a driver that holds claims in a transaction and writes whole
// runs in one (driver.RunCommitter: Postgres), a keyed request of it runs
// every step in ONE transaction: the key's claim goes with the first
// statement (as a ClaimInTx flow's does), every step's Fx.Tx is that
// transaction, the steps' results are kept in memory, and at the end the
// run's row, its steps, its end and the key's stored response are written
// in the same transaction, with its COMMIT, in one round trip. One commit
// per request, however many steps.
//
// It is still exactly once: until that commit nothing of the request is in
// the database — neither its writes, nor its run, nor its key's row — so a
// crash anywhere rolls it all back, and a retry with the key runs it again
// from the start. A durable sleep ends the transaction there: the run is
// written parked, with the steps so far, and goes on the usual way when it
// wakes.
//
// Anything one transaction cannot hold sends the request back to the usual
// path, from the start, before it has changed anything: a step that fails
// (its error may have aborted the transaction; the usual path retries it), a
// non-read effect outside the transaction (refused before it happens), a
// business-key Claim, a Run, or a flow that sent no statement at all. The
// first attempt's statements are rolled back with the claim they carried.
//
// What it costs: the transaction, and the key's lock, are held for the
// whole run, so a long step holds them as long; and while the run executes
// it is in no listing (the console shows it once it has committed).

// errCoalesced is what an operation a coalesced run cannot do in its one
// transaction returns: the request runs again on the usual path.
var errCoalesced = errors.New("oke: this durable run cannot stay in one transaction; it runs again the usual way")

// coalescing is the state of a coalesced run (see above), on its root Fx.
type coalescing struct {
	mu       sync.Mutex
	tx       *flowtx.Tx // the run's one transaction, opened by the first Fx.Tx
	fallback error      // why the run leaves its transaction, once it must
}

// fail records why the run must leave its one transaction and returns the
// error the operation gives the flow.
func (c *coalescing) fail(why error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fallback == nil {
		c.fallback = why
	}
	return fmt.Errorf("%w: %v", errCoalesced, why)
}

func (c *coalescing) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fallback
}

// openTx returns the run's transaction for a step's Fx.Tx, beginning it
// (with the key's deferred claim) on first use.
func (c *coalescing) openTx(ctx context.Context, fx *Fx) (*Tx, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fallback != nil {
		return nil, fmt.Errorf("%w: %v", errCoalesced, c.fallback)
	}
	root := fx.root()
	if c.tx == nil {
		t, err := fx.app.beginTx(ctx, fx.flow.name, root.claim)
		if err != nil {
			return nil, err
		}
		c.tx = t
	}
	return &Tx{fx: fx, tx: c.tx.Queryer(), pending: c.tx}, nil
}

// memJournal is a coalesced run's journal: the steps it saves, in memory,
// until the run's one commit writes them. It has no other call to answer.
type memJournal struct {
	driver.Journal // nil: any other call is a bug, and panics
	mu             sync.Mutex
	steps          []driver.Step
}

func (j *memJournal) SaveStep(ctx context.Context, id, owner string, s driver.Step) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s.Seq != len(j.steps)+1 {
		return fmt.Errorf("run %s: save step %d after %d: %w", id, s.Seq, len(j.steps), driver.ErrStepOrder)
	}
	s.Result, s.Failure = slices.Clone(s.Result), slices.Clone(s.Failure)
	j.steps = append(j.steps, s)
	return nil
}

// RenewRun: the run is in no store yet; the key's lock lasts as long as the
// transaction.
func (j *memJournal) RenewRun(context.Context, string, string, time.Duration) error { return nil }

// serveCoalesced serves a keyed request of a coalesced flow (f.coalesced)
// in one transaction, and reports whether it did; false means it changed
// nothing and the caller serves the request the usual way.
func (a *App) serveCoalesced(ctx context.Context, f *flow, in any, canon []byte, id Identity, k keyed, w http.ResponseWriter) bool {
	m := f.metrics
	d, dec, took, answered := a.engine.Held(ctx, k.key, k.fp, k.ttl)
	if answered {
		observe(ctx, m.claim, took.Seconds())
		if parkedRun(f, dec) {
			a.answerParked(f, k, dec, k.wait, w)
			return true
		}
		a.answerClaim(ctx, f, dec, nil, w)
		return true
	}
	now := time.Now()
	owner := token.Owner()
	runID := token.RunIDAt(now)
	d.LinkRun(runID)
	key := k.key
	run := driver.Run{ID: runID, Flow: f.name, Input: canon, Tenant: id.Tenant, Principal: id.Principal,
		Owner: owner, Status: driver.RunRunning, Attempts: 1, NextAttempts: 1, IdemKey: &key, CreatedAt: now.UTC(),
		Trace: tracing.FromContext(ctx)}
	mj := &memJournal{}
	e := new(execution)
	x := &e.x
	x.Init(a.leases, mj, run, nil, owner, a.cfg.Lease, (*runReporter)(a), now)
	x.StoreTimeout = a.cfg.StoreTimeout
	rc := &e.rc
	rc.init(ctx, x, a, f, id)
	co := &coalescing{}
	rc.fx.claim, rc.fx.co = d, co
	res, _, runErr := a.callUnary(rc, f, in, &rc.fx)
	x.Drain()
	x.Stop()
	rc.st.endStepTx()
	co.mu.Lock()
	tx := co.tx
	co.mu.Unlock()

	dec, err := d.Decide()
	observe(ctx, m.claim, d.Took().Seconds())
	a.engine.NoteHeld(k.key, dec, err)
	if err == nil && dec.Outcome == idem.InProgress {
		tx.Rollback() // the transaction never began: the claim went ahead of its BEGIN
		tx = nil
		dec = a.await(f, k, dec, err, w)
	}
	if err == nil && parkedRun(f, dec) {
		tx.Rollback()
		a.answerParked(f, k, dec, k.wait, w)
		return true
	}
	wake, parked := x.Parked()
	if parked {
		runErr = nil // the flow returned the sleep's error, as it must
	}
	fallback := co.failed() != nil || runErr != nil || tx == nil || !tx.Joined() || x.Failure() != nil || (!parked && !res.storable)
	if err == nil && dec.Outcome == idem.Live && fallback && dec.Claim.InTx() {
		// Back to the usual path, from the start: nothing of this attempt
		// committed — its statements roll back, and the claim they carried
		// with them.
		tx.Rollback()
		m.coalesceFallbacks.Inc()
		return false
	}
	if !a.answerClaim(ctx, f, dec, err, w) {
		tx.Rollback()
		return true
	}
	claim := dec.Claim
	if fallback {
		// The claim was made on its own (no statement carried it): it
		// stands, and the usual path runs under it.
		tx.Rollback()
		m.coalesceFallbacks.Inc()
		a.serveRun(ctx, f, in, canon, id, claim, w)
		return true
	}
	f.metrics.executions.Inc() // the function ran with its key
	run.Owner, run.Attempts = "", 1
	var stored result
	if parked {
		run.Status, run.WakeAt = driver.RunSleeping, wake
		stored = result{status: http.StatusNoContent, storable: true, header: http.Header{HeaderRunID: {runID}}}
	} else {
		run.Status = driver.RunCompleted
		run.Result = &driver.Response{Status: res.status, ContentType: res.contentType, Location: res.location, Body: res.body}
		stored = res
	}
	commit := func(conn *sql.Conn, resp driver.Response) error {
		if !parked {
			run.Result = &resp // what the key stores (a tombstone when too large)
		}
		return claim.CommitRun(ctx, conn, resp, run, mj.steps)
	}
	a.storeOutcome(ctx, f, claim, stored, nil, true, &rc.fx, tx, commit, w)
	if parked {
		a.wake()
		a.wakeAt(wake)
	}
	return true
}
