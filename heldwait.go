package oke

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/okengine/oke/internal/idem"
)

// awaitHeld is await (Prefer: wait) for a request whose key another
// transaction holds (serveDeferred: a claim held in the transaction). Such
// a holder writes no row until it commits, and a wait reads rows: a holder
// that loses the key with its lease — its session ended by the server
// after a lease without a statement (driver/postgres heldclaim.go) —
// leaves none to read, and the wait would end in a 409 though the key has
// been free for a while. So a wait longer than the lease waits a lease at a
// time, and then the request claims again (again true; k's wait is then
// what is left of it): run anew, the same request is refused as before if
// the holder still holds the key, and runs if it lost it.
func (a *App) awaitHeld(f *flow, k keyed, dec idem.Decision, err error, w http.ResponseWriter) (idem.Decision, keyed, bool) {
	if k.asked == 0 {
		k.asked = k.wait
	}
	lease := a.cfg.Lease
	if err != nil || k.wait <= lease {
		dec = a.await(f, k, dec, err, w)
		a.preferenceApplied(k, w)
		return dec, k, false
	}
	slice := k
	slice.wait = lease
	start := time.Now()
	dec = a.await(f, slice, dec, err, w)
	a.preferenceApplied(k, w)
	if dec.Outcome != idem.InProgress || k.waitCtx.Err() != nil || a.closing.Load() {
		return dec, k, false
	}
	k.wait -= time.Since(start)
	return dec, k, k.wait > 0
}

// preferenceApplied says, when a wait was applied, the wait the client
// asked for (not the part of it a slice of awaitHeld waited).
func (a *App) preferenceApplied(k keyed, w http.ResponseWriter) {
	if w.Header().Get("Preference-Applied") != "" {
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(k.asked/time.Second)))
	}
}

// serveHeld serves a keyed request of a flow whose claim is held in its
// transaction: from the key's row, when this process replayed the key
// before (idem's replayed.go), else by running the flow with its claim
// deferred to its first statement (serveDeferred).
func (a *App) serveHeld(ctx context.Context, f *flow, in any, id Identity, k keyed, w http.ResponseWriter) {
	d, dec, took, answered := a.engine.Held(ctx, k.key, k.fp, k.ttl)
	if answered {
		observe(ctx, f.metrics.claim, took.Seconds())
		a.answerClaim(ctx, f, dec, nil, w)
		return
	}
	a.serveDeferred(ctx, f, in, id, k, d, w)
}
