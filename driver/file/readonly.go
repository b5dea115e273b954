package file

import (
	"errors"
	"fmt"
	"os"

	"github.com/okengine/oke/driver"
)

// ErrReadOnly is matched by the error every method that would write returns
// on a Driver opened with OpenReadOnly. That error is also
// driver.ErrUnavailable, so an app given such a driver by mistake fails
// closed (503) instead of running flows unprotected.
var ErrReadOnly = errors.New("oke file driver: read-only")

// ErrNoData is matched by the error OpenReadOnly returns for a folder that
// holds no oke data: it does not exist, or has neither log in it.
var ErrNoData = errors.New("oke file driver: no oke data in the folder")

// errReadOnlyWrite guards the logs' write paths (the methods check first,
// with a better message).
var errReadOnlyWrite = fmt.Errorf("oke file driver: write to a read-only log: %w (%w)", ErrReadOnly, driver.ErrUnavailable)

func readOnlyError(op, dir string) error {
	return fmt.Errorf("oke file driver: %s: %s was opened with OpenReadOnly, which never writes: %w (%w)",
		op, dir, ErrReadOnly, driver.ErrUnavailable)
}

type noDataError struct{ dir, why string }

func (e *noDataError) Error() string {
	why := e.why
	if why == "" {
		why = "no " + logName + " or " + journalName + " in it"
	}
	return fmt.Sprintf("oke file driver: no oke data in %s (%s); name the folder an app's file driver keeps "+
		"its data in (the app's -data folder, .oke by default)", e.dir, why)
}

func (e *noDataError) Is(target error) bool { return target == ErrNoData }

// OpenReadOnly opens the store in dir for reading only, for tools (a CLI
// listing runs or rows). It never creates, truncates or writes a file, and
// leaves the folder exactly as it found it:
//
//   - a folder that does not exist, or holds neither idempotency.json nor
//     journal.json, is an error matching ErrNoData that names it;
//   - while another process has the folder open (Open), it fails with
//     ErrLocked, as Open does: it takes a shared flock on the folder's LOCK
//     for as long as it is open (so an Open meanwhile gets ErrLocked), and,
//     if there is no LOCK file, goes on without one;
//   - the logs are checked against CHECKPOINT as Open checks them (a
//     *LossError or *CorruptError for a damaged folder); a torn tail is left
//     out in memory, not truncated; an older oke's logs are read as they are;
//   - every method that would write (Claim, Renew, Complete, Release,
//     Sweep, Compact, and the journal's CreateRun, AcquireRun, RenewRun,
//     SaveStep, FinishRun, ClaimKey) returns an error matching ErrReadOnly
//     (and driver.ErrUnavailable). Get, List, GetRun, ListRuns and DueRuns
//     work; what they show is what the logs held when it opened.
func OpenReadOnly(dir string) (*Driver, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, &noDataError{dir: dir, why: "the folder does not exist"}
	case err != nil:
		return nil, fmt.Errorf("oke file driver: open %s read-only: %w", dir, err)
	case !fi.IsDir():
		return nil, &noDataError{dir: dir, why: "it is not a folder"}
	}
	unlock, err := lockShared(dir)
	if err != nil {
		return nil, err
	}
	d, err := openLocked(dir, config{compactMin: 10_000}, unlock, true)
	if err != nil {
		_ = unlock()
		return nil, err
	}
	return d, nil
}
