package file

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// CHECKPOINT records, for each log, how much of it was fsynced, so that Open
// can tell a log that lost acknowledged records (truncated, emptied,
// deleted, replaced, damaged inside its fsynced part) from one whose tail
// was torn by a crash. See the package doc ("Damage") for the rules.
//
// The file is two slots of ckSlot bytes. Each slot is one line in the logs'
// frame (a CRC-32C, then the payload), padded with spaces to its size:
//
//	{"crc":"…","rec":{"v":1,"seq":7,"logs":{"idempotency.json":{"gen":"…","size":4096,"records":41},"journal.json":{…}}}}
//
// A write goes to the slot the other one is not in (by seq), and Open reads
// the intact slot with the higher seq: a write torn by an OS crash leaves the
// other slot, an older checkpoint, which is a weaker check but never a
// false alarm. Slots are written with pwrite and, on the hot path, not
// fsynced.
const (
	checkpointName = "CHECKPOINT"
	ckSlot         = 512
	ckVersion      = 1
	genLen         = 16 // hex digits of a generation id
)

// ckNames are the logs a checkpoint describes, by their index in it.
var ckNames = [2]string{logName, journalName}

// logState is how far one generation of a log was fsynced.
type logState struct {
	gen     string
	size    int64 // bytes, a line boundary
	records int   // records in those bytes, the format record included
}

// ckEntry is what a checkpoint says of one log.
type ckEntry struct {
	cur logState
	// next is the generation a compaction is about to rename over the log
	// (written and fsynced before the rename): after a crash the log may be
	// either.
	next    logState
	hasNext bool
	// suspect: an fsync of the log failed, so what its pages hold may not
	// be on disk. The next Open rewrites it.
	suspect bool
}

// checkpoint is the folder's CHECKPOINT. Its mutex is a leaf: it is taken
// by the logs' group commit leaders, by compactions and by Open and Close,
// none of which holds it while taking another lock.
type checkpoint struct {
	dir   string
	hooks *hooks
	found bool // the file existed at Open (the logs are checked against it)

	mu   sync.Mutex
	f    *os.File // nil until created, and in a read-only driver
	seq  uint64   // seq of the last slot written
	logs [2]ckEntry
	buf  []byte
	// failed counts slot writes that failed (a checkpoint is best effort
	// once the logs are fsynced: a failed one only makes the next Open's
	// check weaker).
	failed int
}

// newGen returns a new generation id.
func newGen() string {
	var b [genLen / 2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (c *checkpoint) path() string { return filepath.Join(c.dir, checkpointName) }

// want is what the checkpoint read at Open says of log i, or nil when the
// folder had none.
func (c *checkpoint) want(i int) *ckEntry {
	if c == nil || !c.found {
		return nil
	}
	e := c.logs[i]
	return &e
}

// readCheckpoint reads dir/CHECKPOINT. A folder without one gives a
// checkpoint with found false. A file with no intact slot is a
// *CorruptError. Unless readOnly, the file is kept open for writing, and a
// CHECKPOINT.tmp left by a crash is removed.
func readCheckpoint(dir string, h *hooks, readOnly bool) (*checkpoint, error) {
	c := &checkpoint{dir: dir, hooks: h}
	path := c.path()
	if !readOnly {
		if err := os.Remove(path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("oke file driver: remove unfinished %s: %w", checkpointName, err)
		}
	}
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oke file driver: open %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, 2*ckSlot+1))
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("oke file driver: read %s: %w", path, err)
	}
	if len(data) != 2*ckSlot {
		_ = f.Close()
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("it holds %d bytes, not the %d of a checkpoint", len(data), 2*ckSlot) + ckAdvice}
	}
	best := -1
	for i := range 2 {
		if seq, logs, ok := decodeSlot(data[i*ckSlot : (i+1)*ckSlot]); ok && (best < 0 || seq > c.seq) {
			best, c.seq, c.logs = i, seq, logs
		}
	}
	if best < 0 {
		_ = f.Close()
		return nil, &CorruptError{Path: path, Reason: "neither of its two slots holds an intact checkpoint" + ckAdvice}
	}
	c.found = true
	if readOnly {
		_ = f.Close()
	} else {
		c.f = f
	}
	return c, nil
}

const ckAdvice = ". It only records how much of idempotency.json and journal.json was fsynced: " +
	"delete it to open the logs as they are (without the check that they lost nothing)"

// decodeSlot reads one slot. ok is false for a slot that is not intact.
func decodeSlot(b []byte) (seq uint64, logs [2]ckEntry, ok bool) {
	line := bytes.TrimRight(b, " \n\x00")
	payload, _, err := checkLine(line)
	if err != nil {
		return 0, logs, false
	}
	type stateJSON struct {
		Gen     string `json:"gen"`
		Size    int64  `json:"size"`
		Records int    `json:"records"`
	}
	var v struct {
		V    int    `json:"v"`
		Seq  uint64 `json:"seq"`
		Logs map[string]struct {
			stateJSON
			Suspect bool       `json:"suspect"`
			Next    *stateJSON `json:"next"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(payload, &v); err != nil || v.V != ckVersion {
		return 0, logs, false
	}
	for i, name := range ckNames {
		l, found := v.Logs[name]
		if !found {
			continue
		}
		logs[i] = ckEntry{cur: logState{l.Gen, l.Size, l.Records}, suspect: l.Suspect}
		if l.Next != nil {
			logs[i].next, logs[i].hasNext = logState{l.Next.Gen, l.Next.Size, l.Next.Records}, true
		}
	}
	return v.Seq, logs, true
}

// encodeSlot appends the slot for seq and the current entries to dst.
func (c *checkpoint) encodeSlot(dst []byte, seq uint64) []byte {
	start := len(dst)
	b := beginLine(dst)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, ckVersion, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"logs":{`...)
	for i, name := range ckNames {
		if i > 0 {
			b = append(b, ',')
		}
		e := &c.logs[i]
		b = appendString(b, name)
		b = append(b, ':')
		b = appendState(b, &e.cur, false)
		if e.suspect {
			b = append(b, `,"suspect":true`...)
		}
		if e.hasNext {
			b = append(b, `,"next":`...)
			b = appendState(b, &e.next, true)
		}
		b = append(b, '}')
	}
	b = append(b, "}}"...)
	b = endLine(b, start, nil)
	b = b[:len(b)-1] // the newline goes at the end of the slot
	for len(b)-start < ckSlot-1 {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

func appendState(b []byte, s *logState, closed bool) []byte {
	b = append(b, `{"gen":`...)
	b = appendString(b, s.gen)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, s.size, 10)
	b = append(b, `,"records":`...)
	b = strconv.AppendInt(b, int64(s.records), 10)
	if closed {
		b = append(b, '}')
	}
	return b
}

// writeLocked writes the next slot, and fsyncs the file if sync. mu held.
// A failed write does not advance seq, so the next write goes to the same
// slot and the intact one is kept.
func (c *checkpoint) writeLocked(sync bool) error {
	if c.f == nil {
		return nil
	}
	seq := c.seq + 1
	c.buf = c.encodeSlot(c.buf[:0], seq)
	if len(c.buf) != ckSlot {
		// Cannot happen: generations are genLen hex digits and numbers
		// at most 20; the slot has room for both logs with a next each.
		return fmt.Errorf("oke file driver: checkpoint slot of %d bytes", len(c.buf))
	}
	if _, err := c.hooks.writeAt(c.f, checkpointName, c.buf, int64(seq%2)*ckSlot); err != nil {
		c.failed++
		return err
	}
	c.seq = seq
	if sync {
		if err := c.hooks.sync(c.f, checkpointName); err != nil {
			c.failed++
			return err
		}
	}
	return nil
}

// synced records that log i is fsynced up to m (a group commit, Open,
// Close). Best effort: written, not fsynced; a failure is only counted.
func (c *checkpoint) synced(i int, m mark) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.logs[i]
	if e.cur.gen == m.gen && e.cur.size >= m.size {
		return // nothing new (a second fsync of the same bytes)
	}
	e.cur = logState{m.gen, m.size, m.records}
	_ = c.writeLocked(false)
}

// markSuspect records that an fsync of log i failed: the next Open rewrites
// it rather than trust its pages. Best effort.
func (c *checkpoint) markSuspect(i int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.logs[i].suspect {
		c.logs[i].suspect = true
		_ = c.writeLocked(false)
	}
}

// prepare records, durably, that a compaction is about to rename generation
// next over log i. Until it returns nil, the rename must not happen: after
// a crash the checkpoint must accept whichever of the two files is found.
func (c *checkpoint) prepare(i int, next logState) error {
	if c == nil || c.f == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs[i].next, c.logs[i].hasNext = next, true
	return c.writeLocked(true)
}

// dropNext forgets a prepared generation whose rename did not happen.
func (c *checkpoint) dropNext(i int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.logs[i].hasNext = false
	c.mu.Unlock()
}

// commitNext records that the prepared generation of log i is the log now,
// its rename durable, and that the log is no longer suspect. Best effort: if
// it is lost, the prepared state accepts the new log as well.
func (c *checkpoint) commitNext(i int) {
	if c == nil || c.f == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.logs[i]
	if e.hasNext {
		e.cur, e.hasNext = e.next, false
	}
	e.suspect = false
	_ = c.writeLocked(false)
}

// settle sets what Open found (each log fsynced whole, at the given
// state) and makes it durable: written and fsynced if the file exists,
// otherwise created whole (CHECKPOINT.tmp, fsync, rename, fsync folder), so
// that a CHECKPOINT that exists always holds an intact slot.
func (c *checkpoint) settle(states [2]logState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range states {
		c.logs[i] = ckEntry{cur: s}
	}
	if c.f != nil {
		return c.writeLocked(true)
	}
	tmp := c.path() + ".tmp"
	if err := c.hooks.check(ioCreate, checkpointName+".tmp"); err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	c.f = f
	ok := false
	defer func() {
		if !ok {
			c.f = nil
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	// Both slots, so the file has its full size from the start.
	if err := c.writeLocked(false); err != nil {
		return err
	}
	if err := c.writeLocked(true); err != nil {
		return err
	}
	if err := c.hooks.check(ioRename, checkpointName); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.path()); err != nil {
		return err
	}
	ok = true
	if err := c.hooks.check(ioSyncDir, "."); err != nil {
		return err
	}
	return syncDir(c.dir)
}

func (c *checkpoint) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}

// ErrCorrupt's second kind: a log that lost what it had fsynced.

// LossError is the error Open returns for a log that no longer holds
// records that were fsynced to it, which CHECKPOINT says it held: the file
// was truncated, emptied, deleted, replaced by another file, or damaged
// inside its fsynced part. Those records were acknowledged (a stored
// response, a saved step), so the driver will not go on without them. It is
// ErrCorrupt.
type LossError struct {
	Path          string // the log
	Size          int64  // bytes of intact records the file holds (0 if it is missing)
	Records       int    // intact records in them
	SyncedSize    int64  // bytes that CHECKPOINT says were fsynced
	SyncedRecords int    // records in them
	Reason        string // what happened to the file
}

func (e *LossError) Error() string {
	ck := filepath.Join(filepath.Dir(e.Path), checkpointName)
	return fmt.Sprintf("oke file driver: %s holds %d bytes / %d records, but %d bytes / %d records were fsynced: %s. "+
		"Acknowledged records (stored responses, saved steps) are gone, so the driver refuses the folder. "+
		"Restore the folder from a backup, or move it away to start empty (every stored response and run is then forgotten); "+
		"to go on with the file as it is now, accepting the loss, delete %s",
		e.Path, e.Size, e.Records, e.SyncedSize, e.SyncedRecords, e.Reason, ck)
}

// Is reports whether target is ErrCorrupt.
func (e *LossError) Is(target error) bool { return target == ErrCorrupt }
