//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package file

import (
	"path/filepath"
	"sync"
)

// Without flock, the lock only keeps a second Driver in this process off the
// folder; another process is not stopped. See the package doc.
var (
	lockedMu sync.Mutex
	locked   = map[string]bool{}
)

func lockDir(dir string) (unlock func() error, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	lockedMu.Lock()
	defer lockedMu.Unlock()
	if locked[abs] {
		return nil, &LockedError{Dir: dir}
	}
	locked[abs] = true
	return func() error {
		lockedMu.Lock()
		delete(locked, abs)
		lockedMu.Unlock()
		return nil
	}, nil
}

// lockShared fails if a Driver of this process has dir open.
func lockShared(dir string) (unlock func() error, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	lockedMu.Lock()
	defer lockedMu.Unlock()
	if locked[abs] {
		return nil, &LockedError{Dir: dir}
	}
	return func() error { return nil }, nil
}

// syncDir is a no-op where folders cannot be fsynced (Windows).
func syncDir(string) error { return nil }
