package file

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/driver"
)

// logFile is one append-only log in the folder (idempotency.json or
// journal.json): the open file, where the next record goes, and its group
// commit. Both logs share this machinery: the line format (log.go), the
// crash-safe append, the replay that checks the log against CHECKPOINT and
// repairs a torn tail, group commit (commit.go), the compaction swap, and
// the recovery after a failed write or fsync (heal).
//
// The mutex of the log's owner (Driver.mu for the rows, journal.mu for the
// runs) guards every field but fault, tail, file and commit, which the group
// commit leader uses without it.
type logFile struct {
	dir, path, name string
	ck              *checkpoint // the folder's CHECKPOINT
	ckIdx           int         // this log's entry in it
	hooks           *hooks      // fault injection (tests); nil in production
	backoff         func(elapsed time.Duration) time.Duration
	ro              bool // opened by OpenReadOnly: never written
	missing         bool // read-only, and the file does not exist

	f           *os.File // swapped only while commit is paused
	size        int64    // bytes of intact records in f; the next record goes here
	records     int      // records in f, live and dead
	seq         uint64   // sequence number of the last write
	gen, prev   string   // f's generation, and the one it was compacted from (its format record)
	chained     bool     // f's records are chained (format version 2; see log.go)
	last        uint32   // checksum of f's last record: what the next one is chained after
	retryAt     int      // after a failed compaction, records count to try again at
	compactions int
	heals       int       // repairs after a failed write or fsync
	healAt      time.Time // after a failed repair, when to try again
	buf         []byte    // encode buffer kept between writes

	// format returns the line of the log's format record; rebuild rewrites
	// the log from memory (the owner's compaction). Set by the owner.
	format  func(gen, prev string) []byte
	rebuild func() error

	// fault, when set, is why the log takes no write until it is healed.
	fault atomic.Pointer[faultErr]

	tailMu sync.Mutex
	tail   mark // the last write, for the commit leader

	file   atomic.Pointer[os.File] // = f
	commit committer
}

// mark is the end of the log after a write: what an fsync started after it
// makes durable, and what the checkpoint then records.
type mark struct {
	seq     uint64
	size    int64
	records int
	gen     string
}

// faultErr is why a log refuses writes until it is healed.
type faultErr struct {
	err error // what callers get; it is driver.ErrUnavailable
	// rewrite: an fsync failed (of the log, or of the folder after a
	// rename), so what the file's pages hold may not be what is on disk and
	// no later fsync of it can be trusted. Only rewriting the log from memory
	// into a new file heals it. Otherwise a write failed and taking it back
	// (truncate) failed too: truncating again heals it.
	rewrite bool
}

// initLog sets up l for the file name in dir.
func (l *logFile) initLog(dir, name string, ckIdx int, ck *checkpoint, cfg *config) {
	l.dir, l.name, l.path = dir, name, filepath.Join(dir, name)
	l.ck, l.ckIdx, l.hooks, l.backoff = ck, ckIdx, cfg.hooks, cfg.healBackoff
	if l.backoff == nil {
		l.backoff = healBackoff
	}
	l.commit.cond.L = &l.commit.mu
}

// compactPath is where a compaction writes the new log before renaming it.
func (l *logFile) compactPath() string { return l.path + ".compact" }

// unavailable wraps an I/O error as driver.ErrUnavailable.
func (l *logFile) unavailable(what string, err error) error {
	return fmt.Errorf("oke file driver: %s %s: %w: %w", what, l.path, driver.ErrUnavailable, err)
}

// setFault records that the log needs healing. A fault that needs a rewrite
// is never replaced by one that needs less.
func (l *logFile) setFault(err error, rewrite bool) {
	fe := &faultErr{err: err, rewrite: rewrite}
	for {
		old := l.fault.Load()
		if old != nil && (old.rewrite || !rewrite) {
			return
		}
		if l.fault.CompareAndSwap(old, fe) {
			return
		}
	}
}

// heal repairs a log whose write or fsync failed, if it is time to try
// (force: now). It returns nil once the log takes writes again. The owner's
// mutex held.
func (l *logFile) heal(force bool) error {
	fe := l.fault.Load()
	if fe == nil {
		return nil
	}
	if !force && time.Now().Before(l.healAt) {
		return l.notHealed(fe, nil)
	}
	start := time.Now()
	if !fe.rewrite {
		// Take back what the failed write left after the last good
		// record, and make that durable before anything is appended.
		if err := l.truncate(l.size); err == nil && l.forceSync() == nil {
			l.fault.CompareAndSwap(fe, nil)
			l.heals++
			return nil
		}
	}
	// Rewrite every record from memory into a new file, fsync it, rename it
	// over the log: nothing of the old file's pages is trusted.
	if err := l.rebuild(); err != nil {
		l.healAt = time.Now().Add(l.backoff(time.Since(start)))
		if fe := l.fault.Load(); fe != nil {
			return l.notHealed(fe, err)
		}
		return err
	}
	l.heals++
	return nil
}

// notHealed is what a write gets while the log waits to be repaired. It is
// driver.ErrUnavailable, and wraps the failure that broke the log.
func (l *logFile) notHealed(fe *faultErr, repair error) error {
	last := ""
	if repair != nil {
		last = fmt.Sprintf(" (the last attempt: %v)", repair)
	}
	return fmt.Errorf("oke file driver: %s takes no writes since a write or fsync failed; the driver repairs it "+
		"at a later call once the disk works again%s (free space, check the disk and the file's permissions): %w",
		l.path, last, fe.err)
}

// truncate cuts f back to size, through the hooks.
func (l *logFile) truncate(size int64) error {
	if err := l.hooks.check(ioTruncate, l.name); err != nil {
		return err
	}
	return l.f.Truncate(size)
}

// load opens the log, replays it through apply, checks it against what
// CHECKPOINT says was fsynced (a *LossError if records are missing),
// truncates a torn tail, starts an empty log with a format record of a new
// generation, and fsyncs it. The caller fsyncs the folder. apply gets each
// intact record's payload and the size of its line. A leftover compaction
// file is deleted first. On error the file is closed.
//
// Read-only, it creates, truncates and writes nothing: a torn tail is only
// left out, and a missing log is an empty one (missing set).
func (l *logFile) load(apply func(payload []byte, size int) error) (err error) {
	want := l.ck.want(l.ckIdx)
	if !l.ro {
		if err := os.Remove(l.compactPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("oke file driver: remove unfinished compaction: %w", err)
		}
	}
	flag := os.O_RDWR
	if l.ro {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(l.path, flag, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err := l.checkLoss(want, false, scanned{}); err != nil {
			return err
		}
		if l.ro {
			l.missing = true
			return nil
		}
		f, err = os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err != nil {
		return fmt.Errorf("oke file driver: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
		}
	}()
	var at []int64
	if want != nil {
		at = []int64{want.cur.size, want.next.size}
	}
	sc, err := scanLog(f, l.path, apply, at, &l.chained)
	if err != nil {
		if _, ok := errors.AsType[*CorruptError](err); ok {
			return err
		}
		return fmt.Errorf("oke file driver: read %s: %w", l.path, err)
	}
	if err := l.checkLoss(want, true, sc); err != nil {
		return err
	}
	l.size, l.records, l.last = sc.size, sc.records, sc.last
	if l.ro {
		l.f = f
		return nil
	}
	if sc.torn {
		if err := f.Truncate(sc.size); err != nil {
			return fmt.Errorf("oke file driver: truncate torn tail of %s: %w", l.path, err)
		}
	}
	if sc.records == 0 {
		// New (or emptied, with nothing fsynced to lose) log: start it with
		// a format record of a new generation.
		gen := newGen()
		line := l.format(gen, "")
		if _, err := f.WriteAt(line, 0); err != nil {
			return fmt.Errorf("oke file driver: write %s: %w", l.path, err)
		}
		l.size, l.records, l.gen, l.prev = int64(len(line)), 1, gen, ""
		l.chained, l.last = true, lineCRC(line)
	}
	// What an earlier process wrote may still be only in the page cache;
	// make it durable before serving it (and before CHECKPOINT says so).
	if err := f.Sync(); err != nil {
		return fmt.Errorf("oke file driver: fsync %s: %w", l.path, err)
	}
	l.f = f
	l.file.Store(f)
	l.setTail()
	return nil
}

// state is the log as it is now, all of it fsynced (at Open).
func (l *logFile) state() logState { return logState{l.gen, l.size, l.records} }

// setTail publishes the end of the log to the commit leader. The owner's
// mutex held.
func (l *logFile) setTail() {
	l.tailMu.Lock()
	l.tail = mark{seq: l.seq, size: l.size, records: l.records, gen: l.gen}
	l.tailMu.Unlock()
}

func (l *logFile) loadTail() mark {
	l.tailMu.Lock()
	defer l.tailMu.Unlock()
	return l.tail
}

// checkLoss compares a log with what the checkpoint says was fsynced to it
// (want; nil when the folder has no checkpoint yet). exists: the file was
// there; sc: what its scan found.
func (l *logFile) checkLoss(want *ckEntry, exists bool, sc scanned) error {
	if want == nil || (want.cur.size == 0 && (!want.hasNext || want.next.size == 0)) {
		return nil // nothing was fsynced to it
	}
	st := want.cur
	loss := func(reason string) error {
		return &LossError{Path: l.path, Size: sc.size, Records: sc.records,
			SyncedSize: st.size, SyncedRecords: st.records, Reason: reason}
	}
	count := sc.countAt[0]
	switch {
	case !exists:
		return loss("the file is missing; it was deleted or moved")
	case sc.records == 0:
		// No format record: emptied, or cut inside its first line.
	case l.gen == want.cur.gen:
	case want.hasNext && l.gen == want.next.gen:
		// A compaction renamed it in, and a crash came before the
		// checkpoint learned that the rename was done.
		st, count = want.next, sc.countAt[1]
	case l.prev == want.cur.gen && l.gen != "":
		// Compacted from the generation the checkpoint names, which an OS
		// crash left older than the rename: nothing to check it against.
		return nil
	case l.gen == "":
		return loss(fmt.Sprintf("it is not the file that was fsynced: its format record has no generation (an older oke "+
			"rewrote it, or it was replaced by an older copy); the checkpoint names generation %s", st.gen))
	default:
		return loss(fmt.Sprintf("it is not the file that was fsynced: it is generation %s, the checkpoint names %s; "+
			"it was replaced (by a copy, a backup, or another folder's file)", l.gen, st.gen))
	}
	switch {
	case st.size == 0:
		return nil
	case sc.size < st.size && sc.end < st.size:
		return loss("the file was truncated or replaced")
	case sc.size < st.size:
		return loss(fmt.Sprintf("line %d (byte %d) is damaged, inside the part that was fsynced, so it is not a torn write "+
			"at the end", sc.badLine, sc.badOff))
	case count != st.records:
		return loss(fmt.Sprintf("its first %d bytes do not end a line after %d records; the file was replaced", st.size, st.records))
	}
	return nil
}

// appendLines writes buf, which holds n whole record lines chained after
// the checksum after (l.last when they were encoded), at the end of the log
// in one write(2) and returns the write's sequence number; last is the
// checksum of buf's last line. On error nothing was appended, and the error
// is driver.ErrUnavailable. The owner's mutex held.
func (l *logFile) appendLines(buf []byte, n int, after, last uint32) (uint64, error) {
	if l.ro {
		return 0, errReadOnlyWrite
	}
	if l.fault.Load() != nil {
		if err := l.heal(false); err != nil {
			return 0, err
		}
	}
	if l.last != after {
		// The heal rewrote the log: its last record is another line now.
		last = rechain(buf, l.last)
	}
	var err error
	if l.hooks == nil {
		_, err = l.f.WriteAt(buf, l.size)
	} else {
		_, err = l.hooks.writeAt(l.f, l.name, buf, l.size)
	}
	if err != nil {
		// Take back any part that reached the file, so the log never holds
		// a torn record followed by later ones, and make that durable. If
		// that fails the log takes no write until heal manages it.
		if terr := l.truncate(l.size); terr != nil {
			l.setFault(l.unavailable("take back a failed write to", errors.Join(err, terr)), false)
		} else {
			_ = l.forceSync() // a failure sets a fault that needs a rewrite
		}
		return 0, l.unavailable("append to", err)
	}
	l.size += int64(len(buf))
	l.records += n
	l.last = last
	l.seq++
	l.setTail()
	if cap(buf) <= maxKeptBuf {
		l.buf = buf[:0]
	} else {
		l.buf = nil
	}
	return l.seq, nil
}

// rewrite replaces the log with a new generation holding the records fill
// writes (fill calls add with each whole line, format — the new
// generation's format record — first, then lines chained from *chain, which
// starts as format's checksum and must end as the last line's): it writes them to the compaction
// file, fsyncs it, records the new generation in CHECKPOINT (fsynced), renames
// the file over the log, fsyncs the folder and records in CHECKPOINT that the
// new generation is the log. A crash at any point leaves the old log or the
// new one, each complete, and a checkpoint that accepts it. A successful
// rewrite also heals the log: everything written so far is durable in a file
// whose pages were all written and fsynced anew. The owner's mutex held, so
// nothing is written meanwhile.
func (l *logFile) rewrite(fill func(format []byte, chain *uint32, add func(line []byte) error) error) error {
	if l.ro {
		return errReadOnlyWrite
	}
	tmp := l.compactPath()
	tmpName := l.name + ".compact"
	if err := l.hooks.check(ioCreate, tmpName); err != nil {
		return l.unavailable("compact", err)
	}
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
	w := bufio.NewWriterSize(&hookedWriter{h: l.hooks, f: f, name: tmpName}, 1<<20)
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
	gen := newGen()
	format := l.format(gen, l.gen)
	last := lineCRC(format)
	if err := fill(format, &last, add); err != nil {
		return l.unavailable("compact", err)
	}
	if err := w.Flush(); err != nil {
		return l.unavailable("compact", err)
	}
	if err := l.hooks.sync(f, tmpName); err != nil {
		return l.unavailable("compact", err)
	}
	if err := l.ck.prepare(l.ckIdx, logState{gen, size, records}); err != nil {
		l.ck.dropNext(l.ckIdx)
		return l.unavailable("compact: record the new generation in "+checkpointName+" for", err)
	}

	// Swap files with no fsync in flight on the old one.
	l.commit.pause()
	err = l.hooks.check(ioRename, l.name)
	if err == nil {
		err = os.Rename(tmp, l.path)
	}
	if err != nil {
		l.ck.dropNext(l.ckIdx)
		l.commit.resume(0, nil, false)
		return l.unavailable("compact", err)
	}
	swapped = true
	old := l.f
	l.f, l.size, l.records, l.gen, l.prev = f, size, records, gen, l.gen
	l.chained, l.last = true, last
	l.file.Store(f)
	l.setTail()
	_ = old.Close()
	// The new log holds every write so far and is fsynced; once the rename
	// is durable, so is every write.
	err = l.hooks.check(ioSyncDir, ".")
	if err == nil {
		err = syncDir(l.dir)
	}
	if err != nil {
		// The checkpoint keeps accepting both generations; the log takes
		// no write until a rewrite succeeds.
		err = l.unavailable("fsync folder after compacting", err)
		l.setFault(err, true)
		l.commit.resume(0, err, false)
		return err
	}
	l.ck.commitNext(l.ckIdx)
	l.fault.Store(nil)
	l.commit.resume(l.seq, nil, true)
	l.compactions++
	l.retryAt = 0
	return nil
}

// closeLog fsyncs what is not yet durable in the log (a log whose write or
// fsync failed is healed first, if it can be; otherwise what was written
// since is not durable, and waiting callers get the fault), records it in
// the checkpoint and closes the file. The owner's mutex held.
func (l *logFile) closeLog() error {
	if l.f == nil {
		return nil
	}
	if l.ro {
		return l.f.Close()
	}
	var syncErr error
	if l.fault.Load() != nil {
		syncErr = l.heal(true)
	}
	l.commit.pause()
	if syncErr == nil && l.commit.durable() < l.seq {
		if err := l.hooks.sync(l.f, l.name); err != nil {
			syncErr = l.unavailable("fsync", err)
			l.ck.markSuspect(l.ckIdx)
		}
	}
	if syncErr == nil {
		l.ck.synced(l.ckIdx, l.loadTail())
	}
	l.commit.resume(l.seq, syncErr, false)
	return errors.Join(syncErr, l.f.Close())
}

// scanned is where a scan of a log ended.
type scanned struct {
	records int    // intact records, live and dead (the format record too)
	size    int64  // bytes of intact records; a torn tail starts here
	last    uint32 // checksum of the last intact record
	end     int64  // bytes in the file
	torn    bool   // bytes after size must be truncated
	// Where the torn tail starts: its first line (1-based) and offset.
	badLine int
	badOff  int64
	// countAt[i] is how many intact records end exactly at the offset
	// at[i] given to scanLog, or -1 if no intact record ends there.
	countAt [2]int
}

// scanLog reads a log and hands apply the payload of each intact record, with
// the size of its line. A damaged tail (lines after the last intact record
// that are damaged, and a last line without its newline) is reported in torn;
// a damaged line followed by an intact record, or a record apply refuses, is
// a *CorruptError. So is, once *chained is set (by apply, from the format
// record), an intact record that is not chained after the one before it: no
// torn write leaves that, only lines reordered, removed or duplicated. For
// each offset in at (at most two), it counts the intact records before it,
// if one ends there.
func scanLog(r io.Reader, path string, apply func(payload []byte, size int) error, at []int64, chained *bool) (scanned, error) {
	st := scanned{countAt: [2]int{-1, -1}}
	for i, a := range at {
		if a == 0 {
			st.countAt[i] = 0
		}
	}
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
			if bad == nil {
				bad = &CorruptError{Path: path, Line: lineNo, Offset: start, Reason: "no newline"}
			}
			break
		}
		payload, crc, perr := checkLine(line[:len(line)-1])
		if perr != nil {
			if bad == nil {
				bad = &CorruptError{Path: path, Line: lineNo, Offset: start, Reason: perr.Error()}
			}
			continue
		}
		if bad != nil {
			if *chained {
				bad.fix = fixChained
			}
			return st, bad
		}
		if *chained && st.records > 0 {
			p, after, ok := splitChain(payload)
			switch {
			case !ok:
				return st, &CorruptError{Path: path, Line: lineNo, Offset: start, fix: fixChained, Reason: "the record has no chain field, " +
					"which every record after the first of this log has (a line of another log, or of an older oke, was put here)"}
			case after != st.last:
				return st, &CorruptError{Path: path, Line: lineNo, Offset: start, fix: fixChained, Reason: fmt.Sprintf(
					"the record is out of place: it was written after the record with checksum %08x, but follows "+
						"the one with checksum %08x (line %d); lines were reordered, removed or duplicated", after, st.last, lineNo-1)}
			}
			payload = p
		}
		if err := apply(payload, len(line)); err != nil {
			ce := &CorruptError{Path: path, Line: lineNo, Offset: start, Reason: err.Error()}
			if *chained && st.records > 0 {
				ce.fix = fixChained
			}
			return st, ce
		}
		st.last = crc
		st.records++
		st.size = off
		for i, a := range at {
			if a == off {
				st.countAt[i] = st.records
			}
		}
	}
	st.end = off
	if bad != nil {
		st.torn = true
		st.badLine, st.badOff = bad.Line, bad.Offset
	}
	return st, nil
}
