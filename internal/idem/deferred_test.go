package idem

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/token"
)

// countingDriver counts the claims made through the driver.
type countingDriver struct {
	driver.Driver
	claims atomic.Int64
}

func (d *countingDriver) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	d.claims.Add(1)
	return d.Driver.Claim(ctx, req)
}

func TestDeferred(t *testing.T) {
	ctx := context.Background()
	d := &countingDriver{Driver: memory.New()}
	e := &Engine{Driver: d, Leases: testPool(t)}
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "deferred-key-00000000001"}

	// Nothing is claimed until asked; Decide makes the claim once.
	first := e.Defer(ctx, key, "fp", time.Hour)
	if d.claims.Load() != 0 {
		t.Fatal("Defer made the claim")
	}
	dec, err := first.Decide()
	if err != nil || dec.Outcome != Live || d.claims.Load() != 1 {
		t.Fatalf("Decide: %v %v, %d claims; want live, 1 claim", dec.Outcome, err, d.claims.Load())
	}
	if again, _ := first.Decide(); again.Claim != dec.Claim || d.claims.Load() != 1 || first.Settle() != nil {
		t.Fatal("a second Decide claimed again or decided otherwise")
	}
	if _, ok, err := first.Take(); ok || err != nil {
		t.Fatalf("Take after a live claim: %v %v; want not taken, no error (begin as usual)", ok, err)
	}

	// A second request with the key, running: the driver takes the claim
	// (Take), reads it, and Done refuses; so does every effect after.
	second := e.Defer(ctx, key, "fp", time.Hour)
	req, ok, err := second.Take()
	if !ok || err != nil || req.Owner == "" || req.Owner == dec.Claim.owner {
		t.Fatalf("Take: %+v %v %v; want the claim, with an owner of its own", req, ok, err)
	}
	waited := make(chan Decision)
	go func() { // Decide waits for the claim in flight
		dec, _ := second.Decide()
		waited <- dec
	}()
	res, cerr := d.Claim(ctx, req)
	if err := second.Done(res, cerr); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("Done of a running key: %v, want ErrNotClaimed", err)
	}
	if dec := <-waited; dec.Outcome != InProgress || dec.RetryAfter < time.Second {
		t.Fatalf("Decide: %+v, want in progress with a Retry-After", dec)
	}
	if err := second.Settle(); !errors.Is(err, ErrNotClaimed) {
		t.Errorf("Settle after a refusal: %v, want ErrNotClaimed", err)
	}
	if _, ok, err := second.Take(); ok || !errors.Is(err, ErrNotClaimed) {
		t.Errorf("Take after a refusal: %v %v, want not taken, ErrNotClaimed", ok, err)
	}
	if d.claims.Load() != 2 {
		t.Errorf("%d claims, want 2", d.claims.Load())
	}

	// Another request under the key: 422.
	if dec, err := e.Defer(ctx, key, "other", time.Hour).Decide(); err != nil || dec.Outcome != Reused {
		t.Errorf("another fingerprint: %v %v, want reused", dec.Outcome, err)
	}

	// The store failing: the error, wrapped, to the effect and to Decide.
	third := e.Defer(ctx, driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "deferred-key-00000000002"}, "fp", time.Hour)
	if _, ok, _ := third.Take(); !ok {
		t.Fatal("Take: not taken")
	}
	down := errors.Join(driver.ErrUnavailable, errors.New("connection refused"))
	if err := third.Done(driver.ClaimResult{}, down); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Done with a store error: %v", err)
	}
	if _, err := third.Decide(); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Decide after a store error: %v", err)
	}
	if err := third.Done(driver.ClaimResult{}, nil); err == nil {
		t.Error("a second Done: nil, want an error (nothing was sent)")
	}
	dec.Claim.Release(ctx)
}

// blockingDriver holds every claim until release is closed.
type blockingDriver struct {
	driver.Driver
	started chan struct{}
	release chan struct{}
}

func (d *blockingDriver) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	close(d.started)
	<-d.release
	return d.Driver.Claim(ctx, req)
}

// A statement that would carry the claim while an effect on another
// goroutine is making it waits for that claim's decision instead of
// failing or claiming twice.
func TestDeferredTakeWaitsForAClaimInFlight(t *testing.T) {
	ctx := context.Background()
	d := &blockingDriver{Driver: memory.New(), started: make(chan struct{}), release: make(chan struct{})}
	e := &Engine{Driver: d, Leases: testPool(t)}
	def := e.Defer(ctx, driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "in-flight-key-0000000001"}, "fp", time.Hour)
	decided := make(chan error)
	go func() { decided <- def.Settle() }() // an effect makes the claim
	<-d.started
	took := make(chan bool)
	var takeErr error
	go func() {
		_, ok, err := def.Take() // the Tx's first statement
		takeErr = err
		took <- ok
	}()
	select {
	case <-took:
		t.Fatal("Take returned while the claim was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(d.release)
	if err := <-decided; err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if ok := <-took; ok || takeErr != nil {
		t.Errorf("Take after the claim in flight went to the flow: %v %v; want not taken, no error (begin as usual)", ok, takeErr)
	}
	dec, _ := def.Decide()
	dec.Claim.Release(ctx)
}

// A claim held by the flow's transaction (driver.ClaimResult.InTx) has no
// row of its own: no lease is kept, Release has nothing to delete, and
// Complete after its transaction ended claims the key again first — or
// fails with ErrNotOwner when another request took it meanwhile.
func TestClaimHeldByATransaction(t *testing.T) {
	ctx := context.Background()
	d := &countingDriver{Driver: memory.New()}
	e := &Engine{Driver: d, Leases: testPool(t)}
	held := func(key string) *Claim {
		k := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: key}
		dec := e.decide(k, token.Owner(), time.Minute, time.Hour, "fp",
			driver.ClaimResult{Claimed: true, InTx: true, Row: driver.Row{Key: k, Fingerprint: "fp", State: driver.Running}})
		if dec.Outcome != Live || dec.Claim == nil || dec.Claim.keeper != nil {
			t.Fatalf("decision %+v: want Live, with no lease kept", dec)
		}
		return dec.Claim
	}

	c := held("held-key-released-000001")
	if err := c.Release(ctx); err != nil || d.claims.Load() != 0 {
		t.Errorf("Release: %v, %d driver claims; want nothing to do", err, d.claims.Load())
	}

	c = held("held-key-completed-00001")
	resp := driver.Response{Status: 402, ContentType: "application/json", Body: []byte(`{}`)}
	if err := c.Complete(ctx, resp); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	row, err := d.Get(ctx, c.Key)
	if err != nil || row.State != driver.Completed || row.Response.Status != 402 || row.Fingerprint != "fp" || d.claims.Load() != 1 {
		t.Errorf("after Complete: %+v, %v, %d driver claims; want the key claimed again and completed", row, err, d.claims.Load())
	}

	c = held("held-key-taken-0000000001")
	if res, err := d.Claim(ctx, driver.ClaimRequest{Key: c.Key, Fingerprint: "fp", Owner: "other", Lease: time.Minute, TTL: time.Hour}); err != nil || !res.Claimed {
		t.Fatalf("another request's claim: %+v, %v", res, err)
	}
	if err := c.Complete(ctx, resp); !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("Complete after another request took the key: %v, want ErrNotOwner", err)
	}
}

// A key another transaction holds, with no row to show (driver.ClaimResult
// Busy): the same request is still running (409, Retry-After 1 s), another
// request under the key is 422 — the engine's answer from the driver's fact.
func TestDecideBusy(t *testing.T) {
	e := &Engine{Driver: memory.New()}
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "busy-key-000000000001"}
	for _, tc := range []struct {
		name  string
		same  bool
		want  Outcome
		retry time.Duration
	}{
		{"same fingerprint: in progress", true, InProgress, time.Second},
		{"other fingerprint: reused", false, Reused, 0},
	} {
		dec := e.decide(key, "", 0, 0, "fp", driver.ClaimResult{Busy: true, BusySame: tc.same, Now: time.Now()})
		if dec.Outcome != tc.want || dec.RetryAfter != tc.retry || dec.Claim != nil {
			t.Errorf("%s: %+v, want %s with Retry-After %v", tc.name, dec, tc.want, tc.retry)
		}
	}
}
