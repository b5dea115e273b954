package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/driver"
)

// A retry of a completed request under a claim held in the flow's
// transaction (ClaimInTx) is refused by that claim: the flow's function
// starts, its transaction's first statement goes out behind the claim's
// lock, lookup and guard, the guard fails, and the stored response is
// answered. Correct, but a replay then costs a connection, a transaction the
// server aborts (and logs), and the key's advisory lock, which concurrent
// replays of one key contend for.
//
// So a keyed request whose key this process has answered from its stored
// response before is first answered from the key's row, read on its own
// (one statement, no lock, no transaction; Engine.Stored): the same
// replay, by the same rule, without starting the flow. Another payload
// under the key (422) is decided by that read too, and answered as before:
// the flow starts and its first effect is refused, no claim sent. Anything
// else — no row, one about to expire, one that changed — takes the
// ordinary path.
// Only keys already replayed here are read first, so a new key's request
// (the common case) never pays the extra read.

// replayedMax bounds the keys remembered; past it the set starts again.
const replayedMax = 4096

// storedMargin: a stored response this close to its expiry is left to the
// claim, which reads the expiry with the store's clock.
const storedMargin = time.Minute

// replayedKeys is the set of keys this process replayed through a claim
// held in the transaction. has runs for every such request, so it takes no
// lock: one atomic load while the set is empty, a sync.Map read otherwise.
// add and forget, which run only for replays, take mu to keep n exact.
type replayedKeys struct {
	n  atomic.Int64 // keys in m
	mu sync.Mutex
	m  sync.Map // driver.Key → struct{}
}

func (s *replayedKeys) has(k driver.Key) bool {
	if s.n.Load() == 0 {
		return false
	}
	_, ok := s.m.Load(k)
	return ok
}

func (s *replayedKeys) add(k driver.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, loaded := s.m.Load(k); loaded {
		return
	}
	if s.n.Load() >= replayedMax {
		s.m.Clear()
		s.n.Store(0)
	}
	s.m.Store(k, struct{}{})
	s.n.Add(1)
}

func (s *replayedKeys) forget(k driver.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, loaded := s.m.LoadAndDelete(k); loaded {
		s.n.Add(-1)
	}
}

// Held returns the claim of a keyed request of a flow whose claim is held
// in its transaction (Defer's), or, when the key was replayed here before
// (see above) and its row still holds its stored response, the decision
// that answers it from that row (answered true; took is the read's time).
// Another payload under a key replayed before gives a claim decided
// already (Decided): the flow starts and is refused at its first effect. A
// store error decides nothing: the ordinary path then meets it too, and
// answers for it.
func (e *Engine) Held(ctx context.Context, key driver.Key, fp string, ttl time.Duration) (d *Deferred, dec Decision, took time.Duration, answered bool) {
	if !e.replayed.has(key) {
		return e.Defer(ctx, key, fp, ttl), Decision{}, 0, false
	}
	start := time.Now()
	dec, ok, err := e.Stored(ctx, key, fp, storedMargin)
	took = time.Since(start)
	switch {
	case err != nil || !ok:
		e.replayed.forget(key)
		return e.Defer(ctx, key, fp, ttl), Decision{}, 0, false
	case dec.Outcome != Replay: // another payload: the flow starts, refused at its first effect
		return e.Decided(ctx, key, fp, ttl, dec, took), Decision{}, 0, false
	}
	return nil, dec, took, true
}

// NoteHeld remembers key when a claim held in the transaction decided dec
// for it (err nil): a Replay makes its next request read the row first
// (Held).
func (e *Engine) NoteHeld(key driver.Key, dec Decision, err error) {
	if err == nil && dec.Outcome == Replay {
		e.replayed.add(key)
	}
}
