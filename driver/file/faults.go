package file

import (
	"errors"
	"os"
	"time"
)

// ioOp names one kind of I/O call the driver makes on a file of its
// folder, so that tests can fail it (see hooks).
type ioOp uint8

const (
	ioWrite    ioOp = iota + 1 // write(2) to a log, a compaction file or CHECKPOINT
	ioSync                     // fsync(2) of a file
	ioTruncate                 // ftruncate(2) of a log
	ioCreate                   // creating a compaction file or CHECKPOINT.tmp
	ioRename                   // renaming one over a log or CHECKPOINT
	ioSyncDir                  // fsync(2) of the folder
)

func (o ioOp) String() string {
	switch o {
	case ioWrite:
		return "write"
	case ioSync:
		return "fsync"
	case ioTruncate:
		return "truncate"
	case ioCreate:
		return "create"
	case ioRename:
		return "rename"
	case ioSyncDir:
		return "fsync folder"
	}
	return "?"
}

// hooks lets tests fail the driver's I/O calls without a real broken disk.
// Before each call on a file of the folder (name is the file's base name,
// "." for the folder), fail is asked; an error makes the call fail with it,
// as the OS would (wrapped in an *os.PathError, so errors.Is finds an
// injected syscall.ENOSPC). A *partialWrite from a write first writes part
// of the bytes. A nil *hooks, as in production, costs one nil check.
type hooks struct {
	fail func(op ioOp, name string) error
}

// partialWrite, returned by hooks.fail for a write, writes the first n bytes
// and then fails with err: what a full disk does to a write(2) that spans
// the last free block.
type partialWrite struct {
	n   int
	err error
}

func (p *partialWrite) Error() string { return p.err.Error() }
func (p *partialWrite) Unwrap() error { return p.err }

// check asks the hook about op on name.
func (h *hooks) check(op ioOp, name string) error {
	if h == nil || h.fail == nil {
		return nil
	}
	if err := h.fail(op, name); err != nil {
		return &os.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

// writeAt is f.WriteAt through the hook.
func (h *hooks) writeAt(f *os.File, name string, b []byte, off int64) (int, error) {
	if err := h.check(ioWrite, name); err != nil {
		n := 0
		if pw, ok := errors.AsType[*partialWrite](err); ok {
			n, _ = f.WriteAt(b[:min(max(pw.n, 0), len(b))], off)
		}
		return n, err
	}
	return f.WriteAt(b, off)
}

// sync is f.Sync through the hook.
func (h *hooks) sync(f *os.File, name string) error {
	if err := h.check(ioSync, name); err != nil {
		return err
	}
	return f.Sync()
}

// hookedWriter is an io.Writer on f through the hook (a compaction's
// buffered writes).
type hookedWriter struct {
	h    *hooks
	f    *os.File
	name string
	off  int64
}

func (w *hookedWriter) Write(b []byte) (int, error) {
	n, err := w.h.writeAt(w.f, w.name, b, w.off)
	w.off += int64(n)
	return n, err
}

// healBackoff is how long a log whose write or fsync failed waits, after a
// repair attempt failed (it took elapsed), before it tries again: ten times
// the attempt, so that repairs take at most a tenth of the time while the
// disk stays broken, and between 10ms and 5s.
func healBackoff(elapsed time.Duration) time.Duration {
	return min(max(10*elapsed, 10*time.Millisecond), 5*time.Second)
}
