package file

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// ErrLocked is matched by the error Open returns when another process (or
// another open Driver in this process) is using the folder.
var ErrLocked = errors.New("oke file driver: folder is in use by another process")

// LockedError is the error Open returns when the folder is locked. It is
// ErrLocked.
type LockedError struct {
	Dir string // the folder
	PID string // the process id written in the lock file, if known
}

func (e *LockedError) Error() string {
	holder := "another process"
	switch e.PID {
	case "":
	case strconv.Itoa(os.Getpid()):
		holder = "this same process (pid " + e.PID + "; close the Driver that opened it first)"
	default:
		holder = "another process (pid " + e.PID + ")"
	}
	dir := e.Dir
	if abs, err := filepath.Abs(dir); err == nil && abs != dir {
		dir += " (" + abs + ")"
	}
	return fmt.Sprintf("oke file driver: folder %s is in use by %s, which holds %s. "+
		"Only one process can use a file store at a time: stop the other one (for example a second "+
		"copy of this app, or `oke serve`, started with the same data folder), or give this one a different "+
		"folder. To run several instances on one store, use the Postgres driver",
		dir, holder, filepath.Join(e.Dir, lockName))
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }
