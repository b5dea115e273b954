package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
	"github.com/okengine/oke/internal/lease"
	"github.com/okengine/oke/internal/token"
)

// DefaultLease is the in-progress lease: how long a claim holds without being
// renewed. It is renewed every Lease/3 while the flow runs.
const DefaultLease = 30 * time.Second

// Outcome is what a request with an honored Idempotency-Key gets.
type Outcome uint8

const (
	// Live: the caller holds the claim and runs the flow.
	Live Outcome = iota + 1
	// Replay: a completed row with the same fingerprint; replay its response.
	Replay
	// InProgress: the same request is still running under a live lease.
	InProgress
	// Reused: the key belongs to a different request (another fingerprint).
	Reused
)

func (o Outcome) String() string {
	switch o {
	case Live:
		return "live"
	case Replay:
		return "replayed"
	case InProgress:
		return "in_progress"
	case Reused:
		return "reused"
	}
	return "unknown"
}

// Decision is the outcome of Begin with what the caller needs to act on it.
type Decision struct {
	Outcome    Outcome
	Response   *driver.Response // Replay: the stored response (do not mutate)
	RetryAfter time.Duration    // InProgress: until the lease ends, ≥ 1s, whole seconds
	Claim      *Claim           // Live: the held claim; the caller must Complete or Release it
	// RunID is, for Replay, the journal run the row links (a durable
	// flow's); "" for none.
	RunID string
	// HeldInTx is, for InProgress, that the holder's claim is held by its
	// transaction: it has no lease to count down (RetryAfter is 1 s).
	HeldInTx bool
}

// Engine is the claim state machine over a driver. It holds no state of its
// own besides configuration; all state lives in the driver's rows.
type Engine struct {
	Driver driver.Driver
	Lease  time.Duration // zero means DefaultLease
	// OnError, if set, is told about background failures (lease renewal,
	// retried completion) that no request can report.
	OnError func(key driver.Key, op string, err error)
	// Leases renews the claims' leases; its owner closes it.
	Leases *lease.Pool
	// StoreTimeout bounds each driver call the engine makes (a claim, a
	// read of a row, a completion, a release): a call that takes longer
	// fails (deadline.ErrTimeout, which is driver.ErrUnavailable). Zero or
	// less: no bound but the caller's context.
	StoreTimeout time.Duration
	// replayed: the keys of claims held in a transaction that this
	// process answered from their stored response (replayed.go).
	replayed replayedKeys
}

// bound bounds one driver call, op, on ctx by StoreTimeout and traces it
// (deadline.Call).
func (e *Engine) bound(ctx context.Context, op string) (context.Context, func(error) error) {
	return deadline.Call(ctx, e.StoreTimeout, op)
}

func (e *Engine) lease() time.Duration {
	if e.Lease > 0 {
		return e.Lease
	}
	return DefaultLease
}

// Begin claims key for the request with fingerprint fp, or says why not.
// A driver error is returned wrapped; the caller must then fail closed and
// not run the flow.
func (e *Engine) Begin(ctx context.Context, key driver.Key, fp string, ttl time.Duration, runID string) (Decision, error) {
	owner := token.Owner()
	lease := e.lease()
	cctx, end := e.bound(ctx, "claim")
	res, err := e.Driver.Claim(cctx, driver.ClaimRequest{
		Key: key, Fingerprint: fp, Owner: owner, Lease: lease, TTL: ttl, RunID: runID,
	})
	if err = end(err); err != nil {
		return Decision{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	return e.decide(key, owner, lease, ttl, fp, res), nil
}

// decide turns a claim's result into the decision, arming the lease of a
// claim that went to owner.
func (e *Engine) decide(key driver.Key, owner string, lease, ttl time.Duration, fp string, res driver.ClaimResult) Decision {
	if res.Claimed {
		c := &Claim{e: e, Key: key, owner: owner, lease: lease, ttl: ttl,
			Row: res.Row, Previous: res.Previous, TookOver: res.TookOver, inTx: res.InTx}
		if !c.inTx { // a claim held by a transaction lasts as long as it: no lease
			c.arm()
		}
		return Decision{Outcome: Live, Claim: c}
	}
	if res.Busy {
		// Another transaction holds the key: the same request running
		// (its claim has no lease to count down: retry in a second), or
		// another request under the same key.
		if !res.BusySame {
			return Decision{Outcome: Reused}
		}
		return Decision{Outcome: InProgress, RetryAfter: RetryAfter(0), HeldInTx: true}
	}
	row := &res.Row
	switch {
	case row.Fingerprint != fp:
		return Decision{Outcome: Reused}
	case row.State == driver.Completed && row.Response != nil:
		return Decision{Outcome: Replay, Response: row.Response, RunID: row.RunID}
	default:
		return Decision{Outcome: InProgress, RetryAfter: RetryAfter(row.LeaseUntil.Sub(res.Now))}
	}
}

// Current says what a request with fingerprint fp gets from the row of key
// as it is now, without claiming it: Replay, InProgress or Reused, by the
// same rules as Begin. ok is false when no row protects the key (there is
// none, or it expired). It is for an attempt whose completion was refused
// (driver.ErrNotOwner): another attempt holds the key now, and the refused
// one must answer what that attempt's row holds, never its own result.
func (e *Engine) Current(ctx context.Context, key driver.Key, fp string) (d Decision, ok bool, err error) {
	return e.fromRow(ctx, key, fp, func(row driver.Row, now time.Time) bool { return !row.Expired(now) })
}

// Stored says what a request with fingerprint fp gets from the row of key
// when that row holds a stored response that is not about to expire:
// Replay, or Reused for another fingerprint, by the same rules as Begin —
// one read of the row, no claim, no lock. ok is false, and the request
// must be claimed as usual, for any other row, for none, and for one that
// expires within margin (the row's expiry is the store's clock; margin
// covers the skew of this process's).
func (e *Engine) Stored(ctx context.Context, key driver.Key, fp string, margin time.Duration) (d Decision, ok bool, err error) {
	return e.fromRow(ctx, key, fp, func(row driver.Row, now time.Time) bool {
		return row.State == driver.Completed && row.Response != nil && !row.Expired(now.Add(margin))
	})
}

// fromRow reads the row of key and, when stands says it decides (at this
// process's now), says what a request with fingerprint fp gets from it, by
// the same rules as Begin (ok true); no row, or one that does not stand, is
// ok false.
func (e *Engine) fromRow(ctx context.Context, key driver.Key, fp string, stands func(row driver.Row, now time.Time) bool) (d Decision, ok bool, err error) {
	gctx, end := e.bound(ctx, "get")
	row, err := e.Driver.Get(gctx, key)
	err = end(err)
	if errors.Is(err, driver.ErrNotFound) {
		return Decision{}, false, nil
	}
	if err != nil {
		return Decision{}, false, fmt.Errorf("read idempotency row: %w", err)
	}
	now := time.Now()
	if !stands(row, now) {
		return Decision{}, false, nil
	}
	return e.decide(key, "", 0, 0, fp, driver.ClaimResult{Row: row, Now: now}), true, nil
}

// RetryAfter rounds a remaining lease up to whole seconds, at least one.
func RetryAfter(remaining time.Duration) time.Duration {
	if remaining <= time.Second {
		return time.Second
	}
	return (remaining + time.Second - 1).Truncate(time.Second)
}

// RetryAfterHeader formats d as the Retry-After header value.
func RetryAfterHeader(d time.Duration) string {
	return strconv.FormatInt(int64(RetryAfter(d)/time.Second), 10)
}

// Claim is a held claim. While held, its lease is renewed in the background.
// Exactly one of Complete or Release must be called.
type Claim struct {
	e        *Engine
	Key      driver.Key
	Row      driver.Row  // the row as claimed
	Previous *driver.Row // the row this claim replaced, if any
	TookOver bool        // a lapsed claim of the same request was taken over
	owner    string
	lease    time.Duration
	ttl      time.Duration
	// inTx: the claim is held by the flow's transaction
	// (driver.ClaimResult.InTx); no row exists unless it commits.
	inTx bool

	keeper *lease.Keeper
	lost   atomic.Bool
}

// Lost reports whether a renewal found that another owner took the row: the
// response of this attempt can no longer be stored.
func (c *Claim) Lost() bool { return c.lost.Load() }

func (c *Claim) arm() {
	c.keeper = lease.Keep(c.e.Leases, c.lease, func(ctx context.Context, d time.Duration) error {
		return c.e.Driver.Renew(ctx, c.Key, c.owner, d)
	}, func() {
		c.lost.Store(true)
		c.report("renew lease", driver.ErrNotOwner)
	}, func(err error) { c.report("renew lease", err) })
}

func (c *Claim) stop() {
	if c.keeper != nil {
		c.keeper.Stop()
	}
}

func (c *Claim) report(op string, err error) {
	if c.e.OnError != nil {
		c.e.OnError(c.Key, op, err)
	}
}

// completeAttempts bounds retries of a completion that failed because the
// store was unavailable.
const completeAttempts = 3

// Complete stores resp and ends the claim. It runs on a context that the
// client's disconnect cannot cancel. ErrNotOwner means the lease was lost and
// another attempt owns the key now.
//
// A claim held by the flow's transaction that ended without the response
// (rolled back, or committed before it) is made again first, as a claim of
// its own: it fails with ErrNotOwner if another request took the key
// meanwhile.
func (c *Claim) Complete(ctx context.Context, resp driver.Response) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	if c.inTx {
		if err = c.reclaim(ctx); err != nil {
			err = fmt.Errorf("store idempotent response: %w", err)
			c.report("complete", err)
			return err
		}
	}
	for attempt := 0; attempt < completeAttempts; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
		}
		cctx, end := c.e.bound(ctx, "complete")
		err = end(c.e.Driver.Complete(cctx, c.Key, c.owner, resp, c.ttl))
		// A store that did not answer in time is not asked again: the
		// answer would only come later still.
		if err == nil || !errors.Is(err, driver.ErrUnavailable) || errors.Is(err, deadline.ErrTimeout) {
			break
		}
	}
	c.stop()
	if err != nil {
		err = fmt.Errorf("store idempotent response: %w", err)
		c.report("complete", err)
	}
	return err
}

// CommitComplete stores resp in the transaction open on conn and commits
// it (driver.TxDriver.CommitComplete): the response is stored exactly when
// the caller's writes in that transaction are. It ends the claim either way.
// ErrNotOwner means another attempt holds the key and the transaction was
// rolled back; any other error that the outcome is unknown (a failed commit
// may have committed) — the row is left to lapse, and the next request with
// the key replays the response if it was stored, or runs again if not.
// InTx reports whether the claim is held by the flow's transaction (no row
// exists unless it commits).
func (c *Claim) InTx() bool { return c.inTx }

// CommitRun is CommitComplete that also writes journal run run and its
// steps in the transaction (driver.RunCommitter): one commit for a whole
// durable run.
func (c *Claim) CommitRun(ctx context.Context, conn *sql.Conn, resp driver.Response, run driver.Run, steps []driver.Step) error {
	c.stop()
	d, ok := c.e.Driver.(driver.RunCommitter)
	if !ok {
		return errors.New("store a durable run in a transaction: the driver cannot")
	}
	key := c.Key
	cctx, end := c.e.bound(context.WithoutCancel(ctx), "commit_run")
	err := end(d.CommitRun(cctx, conn, &key, c.owner, resp, c.ttl, run, steps))
	if err != nil {
		err = fmt.Errorf("store the durable run and its response in the flow's transaction: %w", err)
		c.report("complete", err)
	}
	return err
}

func (c *Claim) CommitComplete(ctx context.Context, conn *sql.Conn, resp driver.Response) error {
	// Stop renewing first: a renewal would wait for the transaction's lock
	// on the row and then find it completed.
	c.stop()
	d, ok := c.e.Driver.(driver.TxDriver)
	if !ok {
		return errors.New("store idempotent response in a transaction: the driver keeps no SQL rows")
	}
	cctx, end := c.e.bound(context.WithoutCancel(ctx), "commit_complete")
	err := end(d.CommitComplete(cctx, conn, c.Key, c.owner, resp, c.ttl))
	if err != nil {
		err = fmt.Errorf("store idempotent response in the flow's transaction: %w", err)
		c.report("complete", err)
	}
	return err
}

// reclaim makes again, as a claim of its own, a claim that was held by a
// transaction that ended: the next effect on it needs its row.
func (c *Claim) reclaim(ctx context.Context) error {
	cctx, end := c.e.bound(ctx, "claim")
	res, err := c.e.Driver.Claim(cctx, driver.ClaimRequest{
		Key: c.Key, Fingerprint: c.Row.Fingerprint, Owner: c.owner, Lease: c.lease, TTL: c.ttl,
	})
	err = end(err)
	switch {
	case err != nil:
		return fmt.Errorf("claim idempotency key again: %w", err)
	case !res.Claimed:
		return fmt.Errorf("claim idempotency key again: %w", driver.ErrNotOwner)
	}
	c.inTx = false
	return nil
}

// Release deletes the row so that the same key may run again, and ends the
// claim. A claim held by the flow's transaction has no row once that
// transaction ended: there is nothing to delete.
func (c *Claim) Release(ctx context.Context) error {
	if c.inTx {
		return nil
	}
	c.stop()
	rctx, end := c.e.bound(context.WithoutCancel(ctx), "release")
	err := end(c.e.Driver.Release(rctx, c.Key, c.owner))
	if err != nil {
		err = fmt.Errorf("release idempotency key: %w", err)
		c.report("release", err)
	}
	return err
}

// Yield shortens the claim's lease to lease and stops renewing it: the row
// stays claimed for that long (a retry meanwhile gets 409), then the next
// request with the key takes it over.
func (c *Claim) Yield(ctx context.Context, lease time.Duration) {
	c.stop()
	rctx, end := c.e.bound(context.WithoutCancel(ctx), "renew")
	if err := end(c.e.Driver.Renew(rctx, c.Key, c.owner, lease)); err != nil {
		c.report("yield", err)
	}
}

// Abandon stops renewing without touching the row: its lease lapses and the
// next request with the key takes over (a durable flow resumes its run).
func (c *Claim) Abandon() { c.stop() }
