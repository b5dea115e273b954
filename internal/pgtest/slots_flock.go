//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The budget is a folder of slot files, slot-000 … slot-<Budget-1>, one
// per connection, and a gate file. A connection of the budget is an
// exclusive flock on a slot file; the gate's flock is the queue: its holder
// alone takes slots, the ones free at once and then, as they are freed, the
// rest, so a test that needs many connections is not overtaken forever by
// tests that need few. Slots are freed by closing their files, which needs
// no gate; the kernel frees those of a process that dies.

// acquireSlots takes n of the budget slots in dir and returns what gives
// them back. It waits as long as it takes, saying so in t's log after a
// while.
func acquireSlots(t testing.TB, dir string, budget, n int) (release func(), err error) {
	gate, err := os.OpenFile(filepath.Join(dir, "gate"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	defer gate.Close() // and with it the gate's flock

	start := time.Now()
	tell := time.AfterFunc(10*time.Second, func() {
		t.Logf("pgtest: waiting for %d connections of the budget of %d (%s; slots in %s): other tests hold them", n, budget, BudgetEnv, dir)
	})
	defer tell.Stop()
	if err := flock(gate, syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock %s: %w", gate.Name(), err)
	}

	held := make(map[int]*os.File, n)
	release = func() {
		for _, f := range held {
			f.Close()
		}
	}
	for len(held) < n {
		busy := -1
		for i := 0; i < budget && len(held) < n; i++ {
			if held[i] != nil {
				continue
			}
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot-%03d", i)), os.O_RDWR|os.O_CREATE, 0o666)
			if err != nil {
				release()
				return nil, err
			}
			switch err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err {
			case nil:
				held[i] = f
			case syscall.EWOULDBLOCK:
				f.Close()
				if busy < 0 {
					busy = i
				}
			default:
				f.Close()
				release()
				return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
			}
		}
		if len(held) == n {
			break
		}
		// Wait for the first busy slot to be freed.
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot-%03d", busy)), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			release()
			return nil, err
		}
		if err := flock(f, syscall.LOCK_EX); err != nil {
			f.Close()
			release()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		held[busy] = f
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Logf("pgtest: got %d connections of the budget after %s", n, waited.Round(time.Millisecond))
	}
	return release, nil
}

// flock is syscall.Flock, again after an interrupted wait.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// slotDir returns the budget's folder for the test server, creating it.
func slotDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "oke-pgtest-budget-"+serverKey())
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", err
	}
	os.Chmod(dir, 0o777) // for every user's tests on the machine (best effort)
	return dir, nil
}

// lockedSlots counts the slots in dir (of budget) that are held, by this
// process or another: for the tests.
func lockedSlots(dir string, budget int) (int, error) {
	n := 0
	for i := range budget {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot-%03d", i)), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			return 0, err
		}
		switch err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err {
		case nil:
		case syscall.EWOULDBLOCK:
			n++
		default:
			f.Close()
			return 0, err
		}
		f.Close()
	}
	return n, nil
}
