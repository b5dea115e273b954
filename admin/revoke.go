package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/okengine/oke/driver"
)

// LogoutFlow is the flow name of the idempotency rows in which Handler
// records console logouts in the app's store (tenant "_oke", principal
// "admin", the session id as the key): one completed row per logged-out
// session, living until the session would have expired, then swept like
// any expired row. No request of the app can claim under it (no flow has
// that name), and every instance that shares the store reads them.
const LogoutFlow = "oke.admin.logout"

// storeRevocations records logged-out sessions as idempotency rows in a
// store, so that every app instance sharing it refuses them.
type storeRevocations struct {
	d       driver.Driver
	timeout time.Duration // bounds each store call (the app's StoreTimeout)
}

// bound is ctx with s.timeout more to run n store calls.
func (s *storeRevocations) bound(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	return storeBound(ctx, s.timeout, n)
}

func logoutKey(id string) driver.Key {
	return driver.Key{Tenant: "_oke", Principal: "admin", Flow: LogoutFlow, Key: id}
}

// add records the logout of session id, which expires at exp.
func (s *storeRevocations) add(ctx context.Context, id string, exp, now time.Time) error {
	ttl := max(exp.Sub(now), time.Second) + time.Minute // the session check's slack
	var o [12]byte
	rand.Read(o[:])
	owner := "logout-" + hex.EncodeToString(o[:])
	k := logoutKey(id)
	ctx, cancel := s.bound(ctx, 2)
	defer cancel()
	res, err := s.d.Claim(ctx, driver.ClaimRequest{Key: k, Fingerprint: "logout", Owner: owner, Lease: time.Minute, TTL: ttl})
	if err != nil || !res.Claimed {
		return err // not claimed: the row is there already (logged out before)
	}
	// A row that stays Running (Complete failed) still counts: it is there.
	return s.d.Complete(ctx, k, owner, driver.Response{Status: 204}, ttl)
}

// has reports whether session id logged out, on any instance.
func (s *storeRevocations) has(ctx context.Context, id string) (bool, error) {
	ctx, cancel := s.bound(ctx, 1)
	defer cancel()
	_, err := s.d.Get(ctx, logoutKey(id))
	if errors.Is(err, driver.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
