package file

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/okengine/oke/driver"
)

// logFile is one append-only log in the folder (idempotency.json or
// journal.json): the open file, where the next record goes, and its group
// commit. Both logs share this machinery: the line format (log.go), the
// crash-safe append, the replay that repairs a torn tail, group commit
// (commit.go), and the compaction swap.
//
// The mutex of the log's owner (Driver.mu for the rows, journal.mu for the
// runs) guards every field but written, file and commit, which the group
// commit leader reads without it.
type logFile struct {
	dir, path   string
	f           *os.File // swapped only while commit is paused
	size        int64    // bytes of intact records in f; the next record goes here
	records     int      // records in f, live and dead
	seq         uint64   // sequence number of the last write
	retryAt     int      // after a failed compaction, records count to try again at
	compactions int
	buf         []byte // encode buffer kept between writes

	written atomic.Uint64           // = seq
	file    atomic.Pointer[os.File] // = f
	stop    *atomic.Pointer[faultErr]
	commit  committer
}

// initLog sets up l for the file name in dir; a failure in it stops the
// driver through stop.
func (l *logFile) initLog(dir, name string, stop *atomic.Pointer[faultErr]) {
	l.dir, l.path, l.stop = dir, filepath.Join(dir, name), stop
	l.commit.cond.L = &l.commit.mu
}

// compactPath is where a compaction writes the new log before renaming it.
func (l *logFile) compactPath() string { return l.path + ".compact" }

// fail stops the driver: every later call returns err.
func (l *logFile) fail(err error) {
	l.stop.CompareAndSwap(nil, &faultErr{err})
}

// unavailable wraps an I/O error as driver.ErrUnavailable.
func (l *logFile) unavailable(what string, err error) error {
	return fmt.Errorf("oke file driver: %s %s: %w: %w", what, l.path, driver.ErrUnavailable, err)
}

// load opens the log (creating it), replays it through apply, truncates a
// torn tail, starts an empty log with formatLine, and fsyncs it. The caller
// fsyncs the folder.
// apply gets each intact record's payload and the size of its line. A
// leftover compaction file is deleted first. On error the file is closed.
func (l *logFile) load(formatLine []byte, apply func(payload []byte, size int) error) (err error) {
	if err := os.Remove(l.compactPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("oke file driver: remove unfinished compaction: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("oke file driver: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
		}
	}()
	sc, err := scanLog(f, l.path, apply)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return err
		}
		return fmt.Errorf("oke file driver: read %s: %w", l.path, err)
	}
	l.size, l.records = sc.size, sc.records
	if sc.torn {
		if err := f.Truncate(sc.size); err != nil {
			return fmt.Errorf("oke file driver: truncate torn tail of %s: %w", l.path, err)
		}
	}
	if sc.records == 0 {
		// New (or emptied) log: start it with the format record. It need not
		// be fsynced now: the first durable write fsyncs it with that write,
		// and if an OS crash loses it first, the next Open finds an empty or
		// torn file and writes it again. (Open fsyncs the folder, which makes
		// the file's creation durable.)
		if _, err := f.WriteAt(formatLine, 0); err != nil {
			return fmt.Errorf("oke file driver: write %s: %w", l.path, err)
		}
		l.size, l.records = int64(len(formatLine)), 1
	} else if err := f.Sync(); err != nil {
		// What an earlier process wrote may still be only in the page cache;
		// make it durable before serving it.
		return fmt.Errorf("oke file driver: fsync %s: %w", l.path, err)
	}
	l.f = f
	l.file.Store(f)
	return nil
}

// appendLines writes buf, which holds n whole record lines, at the end of
// the log in one write(2) and returns the write's sequence number. On error
// nothing was appended (or the driver is stopped). The owner's mutex held.
func (l *logFile) appendLines(buf []byte, n int) (uint64, error) {
	if _, err := l.f.WriteAt(buf, l.size); err != nil {
		// Take back any part that reached the file, so the log never holds a
		// torn record followed by later ones.
		if terr := l.f.Truncate(l.size); terr != nil {
			l.fail(l.unavailable("truncate after failed write to", errors.Join(err, terr)))
		} else if serr := l.f.Sync(); serr != nil {
			l.fail(l.unavailable("fsync after failed write to", errors.Join(err, serr)))
		}
		return 0, l.unavailable("append to", err)
	}
	l.size += int64(len(buf))
	l.records += n
	l.seq++
	l.written.Store(l.seq)
	if cap(buf) <= maxKeptBuf {
		l.buf = buf[:0]
	} else {
		l.buf = nil
	}
	return l.seq, nil
}

// rewrite replaces the log with the records fill writes (fill calls add with
// each whole line, the format record first): it writes them to the
// compaction file, fsyncs it, renames it over the log and fsyncs the folder.
// A crash at any point leaves the old log or the new one, each complete. The
// owner's mutex held, so nothing is written meanwhile.
func (l *logFile) rewrite(fill func(add func(line []byte) error) error) error {
	tmp := l.compactPath()
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return l.unavailable("compact", err)
	}
	swapped := false
	defer func() {
		if !swapped {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var (
		size    int64
		records int
	)
	add := func(line []byte) error {
		n, err := w.Write(line)
		size += int64(n)
		records++
		return err
	}
	if err := fill(add); err != nil {
		return l.unavailable("compact", err)
	}
	if err := w.Flush(); err != nil {
		return l.unavailable("compact", err)
	}
	if err := f.Sync(); err != nil {
		return l.unavailable("compact", err)
	}

	// Swap files with no fsync in flight on the old one.
	l.commit.pause()
	if err := os.Rename(tmp, l.path); err != nil {
		l.commit.resume(0, nil)
		return l.unavailable("compact", err)
	}
	swapped = true
	old := l.f
	l.f, l.size, l.records = f, size, records
	l.file.Store(f)
	_ = old.Close()
	// The new log holds every write so far and is fsynced; once the rename
	// is durable, so is every write.
	if err := syncDir(l.dir); err != nil {
		err = l.unavailable("fsync folder after compacting", err)
		l.fail(err)
		l.commit.resume(0, err)
		return err
	}
	l.commit.resume(l.seq, nil)
	l.compactions++
	l.retryAt = 0
	return nil
}

// closeLog fsyncs what is not yet durable in the log (unless the driver is
// stopped: what was written since is not durable, and waiting callers get
// the fault) and closes it. The
// owner's mutex held.
func (l *logFile) closeLog() error {
	l.commit.pause()
	var syncErr error
	if fe := l.stop.Load(); fe != nil {
		syncErr = fe.err
	} else if l.commit.durable() < l.seq {
		if err := l.f.Sync(); err != nil {
			syncErr = l.unavailable("fsync", err)
		}
	}
	l.commit.resume(l.seq, syncErr)
	return errors.Join(syncErr, l.f.Close())
}

// scanned is where a scan of a log ended.
type scanned struct {
	records int   // intact records, live and dead (the format record too)
	size    int64 // bytes of intact records; a torn tail starts here
	torn    bool  // bytes after size must be truncated
}

// scanLog reads a log and hands apply the payload of each intact record, with
// the size of its line. A damaged tail (lines after the last intact record
// that are damaged, and a last line without its newline) is reported in torn;
// a damaged line followed by an intact record, or a record apply refuses, is
// a *CorruptError.
func scanLog(r io.Reader, path string, apply func(payload []byte, size int) error) (scanned, error) {
	var st scanned
	br := bufio.NewReaderSize(r, 1<<20)
	var (
		off    int64 // offset of the current line
		lineNo int
		bad    *CorruptError // first damaged line not (yet) followed by an intact one
	)
	for {
		line, err := readLine(br)
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return st, err
		}
		lineNo++
		start := off
		off += int64(len(line))
		if err == io.EOF { // no newline: an unfinished write
			st.torn = true
			break
		}
		payload, perr := checkLine(line[:len(line)-1])
		if perr != nil {
			if bad == nil {
				bad = &CorruptError{Path: path, Line: lineNo, Offset: start, Reason: perr.Error()}
			}
			continue
		}
		if bad != nil {
			return st, bad
		}
		if err := apply(payload, len(line)); err != nil {
			return st, &CorruptError{Path: path, Line: lineNo, Offset: start, Reason: err.Error()}
		}
		st.records++
		st.size = off
	}
	if bad != nil {
		st.torn = true
	}
	return st, nil
}
