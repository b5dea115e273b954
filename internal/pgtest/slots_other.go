//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package pgtest

import (
	"sync"
	"testing"
)

// Without flock the budget is this process's: a count under a lock.
var (
	slotMu   sync.Mutex
	slotFree = sync.NewCond(&slotMu)
	slotUsed int
)

// acquireSlots takes n of budget connections and returns what gives them
// back, waiting while fewer are free.
func acquireSlots(_ testing.TB, _ string, budget, n int) (release func(), err error) {
	slotMu.Lock()
	defer slotMu.Unlock()
	for slotUsed+n > budget {
		slotFree.Wait()
	}
	slotUsed += n
	return func() {
		slotMu.Lock()
		slotUsed -= n
		slotMu.Unlock()
		slotFree.Broadcast()
	}, nil
}

// slotDir is unused without flock.
func slotDir() (string, error) { return "", nil }
