package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestKeeperRenewsUntilStopped(t *testing.T) {
	var n atomic.Int64
	var got atomic.Int64
	k := Keep(testPool(t), 30*time.Millisecond, func(ctx context.Context, d time.Duration) error {
		got.Store(int64(d))
		n.Add(1)
		return nil
	}, nil, nil)
	eventually(t, "two renewals", func() bool { return n.Load() >= 2 })
	if time.Duration(got.Load()) != 30*time.Millisecond {
		t.Fatalf("renewed with %v, want the lease", time.Duration(got.Load()))
	}
	k.Stop()
	before := n.Load()
	time.Sleep(100 * time.Millisecond)
	if after := n.Load(); after > before+1 { // at most one renewal already under way
		t.Fatalf("renewals went on after Stop: %d → %d", before, after)
	}
}

func TestKeeperStopsWhenTheLeaseIsLost(t *testing.T) {
	var n, lost, errs atomic.Int64
	Keep(testPool(t), 30*time.Millisecond, func(ctx context.Context, d time.Duration) error {
		switch n.Add(1) {
		case 1:
			return errors.New("store hiccup") // reported, renewal goes on
		default:
			return driver.ErrNotOwner
		}
	}, func() { lost.Add(1) }, func(error) { errs.Add(1) })
	eventually(t, "the loss", func() bool { return lost.Load() == 1 })
	time.Sleep(100 * time.Millisecond)
	if n.Load() != 2 || errs.Load() != 1 || lost.Load() != 1 {
		t.Fatalf("renewals %d, errors %d, losses %d; want 2, 1, 1", n.Load(), errs.Load(), lost.Load())
	}
}

func TestLeaseStoppedEarlyIsNeverRenewed(t *testing.T) {
	var n atomic.Int64
	k := Keep(testPool(t), 300*time.Millisecond, func(ctx context.Context, d time.Duration) error {
		n.Add(1)
		return nil
	}, nil, nil)
	k.Stop()
	time.Sleep(400 * time.Millisecond)
	if n.Load() != 0 {
		t.Fatalf("a lease stopped at once was renewed %d times", n.Load())
	}
}

func TestLeasesOfOneLengthAreEachRenewed(t *testing.T) {
	const leases = 50
	var counts [leases]atomic.Int64
	keepers := make([]*Keeper, leases)
	for i := range keepers {
		keepers[i] = Keep(testPool(t), 30*time.Millisecond, func(ctx context.Context, d time.Duration) error {
			counts[i].Add(1)
			return nil
		}, nil, nil)
	}
	// Stopping some leaves the others renewed.
	for i := 0; i < leases; i += 2 {
		keepers[i].Stop()
	}
	stopped := make([]int64, leases)
	for i := 0; i < leases; i += 2 {
		stopped[i] = counts[i].Load()
	}
	eventually(t, "two renewals of each lease still held", func() bool {
		for i := 1; i < leases; i += 2 {
			if counts[i].Load() < 2 {
				return false
			}
		}
		return true
	})
	for i := 0; i < leases; i += 2 {
		if got := counts[i].Load(); got > stopped[i]+1 { // at most one renewal already under way
			t.Errorf("lease %d: renewals went on after Stop: %d → %d", i, stopped[i], got)
		}
	}
	for i := 1; i < leases; i += 2 {
		keepers[i].Stop()
	}
}
