// Package lease keeps a lease alive: it renews it every third of its length
// until stopped, and says when another owner took it. Idempotency claims and
// journal runs both hold one.
package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/okengine/oke/driver"
)

// Keeper renews one lease in the background. It starts no goroutine of its
// own between renewals (a timer fires each one).
type Keeper struct {
	lease  time.Duration
	renew  func(ctx context.Context, lease time.Duration) error
	onLost func()
	onErr  func(error)

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// Keep starts renewing: renew is called every lease/3 with the lease to set.
// When renew returns driver.ErrNotOwner, renewal ends and onLost is called;
// any other error is passed to onErr (either may be nil) and renewal goes on.
func Keep(lease time.Duration, renew func(ctx context.Context, lease time.Duration) error, onLost func(), onErr func(error)) *Keeper {
	k := &Keeper{lease: lease, renew: renew, onLost: onLost, onErr: onErr}
	k.arm()
	return k
}

func (k *Keeper) arm() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		k.timer = time.AfterFunc(k.lease/3, k.fire)
	}
}

func (k *Keeper) fire() {
	ctx, cancel := context.WithTimeout(context.Background(), k.lease/3)
	err := k.renew(ctx, k.lease)
	cancel()
	if k.Stopped() {
		return
	}
	if errors.Is(err, driver.ErrNotOwner) {
		if k.onLost != nil {
			k.onLost()
		}
		return
	}
	if err != nil && k.onErr != nil {
		k.onErr(err)
	}
	k.arm()
}

// Stop ends renewal. A renewal already under way may still complete.
func (k *Keeper) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	if k.timer != nil {
		k.timer.Stop()
	}
}

// Stopped reports whether Stop was called.
func (k *Keeper) Stopped() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopped
}
