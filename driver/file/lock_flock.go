//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package file

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockWait is how long Open retries a busy lock before it reports ErrLocked.
const lockWait = 500 * time.Millisecond

// lockDir takes an exclusive flock on dir/LOCK. The kernel releases it when
// the returned func closes the file, or when the process dies.
func lockDir(dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("oke file driver: open lock file: %w", err)
	}
	if err := flockWait(f, syscall.LOCK_EX); err != nil {
		defer f.Close()
		return nil, lockError(dir, path, err)
	}
	// For people and for LockedError: who holds it. Best effort.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil
}

// lockShared takes a shared flock on dir/LOCK, for OpenReadOnly: it fails
// with a *LockedError while a driver has the folder open, and keeps Open out
// until the returned func closes the file. A folder without a LOCK file is
// not locked (and the file is not created).
func lockShared(dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return func() error { return nil }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oke file driver: open lock file: %w", err)
	}
	if err := flockWait(f, syscall.LOCK_SH); err != nil {
		defer f.Close()
		return nil, lockError(dir, path, err)
	}
	return f.Close, nil
}

// flockWait takes a flock of kind how (LOCK_EX, LOCK_SH) on f without
// blocking. A child process being started (between fork and exec) holds a
// copy of every descriptor, and with it the flock of a Driver closed a
// moment ago. So a lock that is busy is tried again for a short while.
func flockWait(f *os.File, how int) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == syscall.EINTR {
			continue
		}
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockError is a *LockedError for a lock that is busy, else err explained.
func lockError(dir, path string, err error) error {
	if errors.Is(err, syscall.EWOULDBLOCK) {
		pid, _ := os.ReadFile(path)
		return &LockedError{Dir: dir, PID: strings.TrimSpace(string(pid))}
	}
	return fmt.Errorf("oke file driver: lock %s: %w", path, err)
}

// syncDir fsyncs a folder, making renames and creations in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
