package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// Records are chained: a line moved, removed or copied inside a log keeps
// its own checksum, so only the chain tells it is out of place. Each case
// below was accepted before (the checksums and the counts CHECKPOINT keeps
// were all right) and, for the rows, made a key that was answered run its
// flow again.

// fileLines splits a log into its lines, newlines kept.
func fileLines(t testing.TB, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) != 0 {
		t.Fatalf("%s does not end with a newline", path)
	}
	return lines[:len(lines)-1]
}

// lineOf is the index of the only line of lines that holds all of subs.
func lineOf(t testing.TB, lines [][]byte, subs ...string) int {
	t.Helper()
	found := -1
	for i, l := range lines {
		all := true
		for _, s := range subs {
			all = all && bytes.Contains(l, []byte(s))
		}
		if all {
			if found >= 0 {
				t.Fatalf("lines %d and %d both hold %q", found+1, i+1, subs)
			}
			found = i
		}
	}
	if found < 0 {
		t.Fatalf("no line holds %q", subs)
	}
	return found
}

// copyFolder copies the logs and CHECKPOINT of src to a new folder: what a
// process killed now would leave.
func copyFolder(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, n := range []string{logName, journalName, checkpointName} {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dst, n), b)
	}
	return dst
}

// mustRefuseOutOfPlace opens dir, which must fail with a *CorruptError for
// line (1-based) of log that says why, and leave the folder as it was.
// OpenReadOnly must refuse it too. k is the key the damage is about.
func mustRefuseOutOfPlace(t *testing.T, dir, log string, line int, why string, k driver.Key) {
	t.Helper()
	path := filepath.Join(dir, log)
	before, _ := os.ReadFile(path)
	d, err := Open(dir)
	if err == nil {
		row, gerr := d.Get(context.Background(), k)
		_ = d.Close()
		t.Fatalf("Open accepted a log with records %s; %s is then %v (%v), owner %q", why, k.Key, row.State, gerr, row.Owner)
	}
	ce, ok := errors.AsType[*CorruptError](err)
	if !ok || ce.Path != path || ce.Line != line || !strings.Contains(err.Error(), why) {
		t.Fatalf("Open of a log with %s: %v, want a CorruptError for %s line %d that says %q", why, err, path, line, why)
	}
	var off int64
	for _, l := range bytes.SplitAfter(before, []byte("\n"))[:line-1] {
		off += int64(len(l))
	}
	if ce.Offset != off {
		t.Errorf("CorruptError.Offset = %d, want %d (line %d)", ce.Offset, off, line)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("Open changed the refused log")
	}
	if _, err := OpenReadOnly(dir); !errors.Is(err, ErrCorrupt) {
		t.Errorf("OpenReadOnly of a log with %s: %v, want ErrCorrupt", why, err)
	}
}

// The case: the claim and the completion of one key swapped, inside
// what was fsynced (same bytes, same records). Replayed, the key would be
// running again under a lapsed lease, and its next request would charge
// again.
func TestSwappedRecordsOfOneKeyAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usedFolder(t, dir, 4)
	path := filepath.Join(dir, logName)
	lines := fileLines(t, path)
	k := key(1).Key
	i := lineOf(t, lines, k, `"state":"running"`)
	if j := lineOf(t, lines, k, `"state":"completed"`); j != i+1 {
		t.Fatalf("the claim and the completion of %s are lines %d and %d, not adjacent", k, i+1, j+1)
	}
	lines[i], lines[i+1] = lines[i+1], lines[i]
	writeFile(t, path, bytes.Join(lines, nil))
	mustRefuseOutOfPlace(t, dir, logName, i+1, "out of place", key(1))
}

// A record removed from the middle of what was written but not yet fsynced
// (claims; no checkpoint covers them) leaves the next one out of place.
func TestADroppedRecordIsRefused(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	d := open(t, src)
	fillUsed(t, d, 0, 2)
	for i := 2; i < 5; i++ {
		mustClaim(t, d, claimReq(key(i), "o"))
	}
	dir := copyFolder(t, src) // as a process killed now leaves it
	path := filepath.Join(dir, logName)
	lines := fileLines(t, path)
	i := lineOf(t, lines, key(3).Key)
	writeFile(t, path, bytes.Join(append(lines[:i:i], lines[i+1:]...), nil))
	mustRefuseOutOfPlace(t, dir, logName, i+1, "out of place", key(3))
}

// An older record of a key copied to the end: replayed, its claim would
// supersede the completion.
func TestADuplicatedRecordIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usedFolder(t, dir, 3)
	path := filepath.Join(dir, logName)
	lines := fileLines(t, path)
	dup := lines[lineOf(t, lines, key(0).Key, `"state":"running"`)]
	writeFile(t, path, bytes.Join(append(lines, dup), nil))
	mustRefuseOutOfPlace(t, dir, logName, len(lines)+1, "out of place", key(0))
}

// journal.json is chained the same way: a run's last step and its finish
// swapped (each rule of replay holds) is refused too.
func TestSwappedJournalRecordsAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usedFolder(t, dir, 3)
	path := filepath.Join(dir, journalName)
	lines := fileLines(t, path)
	i := lineOf(t, lines, `"op":"step"`, `"id":"run-000"`, `"seq":2`)
	if j := lineOf(t, lines, `"op":"finish"`, `"id":"run-000"`); j != i+1 {
		t.Fatalf("step 2 and the finish of run-000 are lines %d and %d, not adjacent", i+1, j+1)
	}
	lines[i], lines[i+1] = lines[i+1], lines[i]
	writeFile(t, path, bytes.Join(lines, nil))
	mustRefuseOutOfPlace(t, dir, journalName, i+1, "out of place", key(0))
}

// A torn tail is still a torn tail: truncated at Open, and the next record
// is chained after the last intact one (the folder opens again after it).
func TestATornTailOfAChainedLogHeals(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	d := open(t, src)
	fillUsed(t, d, 0, 2)
	mustClaim(t, d, claimReq(key(2), "o"))
	mustClaim(t, d, claimReq(key(3), "o"))
	dir := copyFolder(t, src)
	path := filepath.Join(dir, logName)
	data, _ := os.ReadFile(path)
	intact := lastLineStart(data)
	writeFile(t, path, data[:intact+(len(data)-intact)/2]) // key 3's claim, torn
	d2 := open(t, dir)
	if got := fileSize(t, path); got != int64(intact) {
		t.Fatalf("after Open the log is %d bytes, want %d (the torn tail truncated)", got, intact)
	}
	mustClaim(t, d2, claimReq(key(3), "o"))
	mustComplete(t, d2, key(3), "o", response(3))
	want := snapshot(t, d2)
	closeDriver(t, d2)
	d3 := open(t, dir)
	sameRows(t, "reopened", snapshot(t, d3), want)
	closeDriver(t, d3)
}

// After a compaction the chain starts again from the new file's format
// record: the compacted log opens, and a swap in it is refused.
func TestACompactedLogIsChainedFromItsStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	fillUsed(t, d, 0, 4)
	if err := d.Compact(); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, d, claimReq(key(9), "o"))
	rows, runs := snapshot(t, d), journalSnapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameRows(t, "rows", snapshot(t, d), rows)
	sameJournal(t, "runs", journalSnapshot(t, d), runs)
	closeDriver(t, d)
	path := filepath.Join(dir, logName)
	lines := fileLines(t, path)
	lines[1], lines[2] = lines[2], lines[1]
	writeFile(t, path, bytes.Join(lines, nil))
	mustRefuseOutOfPlace(t, dir, logName, 2, "out of place", key(0))
}

// testdata/v1 is a folder the oke before chained records wrote (format
// version 1, with generations and CHECKPOINT): keys 0-3 completed, key 4
// running, runs 0-3 with two steps each (0 and 2 completed), and run 1
// holding the business key order:1. Open reads it, rewrites both logs
// chained once, and checks them against CHECKPOINT from then on.
func TestAFolderOfVersion1Opens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{logName, journalName, checkpointName} {
		b, err := os.ReadFile(filepath.Join("testdata", "v1", n))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, n), b)
	}
	check := func(what string, d *Driver) {
		t.Helper()
		ctx := context.Background()
		rows := snapshot(t, d)
		if len(rows) != 5 {
			t.Fatalf("%s: %d rows, want 5", what, len(rows))
		}
		for i, r := range rows {
			want := response(i)
			switch {
			case r.Key != key(i):
				t.Fatalf("%s: row %d is %s, want %s", what, i, r.Key.Key, key(i).Key)
			case i == 4 && r.State != driver.Running:
				t.Errorf("%s: %s is %v, want running", what, r.Key.Key, r.State)
			case i < 4 && (r.State != driver.Completed || r.Response == nil || !bytes.Equal(r.Response.Body, want.Body) ||
				r.Response.Location != want.Location):
				t.Errorf("%s: %s is %v %+v, want completed with %+v", what, r.Key.Key, r.State, r.Response, want)
			}
		}
		for i := range 4 {
			id := "run-00" + string(rune('0'+i))
			run, steps, err := d.GetRun(ctx, id)
			if err != nil {
				t.Fatalf("%s: GetRun(%s): %v", what, id, err)
			}
			if len(steps) != 2 || !bytes.Equal(steps[1].Result, stepOf(i, 2).Result) {
				t.Errorf("%s: %s has steps %+v, want steps 1 and 2", what, id, steps)
			}
			if done := run.Status == driver.RunCompleted; done != (i%2 == 0) {
				t.Errorf("%s: %s is %v", what, id, run.Status)
			}
		}
		if d.ro {
			return
		}
		if holder, err := d.ClaimKey(ctx, "order:1", "run-003"); err != nil || holder != "run-001" {
			t.Errorf("%s: order:1 is held by %q (%v), want run-001", what, holder, err)
		}
	}

	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("OpenReadOnly of a version 1 folder: %v", err)
	}
	check("read-only", ro)
	closeDriver(t, ro)

	d := open(t, dir)
	check("opened", d)
	closeDriver(t, d)
	for _, n := range []string{logName, journalName} {
		lines := fileLines(t, filepath.Join(dir, n))
		if !bytes.Contains(lines[0], []byte(`"v":2`)) {
			t.Errorf("%s after Open: format record %s, want version 2", n, lines[0])
		}
		for i, l := range lines[1:] {
			if !bytes.Contains(l, []byte(chainField)) {
				t.Fatalf("%s line %d after Open is not chained: %s", n, i+2, l)
			}
		}
	}
	d = open(t, dir)
	check("reopened", d)
	closeDriver(t, d)
	// Checked against CHECKPOINT as before.
	path := filepath.Join(dir, logName)
	data, _ := os.ReadFile(path)
	writeFile(t, path, data[:lastLineStart(data)])
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of the upgraded folder with its log truncated: %v, want ErrCorrupt", err)
	}
}

// A line without a chain field in a chained log (pasted from an older
// oke's log, say) is refused, even at the end.
func TestAnUnchainedLineInAChainedLogIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usedFolder(t, dir, 2)
	path := filepath.Join(dir, logName)
	lines := fileLines(t, path)
	line, err := appendRecord(nil, putRecord(&driver.Row{Key: key(7), Fingerprint: "fp", State: driver.Running,
		Owner: "o", LeaseUntil: now().Add(time.Minute), ExpiresAt: now().Add(time.Hour), CreatedAt: now()}), nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, bytes.Join(append(lines, line), nil))
	mustRefuseOutOfPlace(t, dir, logName, len(lines)+1, "no chain field", key(7))
}

// Every mutation of one line of either log — two adjacent lines swapped,
// a line removed (but the last: a cut at a line boundary is CHECKPOINT's
// to catch, and past what was fsynced it is a torn tail), a line copied
// anywhere — is refused, in the fsynced part and past it.
func TestEveryReorderDropOrCopyOfALineIsRefused(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	d := open(t, src)
	fillUsed(t, d, 0, 2)
	mustClaim(t, d, claimReq(key(2), "o"))                                            // written, not fsynced
	if _, err := d.ClaimKey(context.Background(), "order:1", "run-001"); err != nil { // fsynced
		t.Fatal(err)
	}
	mustClaim(t, d, claimReq(key(3), "o"))
	folder := copyFolder(t, src) // as a process killed now leaves it
	for _, log := range []string{logName, journalName} {
		lines := fileLines(t, filepath.Join(folder, log))
		var cases []struct {
			name  string
			lines [][]byte
		}
		add := func(name string, l [][]byte) {
			cases = append(cases, struct {
				name  string
				lines [][]byte
			}{name, l})
		}
		for i := 0; i+1 < len(lines); i++ {
			l := slices.Clone(lines)
			l[i], l[i+1] = l[i+1], l[i]
			add(fmt.Sprintf("lines %d and %d swapped", i+1, i+2), l)
			add(fmt.Sprintf("line %d removed", i+1), slices.Delete(slices.Clone(lines), i, i+1))
		}
		for i := range lines {
			for j := 0; j <= len(lines); j++ {
				add(fmt.Sprintf("line %d copied before line %d", i+1, j+1), slices.Insert(slices.Clone(lines), j, lines[i]))
			}
		}
		for _, c := range cases {
			dir := copyFolder(t, folder)
			writeFile(t, filepath.Join(dir, log), bytes.Join(c.lines, nil))
			if d, err := Open(dir); err == nil {
				_ = d.Close()
				t.Errorf("%s: %s: Open accepted it", log, c.name)
			} else if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: %s: %v, want ErrCorrupt", log, c.name, err)
			}
		}
	}
}

// A write that finds its log broken heals it first, and that can rewrite
// the log (a new file, whose last record is another line): the write's
// lines, encoded after the old last record, are chained again after the new
// one, so the folder opens afterwards.
func TestAWriteAfterAHealingRewriteIsChainedAfterIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	fillUsed(t, d, 0, 2)
	broken := errors.New("an fsync failed (test)")

	d.mu.Lock()
	row := driver.Row{Key: key(5), Fingerprint: "fp", State: driver.Running, Owner: "o",
		LeaseUntil: now().Add(time.Minute), ExpiresAt: now().Add(time.Hour), CreatedAt: now()}
	d.setFault(broken, true)
	gen := d.gen
	seq, err := d.write(putRecord(&row), putRecord(&row))
	if err == nil {
		d.rows[row.Key] = &entry{row: row, seq: seq}
	}
	healed := d.gen != gen
	d.mu.Unlock()
	if err != nil || !healed {
		t.Fatalf("write to a broken rows log: %v, rewritten %v; want it healed by a rewrite and written", err, healed)
	}

	j := &d.jr
	j.mu.Lock()
	j.setFault(broken, true)
	gen = j.gen
	_, _, err = j.write(&jrecord{Op: jopClaim, ID: "run-000", Key: "order:5"}, &jrecord{Op: jopClaim, ID: "run-000", Key: "order:6"})
	healed = j.gen != gen
	j.mu.Unlock()
	if err != nil || !healed {
		t.Fatalf("write to a broken journal: %v, rewritten %v; want it healed by a rewrite and written", err, healed)
	}
	closeDriver(t, d)

	d = open(t, dir)
	if _, err := d.Get(context.Background(), key(5)); err != nil {
		t.Errorf("Get of the key written after the heal: %v", err)
	}
	if holder, err := d.ClaimKey(context.Background(), "order:6", "run-001"); err != nil || holder != "run-000" {
		t.Errorf("order:6 is held by %q (%v), want run-000", holder, err)
	}
}

// --- helpers for other tests ------------------------------------------------

// lastCRC is the checksum of the last line of the log at path: what a line
// appended to it must be chained after.
func lastCRC(t testing.TB, path string) uint32 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, crc, err := checkLine(bytes.TrimSuffix(data[lastLineStart(data):], []byte("\n")))
	if err != nil {
		t.Fatalf("last line of %s: %v", path, err)
	}
	return crc
}

// olderFormatLine is the format record an older oke wrote: version 1, no
// generation.
func olderFormatLine(journal bool) []byte {
	if journal {
		line, _ := appendJRecord(nil, &jrecord{Op: jopFormat, V: 1}, nil)
		return line
	}
	line, _ := appendRecord(nil, &record{Op: opFormat, V: 1}, nil)
	return line
}

// olderOkesLog is the log data as an older oke would have written the same
// records: an older format record (version 1, no generation), and every
// record unchained.
func olderOkesLog(t testing.TB, data []byte, journal bool) []byte {
	t.Helper()
	out := olderFormatLine(journal)
	for i, l := range bytes.SplitAfter(data[:len(data)-1], []byte("\n"))[1:] {
		covered, _, err := checkLine(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatalf("line %d: %v", i+2, err)
		}
		payload, _, ok := splitChain(covered)
		if !ok {
			t.Fatalf("line %d is not chained", i+2)
		}
		start := len(out)
		out = endLine(append(beginLine(out), payload...), start, nil)
	}
	return out
}

func TestParseHex(t *testing.T) {
	t.Parallel()
	for _, v := range []uint32{0, 1, 0x1c2d3e4f, 0xdeadbeef, 0xffffffff} {
		b := make([]byte, 8)
		putHex(b, v)
		if got, ok := parseHex(b); !ok || got != v {
			t.Errorf("parseHex(%s) = %08x, %v; want %08x", b, got, ok, v)
		}
	}
	for _, s := range []string{"1C2D3E4F", "1c2d3e4g", "1c2d3e4", "1c2d3e4f0", " c2d3e4f", "1c2d\x003e4"} {
		if v, ok := parseHex([]byte(s)); ok {
			t.Errorf("parseHex(%q) = %08x, accepted", s, v)
		}
	}
	// A checksum in upper case (a hand edit) is still read.
	line, _ := appendRecord(nil, formatRecord("g", ""), nil)
	line = bytes.TrimSuffix(line, []byte("\n"))
	upper := bytes.Clone(line)
	copy(upper[len(linePrefix):], bytes.ToUpper(line[len(linePrefix):len(linePrefix)+8]))
	if _, crc, err := checkLine(upper); err != nil || crc != lineCRC(line) {
		t.Errorf("checkLine of %s: %08x, %v; want %08x", upper, crc, err, lineCRC(line))
	}
}
