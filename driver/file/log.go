package file

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"time"

	"github.com/okengine/oke/driver"
)

// formatVersion is the version written in the format record. Version 2
// chains its records (see endLine); version 1, an older oke's, is read as
// well, and a writable Open rewrites it as version 2 once.
const formatVersion = 2

// readsVersion reports whether this oke reads a log of format version v.
func readsVersion(v int) bool { return v == 1 || v == formatVersion }

// Record ops.
const (
	opFormat = "format"
	opPut    = "put"
	opDel    = "del"
)

// Every line is linePrefix, 8 hex digits of the CRC, lineMid, the payload,
// lineSuffix.
const (
	linePrefix = `{"crc":"`
	lineMid    = `","rec":`
	lineSuffix = "}\n"
	headerLen  = len(linePrefix) + 8 + len(lineMid)
)

// In a chained log (version 2), every line after the format record ends
// with chainField, the 8 hex digits of the checksum of the line before it,
// and a quote, inside what its own checksum covers:
//
//	{"crc":"<crc>","rec":<payload>,"chain":"<crc of the line before>"}
//
// So a line is intact on its own (a torn write is told apart as before),
// and in its place only after the line it was written after.
const (
	chainField = `,"chain":"`
	chainLen   = len(chainField) + 8 + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is one log record's payload.
type record struct {
	Op          string           `json:"op"`
	V           int              `json:"v,omitzero"`
	Gen         string           `json:"gen,omitempty"`  // format: the file's generation (see checkpoint.go)
	Prev        string           `json:"prev,omitempty"` // format: the generation it was compacted from
	Key         *driver.Key      `json:"key,omitempty"`
	Fingerprint string           `json:"fp,omitempty"`
	State       string           `json:"state,omitempty"`
	Owner       string           `json:"owner,omitempty"`
	LeaseUntil  time.Time        `json:"leaseUntil,omitzero"`
	ExpiresAt   time.Time        `json:"expiresAt,omitzero"`
	CreatedAt   time.Time        `json:"createdAt,omitzero"`
	CompletedAt time.Time        `json:"completedAt,omitzero"`
	RunID       string           `json:"runId,omitempty"`
	Response    *driver.Response `json:"response,omitempty"`
}

// formatRecord is the first record of a log of generation gen, compacted
// from generation prev ("" for a new log). An older oke wrote neither.
func formatRecord(gen, prev string) *record {
	return &record{Op: opFormat, V: formatVersion, Gen: gen, Prev: prev}
}

// rowsFormatLine is the line of formatRecord(gen, prev): the start of a
// chain, so it has no chain field (an older oke reads it, and refuses the
// version).
func rowsFormatLine(gen, prev string) []byte {
	line, _ := appendRecord(nil, formatRecord(gen, prev), nil) // cannot fail: no times
	return line
}

func putRecord(r *driver.Row) *record {
	return &record{
		Op:          opPut,
		Key:         &r.Key,
		Fingerprint: r.Fingerprint,
		State:       r.State.String(),
		Owner:       r.Owner,
		LeaseUntil:  r.LeaseUntil,
		ExpiresAt:   r.ExpiresAt,
		CreatedAt:   r.CreatedAt,
		CompletedAt: r.CompletedAt,
		RunID:       r.RunID,
		Response:    r.Response,
	}
}

func delRecord(k driver.Key) *record { return &record{Op: opDel, Key: &k} }

// row rebuilds the row of a put record.
func (r *record) row() (driver.Row, error) {
	if r.Key == nil {
		return driver.Row{}, errors.New("put record without a key")
	}
	row := driver.Row{
		Key:         *r.Key,
		Fingerprint: r.Fingerprint,
		Owner:       r.Owner,
		LeaseUntil:  r.LeaseUntil,
		ExpiresAt:   r.ExpiresAt,
		CreatedAt:   r.CreatedAt,
		CompletedAt: r.CompletedAt,
		RunID:       r.RunID,
		Response:    r.Response,
	}
	switch r.State {
	case "running":
		row.State = driver.Running
	case "completed":
		row.State = driver.Completed
		if r.Response == nil {
			return driver.Row{}, errors.New("completed row without a response")
		}
	default:
		return driver.Row{}, fmt.Errorf("unknown row state %q", r.State)
	}
	return row, nil
}

// appendRecord appends rec's line to dst, chained after *chain (the
// checksum of the line before it), which it sets to the line's own; nil
// writes an unchained line (a format record).
func appendRecord(dst []byte, rec *record, chain *uint32) ([]byte, error) {
	start := len(dst)
	dst, err := appendPayload(beginLine(dst), rec)
	if err != nil {
		return dst[:start], err
	}
	return endLine(dst, start, chain), nil
}

// beginLine appends the start of a record line, up to where its payload
// goes; endLine finishes it once the payload is appended.
func beginLine(dst []byte) []byte {
	dst = append(dst, linePrefix...)
	dst = append(dst, "00000000"...)
	return append(dst, lineMid...)
}

// endLine closes the line that starts at dst[start:], whose payload is
// appended: with a chain field naming *chain if chain is not nil, then the
// checksum of both filled in; *chain becomes the line's checksum.
func endLine(dst []byte, start int, chain *uint32) []byte {
	if chain != nil {
		dst = append(dst, chainField...)
		dst = append(dst, "00000000\""...)
		putHex(dst[len(dst)-9:], *chain)
	}
	crc := crc32.Checksum(dst[start+headerLen:], castagnoli)
	putHex(dst[start+len(linePrefix):], crc)
	if chain != nil {
		*chain = crc
	}
	return append(dst, lineSuffix...)
}

// rechain chains the lines of buf (chained lines, each with its newline)
// after the checksum after, in place, and returns the checksum of the last.
func rechain(buf []byte, after uint32) uint32 {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		line := buf[:i] // ...,"chain":"<8 hex digits>"}
		putHex(line[len(line)-10:], after)
		after = crc32.Checksum(line[headerLen:len(line)-1], castagnoli)
		putHex(line[len(linePrefix):], after)
		buf = buf[i+1:]
	}
	return after
}

// putHex writes v as 8 hex digits at the start of b.
func putHex(b []byte, v uint32) {
	_ = b[7]
	for i := 7; i >= 0; i-- {
		b[i] = hexDigits[v&0xf]
		v >>= 4
	}
}

// hexValue is the value of each lower-case hex digit, and 0xff for every
// other byte.
var hexValue = func() (t [256]uint8) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(hexDigits) {
		t[hexDigits[i]] = uint8(i)
	}
	return t
}()

// parseHex reads 8 lower-case hex digits, as putHex writes them. A table,
// not a branch per digit: checksums are random, so branches would be
// mispredicted half the time (~40ns a checksum).
func parseHex(b []byte) (uint32, bool) {
	if len(b) != 8 {
		return 0, false
	}
	var (
		v   uint32
		bad uint8
	)
	for _, c := range b {
		d := hexValue[c]
		bad |= d
		v = v<<4 | uint32(d&0xf)
	}
	return v, bad&0xf0 == 0
}

// errTorn marks a line that a torn write could have produced: not a record
// line, or a checksum that does not match.
var errTorn = errors.New("torn")

// checkLine returns what the checksum of one line (without its newline)
// covers — the payload, and in a chained line its chain field — and the
// checksum. An error (wrapping errTorn) means the line is damaged.
func checkLine(line []byte) ([]byte, uint32, error) {
	n := len(line)
	if n < headerLen+2 || string(line[:len(linePrefix)]) != linePrefix ||
		string(line[len(linePrefix)+8:headerLen]) != lineMid || line[n-1] != '}' {
		return nil, 0, fmt.Errorf("%w: not a record line", errTorn)
	}
	hex := line[len(linePrefix) : len(linePrefix)+8]
	want, ok := parseHex(hex) // as written; a hand edit may use upper case
	if !ok {
		v, err := strconv.ParseUint(string(hex), 16, 32)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: bad checksum field", errTorn)
		}
		want = uint32(v)
	}
	covered := line[headerLen : n-1]
	if got := crc32.Checksum(covered, castagnoli); got != want {
		return nil, 0, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", errTorn, want, got)
	}
	return covered, want, nil
}

// splitChain splits what a chained line's checksum covers into the payload
// and the checksum of the line it was written after. ok is false if it has
// no chain field.
func splitChain(covered []byte) (payload []byte, after uint32, ok bool) {
	n := len(covered) - chainLen
	if n < 2 || string(covered[n:n+len(chainField)]) != chainField || covered[len(covered)-1] != '"' {
		return nil, 0, false
	}
	after, ok = parseHex(covered[n+len(chainField) : len(covered)-1])
	return covered[:n], after, ok
}

// replayRows replays the rows log of l into a map.
func replayRows(l *logFile) (map[driver.Key]*entry, error) {
	rows := make(map[driver.Key]*entry)
	l.format = rowsFormatLine
	err := l.load(func(payload []byte, _ int) error {
		rec, err := decode(payload)
		if err != nil {
			return fmt.Errorf("checksum matches but the record does not decode: %v", err)
		}
		if rec.Op == opFormat {
			l.gen, l.prev, l.chained = rec.Gen, rec.Prev, rec.V >= 2
		}
		return applyRow(rows, rec)
	})
	return rows, err
}

// readLine is bufio.Reader.ReadBytes('\n') without a copy for lines that fit
// in the buffer; the line is valid until the next read. Decoded records never
// point into it.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	long := append([]byte(nil), line...)
	for err == bufio.ErrBufferFull {
		line, err = br.ReadSlice('\n')
		long = append(long, line...)
	}
	return long, err
}

func applyRow(rows map[driver.Key]*entry, rec *record) error {
	switch rec.Op {
	case opFormat:
		if !readsVersion(rec.V) {
			return fmt.Errorf("format version %d; this oke reads versions 1 and %d (written by a newer oke?)", rec.V, formatVersion)
		}
	case opPut:
		row, err := rec.row()
		if err != nil {
			return err
		}
		rows[row.Key] = &entry{row: row}
	case opDel:
		if rec.Key == nil {
			return errors.New("del record without a key")
		}
		delete(rows, *rec.Key)
	default:
		return fmt.Errorf("unknown record op %q (written by a newer oke?)", rec.Op)
	}
	return nil
}

// ErrCorrupt is matched by every *CorruptError and *LossError: Open refuses
// a folder whose logs are damaged or lost records they had fsynced.
var ErrCorrupt = errors.New("file driver: log is damaged")

// CorruptError reports a damaged line in the middle of a log (idempotency.json
// or journal.json) — intact records follow it, so it is not a torn write at
// the end and Open will not drop it on its own — or an intact record that this
// version cannot use, or (Line 0) a damaged CHECKPOINT.
type CorruptError struct {
	Path   string
	Line   int   // 1-based; 0 when the damage is not one line's (CHECKPOINT)
	Offset int64 // byte offset of the line
	Reason string

	fix string // what to do, when not the default (a chained log)
}

// fixChained is what to do about a chained log's damaged or out-of-place
// line: removing a line is no way out there, since the next one is chained
// after it.
const fixChained = "put the lines back as they were written (the records of this log are chained: " +
	"a line removed, moved or copied leaves the next one out of place), or restore the file from a backup, " +
	"or move the folder away to start empty (every stored response and run is forgotten), then open again"

func (e *CorruptError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("oke file driver: %s is damaged: %s", e.Path, e.Reason)
	}
	fix := e.fix
	if fix == "" {
		fix = "restore the file from a backup, or repair or remove that line by hand, then open again"
	}
	return fmt.Sprintf("oke file driver: %s line %d (byte %d) is damaged: %s. "+
		"It is not a torn write at the end of the file, so the driver will not drop it and the records after it; %s",
		e.Path, e.Line, e.Offset, e.Reason, fix)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// lineCRC is the checksum of a line that appendRecord or appendJRecord
// wrote.
func lineCRC(line []byte) uint32 {
	v, _ := parseHex(line[len(linePrefix) : len(linePrefix)+8])
	return v
}
