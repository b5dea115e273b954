package idem

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// TestHeld: a key is answered from its row only once a claim held in the
// transaction replayed it here (NoteHeld), and only while the row holds its
// stored response; another payload under such a key is decided by the same
// read; a key whose row is gone goes back to the ordinary claim, and is
// forgotten.
func TestHeld(t *testing.T) {
	ctx := context.Background()
	d := &countingDriver{Driver: memory.New()}
	e := &Engine{Driver: d, Leases: testPool(t)}
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "held-key-000000000000001"}

	// A new key: the claim, deferred, as Defer gives it.
	first, _, _, answered := e.Held(ctx, key, "fp", time.Hour)
	if answered || first == nil {
		t.Fatal("Held answered a key never replayed here")
	}
	dec, err := first.Decide()
	if err != nil || dec.Outcome != Live {
		t.Fatalf("Decide: %v %v; want live", dec.Outcome, err)
	}
	resp := driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"id":1}`)}
	if err := dec.Claim.Complete(ctx, resp); err != nil {
		t.Fatal(err)
	}

	// Completed, but not yet replayed here: still the ordinary claim.
	if _, _, _, answered := e.Held(ctx, key, "fp", time.Hour); answered {
		t.Fatal("Held answered before any replay was noted")
	}
	e.NoteHeld(key, Decision{Outcome: Live}, nil) // not a replay: not noted
	if _, _, _, answered := e.Held(ctx, key, "fp", time.Hour); answered {
		t.Fatal("Held answered after a live decision was noted")
	}

	// Once a replay is noted, the row answers, with no claim made.
	e.NoteHeld(key, Decision{Outcome: Replay}, nil)
	claims := d.claims.Load()
	_, got, _, answered := e.Held(ctx, key, "fp", time.Hour)
	if !answered || got.Outcome != Replay || got.Response == nil || string(got.Response.Body) != `{"id":1}` {
		t.Fatalf("Held after a replay: %v %+v; want the stored response", answered, got)
	}
	if d.claims.Load() != claims {
		t.Fatal("Held made a claim to replay")
	}

	// Another payload: not answered here, but decided by the read.
	other, _, _, answered := e.Held(ctx, key, "other-fp", time.Hour)
	if answered || other == nil {
		t.Fatal("Held answered another payload")
	}
	if dec, err := other.Decide(); err != nil || dec.Outcome != Reused || d.claims.Load() != claims {
		t.Fatalf("another payload: %v %v, %d claims; want reused (422), decided without a claim", dec.Outcome, err, d.claims.Load()-claims)
	}

	// The row gone: the ordinary claim again, and the key is forgotten.
	if err := d.Driver.(*memory.Driver).Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	again, _, _, answered := e.Held(ctx, key, "fp", time.Hour)
	if answered || again == nil || e.replayed.has(key) {
		t.Fatalf("after the row went: answered %v, still remembered %v; want the claim, forgotten", answered, e.replayed.has(key))
	}
}

// TestReplayedKeysAreBounded: past replayedMax keys the set starts again,
// and its count stays what it holds.
func TestReplayedKeysAreBounded(t *testing.T) {
	var s replayedKeys
	key := func(i int) driver.Key {
		return driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: fmt.Sprint("k-", i)}
	}
	for i := range replayedMax + 1 {
		s.add(key(i))
		s.add(key(i)) // twice: counted once
	}
	if n := s.n.Load(); n != 1 || !s.has(key(replayedMax)) || s.has(key(0)) {
		t.Fatalf("after %d keys: %d counted, last held %v, first held %v; want 1, the last only", replayedMax+1, n, s.has(key(replayedMax)), s.has(key(0)))
	}
	s.forget(key(replayedMax))
	s.forget(key(replayedMax))
	if n := s.n.Load(); n != 0 || s.has(key(replayedMax)) {
		t.Fatalf("after forgetting it: %d counted; want 0", n)
	}
}
