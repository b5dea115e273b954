package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/token"
)

// ErrNotClaimed is what a flow with a deferred claim gets from the effect
// that made the claim, when the key turned out not to be its request's: a
// completed request (the response is replayed), one still running (409),
// or another request under the same key (422). The flow should return it;
// its answer is not used either way.
var ErrNotClaimed = errors.New("the Idempotency-Key is not this request's to run")

// Deferred is a claim made late: not when the request arrives, but with the
// flow's first statement in its transaction (driver.TxClaimer sends it in
// the same round trip), or before the flow's first other non-read effect,
// or when the flow returns (Decide), whichever comes first. Until then the
// flow's function runs without the key; it must change nothing outside oke
// before its first effect.
//
// Deferred implements driver.ClaimTicket.
type Deferred struct {
	e   *Engine
	ctx context.Context // for a claim made by Decide: without cancellation
	req driver.ClaimRequest

	mu    sync.Mutex
	state deferredState
	done  chan struct{} // closed once the decision is known
	start time.Time
	took  time.Duration
	dec   Decision
	err   error
	alone bool // Decide made the claim on its own (not with a statement)
}

type deferredState uint8

const (
	unmade  deferredState = iota // not sent yet
	sent                         // in flight
	decided                      // dec and err are set; done is closed
)

var _ driver.ClaimTicket = (*Deferred)(nil)

// Defer prepares the claim of key for a request with fingerprint fp,
// without making it. A driver that sends it with the flow's first
// statement (driver.TxClaimer) holds it in the flow's transaction.
func (e *Engine) Defer(ctx context.Context, key driver.Key, fp string, ttl time.Duration) *Deferred {
	return &Deferred{
		e:    e,
		ctx:  context.WithoutCancel(ctx),
		req:  driver.ClaimRequest{Key: key, Fingerprint: fp, Owner: token.Owner(), Lease: e.lease(), TTL: ttl},
		done: make(chan struct{}),
	}
}

// LinkRun makes the claim, when it is made on its own (Decide, Settle),
// link journal run id to the key's row (driver.ClaimRequest.RunID). Call it
// before the flow runs.
func (d *Deferred) LinkRun(id string) {
	d.mu.Lock()
	d.req.RunID = id
	d.mu.Unlock()
}

// Decided is Defer for a claim decided already, by a read of the key's row
// that took the time took (Stored): its decision is dec, and the flow's first effect
// is refused with it at once, no claim sent.
func (e *Engine) Decided(ctx context.Context, key driver.Key, fp string, ttl time.Duration, dec Decision, took time.Duration) *Deferred {
	d := e.Defer(ctx, key, fp, ttl)
	d.state, d.dec, d.took = decided, dec, took
	close(d.done)
	return d
}

// Take implements driver.ClaimTicket. When the claim is in flight already
// (Decide, for an effect on another goroutine of the flow), it waits for
// the decision.
func (d *Deferred) Take() (driver.ClaimRequest, bool, error) {
	d.mu.Lock()
	switch d.state {
	case unmade:
		d.state, d.start = sent, time.Now()
		d.mu.Unlock()
		return d.req, true, nil
	case sent:
		d.mu.Unlock()
		<-d.done
		return d.req, false, d.refusal()
	}
	d.mu.Unlock()
	return d.req, false, d.refusal()
}

// Done implements driver.ClaimTicket.
func (d *Deferred) Done(res driver.ClaimResult, err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != sent {
		return errors.New("oke: an Idempotency-Key claim's result came back that was not sent")
	}
	d.took = time.Since(d.start)
	if err != nil {
		d.err = fmt.Errorf("claim idempotency key: %w", err)
	} else {
		r := d.req
		d.dec = d.e.decide(r.Key, r.Owner, r.Lease, r.TTL, r.Fingerprint, res)
	}
	d.state = decided
	close(d.done)
	return d.refusal()
}

// refusal is what an effect of the flow returns once the claim is decided:
// nil when the flow holds the key.
func (d *Deferred) refusal() error {
	switch {
	case d.err != nil:
		return d.err
	case d.dec.Outcome != Live:
		return fmt.Errorf("%w (%s)", ErrNotClaimed, d.dec.Outcome)
	}
	return nil
}

// Decide returns the claim's decision, making the claim now (one driver
// call) if nothing made it yet, or waiting for the one in flight. A driver
// error is returned wrapped: the caller must then fail closed.
func (d *Deferred) Decide() (Decision, error) {
	d.mu.Lock()
	switch d.state {
	case unmade:
		d.state, d.start, d.alone = sent, time.Now(), true
		d.mu.Unlock()
		ctx, end := d.e.bound(d.ctx, "claim")
		res, err := d.e.Driver.Claim(ctx, d.req)
		d.Done(res, end(err))
	case sent:
		d.mu.Unlock()
		<-d.done
	default:
		d.mu.Unlock()
	}
	return d.dec, d.err
}

// Settle makes the claim if nothing made it yet (Decide) and returns nil
// when the flow holds the key, or the error its effect must return.
func (d *Deferred) Settle() error {
	d.Decide()
	return d.refusal()
}

// OnItsOwn reports whether the claim was made on its own (by Decide or
// Settle, committed in a statement of its own) rather than with a
// statement of the flow's transaction (Take), whose rollback undoes it.
func (d *Deferred) OnItsOwn() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.alone
}

// Took is how long the claim took once sent: with a statement, the round
// trip they shared. Zero until decided.
func (d *Deferred) Took() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.took
}
