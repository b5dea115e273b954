package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// usedFolder is a folder an app has used and closed: completed rows, runs
// with saved steps, one finished. It returns what the folder shows.
func usedFolder(t *testing.T, dir string, n int) ([]driver.Row, journalState) {
	t.Helper()
	d := open(t, dir)
	fillUsed(t, d, 0, n)
	rows, runs := snapshot(t, d), journalSnapshot(t, d)
	closeDriver(t, d)
	return rows, runs
}

// fillUsed completes rows [from, from+n) and creates as many runs, each with
// two saved steps; every other run finishes.
func fillUsed(t testing.TB, d *Driver, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		mustClaim(t, d, claimReq(key(i), "o"))
		mustComplete(t, d, key(i), "o", response(i))
		id := fmt.Sprintf("run-%03d", i)
		mustCreateRun(t, d, runOf(id, "w"), time.Hour)
		mustSaveStep(t, d, id, "w", stepOf(i, 1))
		mustSaveStep(t, d, id, "w", stepOf(i, 2))
		if i%2 == 0 {
			resp := response(i)
			mustFinishRun(t, d, id, "w", driver.Finish{Status: driver.RunCompleted, Result: &resp})
		}
	}
}

// lastLineStart is the offset of the last line of data.
func lastLineStart(data []byte) int { return bytes.LastIndexByte(data[:len(data)-1], '\n') + 1 }

func TestOpenRefusesALogThatLostFsyncedRecords(t *testing.T) {
	t.Parallel()
	// Another folder's logs, longer than this one's: a replacement that a
	// size check alone would let through.
	other := t.TempDir()
	usedFolder(t, other, 12)

	damages := []struct {
		name   string
		damage func(t *testing.T, path string, data []byte)
		reason string // in the error
	}{
		{"truncated mid-line", func(t *testing.T, path string, data []byte) {
			writeFile(t, path, data[:len(data)/2+3])
		}, "truncated or replaced"},
		{"truncated at a line boundary", func(t *testing.T, path string, data []byte) {
			writeFile(t, path, data[:lastLineStart(data)])
		}, "truncated or replaced"},
		{"emptied", func(t *testing.T, path string, data []byte) {
			writeFile(t, path, nil)
		}, "truncated or replaced"},
		{"deleted", func(t *testing.T, path string, data []byte) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "missing"},
		{"last line damaged", func(t *testing.T, path string, data []byte) {
			// A fsynced last line is not a torn write: one byte of it changed.
			b := bytes.Clone(data)
			i := lastLineStart(b) + 40
			b[i] ^= 0x01
			writeFile(t, path, b)
		}, "is damaged, inside the part that was fsynced"},
		{"last line cut short", func(t *testing.T, path string, data []byte) {
			writeFile(t, path, data[:len(data)-10])
		}, "truncated or replaced"},
		{"replaced by another folder's", func(t *testing.T, path string, data []byte) {
			b, err := os.ReadFile(filepath.Join(other, filepath.Base(path)))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) <= len(data) {
				t.Fatalf("the other folder's log is not longer (%d <= %d bytes)", len(b), len(data))
			}
			writeFile(t, path, b)
		}, "it was replaced"},
		{"replaced by an older oke's", func(t *testing.T, path string, data []byte) {
			// The same records under a format record without a generation.
			writeFile(t, path, olderOkesLog(t, data, filepath.Base(path) == journalName))
		}, "has no generation"},
	}
	for _, log := range []string{logName, journalName} {
		for _, c := range damages {
			t.Run(log+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				usedFolder(t, dir, 6)
				path := filepath.Join(dir, log)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				c.damage(t, path, data)
				before := listing(t, dir)

				_, err = Open(dir)
				le, ok := errors.AsType[*LossError](err)
				if !ok || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open of a folder whose %s was %s: err = %v, want a *LossError (ErrCorrupt)", log, c.name, err)
				}
				if le.Path != path || le.SyncedSize != int64(len(data)) || le.SyncedRecords != bytes.Count(data, []byte("\n")) {
					t.Errorf("LossError = %+v; want %s with %d bytes / %d records fsynced", le, path, len(data), bytes.Count(data, []byte("\n")))
				}
				msg := err.Error()
				for _, want := range []string{path, fmt.Sprintf("but %d bytes / %d records were fsynced", len(data), le.SyncedRecords),
					c.reason, "Restore the folder from a backup", "move it away to start empty", "delete " + filepath.Join(dir, checkpointName)} {
					if !strings.Contains(msg, want) {
						t.Errorf("error does not say %q:\n%s", want, msg)
					}
				}
				// Open changed nothing, and let go of the folder.
				sameListing(t, "after the refused Open", listing(t, dir), before)
				writeFile(t, path, data)
				closeDriver(t, open(t, dir))
			})
		}
	}
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The advice of the error works: deleting CHECKPOINT opens the log as it
// is.
func TestDeletingTheCheckpointAcceptsALoss(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usedFolder(t, dir, 4)
	path := filepath.Join(dir, logName)
	data, _ := os.ReadFile(path)
	writeFile(t, path, data[:lastLineStart(data)])
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a truncated log: %v, want ErrCorrupt", err)
	}
	if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil {
		t.Fatal(err)
	}
	d := open(t, dir)
	if rows := snapshot(t, d); len(rows) != 4 { // the last Complete is gone: key 3 is running
		t.Fatalf("%d rows after accepting the loss, want 4", len(rows))
	}
	if r, _ := d.Get(context.Background(), key(3)); r.State != driver.Running {
		t.Errorf("key 3 = %v, want the running claim its lost Complete had replaced", r.State)
	}
}

func TestOpenTruncatesOnlyATornTailPastTheLastFsync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Each case writes a record that is not fsynced after the fsynced
	// ones, then the process dies and the test damages what it wrote.
	type tail struct {
		name  string
		log   string
		write func(t *testing.T, d *Driver)
		check func(t *testing.T, d *Driver) // after the Open that dropped the tail
	}
	tails := []tail{
		{"a claim", logName, func(t *testing.T, d *Driver) { mustClaim(t, d, claimReq(key(99), "o")) },
			func(t *testing.T, d *Driver) {
				if _, err := d.Get(ctx, key(99)); !errors.Is(err, driver.ErrNotFound) {
					t.Errorf("the torn claim of key 99: %v, want ErrNotFound", err)
				}
			}},
		{"a renewal", journalName, func(t *testing.T, d *Driver) {
			if err := d.RenewRun(ctx, "run-001", "w", 3*time.Hour); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, d *Driver) {
			if r, _, err := d.GetRun(ctx, "run-001"); err != nil || r.LeaseUntil.After(time.Now().Add(2*time.Hour)) {
				t.Errorf("run-001 = %v, %v; want its lease before the torn renewal", r.LeaseUntil, err)
			}
		}},
	}
	damages := []struct {
		name string
		cut  func(data []byte, synced int) []byte
	}{
		{"cut mid-record", func(data []byte, synced int) []byte { return data[:synced+(len(data)-synced)/2] }},
		{"damaged record", func(data []byte, synced int) []byte {
			b := bytes.Clone(data)
			b[synced+30] ^= 1
			return b
		}},
		{"zeros", func(data []byte, synced int) []byte {
			return append(bytes.Clone(data[:synced]), make([]byte, len(data)-synced)...)
		}},
	}
	for _, tl := range tails {
		for _, dm := range damages {
			t.Run(tl.name+"/"+dm.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				d, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				fillUsed(t, d, 0, 3)
				path := filepath.Join(dir, tl.log)
				synced := int(fileSize(t, path))
				want, wantRuns := snapshot(t, d), journalSnapshot(t, d)
				tl.write(t, d)
				_ = d.unlock() // the process dies; its records are in the page cache
				defer d.f.Close()
				defer d.jr.f.Close()
				data, _ := os.ReadFile(path)
				if len(data) <= synced {
					t.Fatalf("nothing was written after the fsynced %d bytes", synced)
				}
				writeFile(t, path, dm.cut(data, synced))

				d2, err := Open(dir)
				if err != nil {
					t.Fatalf("Open with a torn tail after what was fsynced: %v", err)
				}
				defer closeDriver(t, d2)
				if got := fileSize(t, path); got != int64(synced) {
					t.Errorf("%s is %d bytes after Open, want the tail truncated to %d", tl.log, got, synced)
				}
				tl.check(t, d2)
				sameRows(t, "rows", snapshot(t, d2), want)
				if tl.log == logName {
					sameJournal(t, "runs", journalSnapshot(t, d2), wantRuns)
				}
			})
		}
	}
}

// An OS crash can leave CHECKPOINT older than the logs (it is not fsynced
// after each group commit): the check is weaker then, never a false alarm.
func TestAnOlderCheckpointIsNoFalseAlarm(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		more func(t *testing.T, d *Driver) // after the checkpoint is saved
	}{
		{"more records appended", func(t *testing.T, d *Driver) { fillUsed(t, d, 10, 3) }},
		{"both logs compacted once", func(t *testing.T, d *Driver) {
			fillUsed(t, d, 10, 3)
			if err := d.Compact(); err != nil {
				t.Fatal(err)
			}
			fillUsed(t, d, 20, 2)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d := open(t, dir)
			fillUsed(t, d, 0, 3)
			old, err := os.ReadFile(filepath.Join(dir, checkpointName))
			if err != nil {
				t.Fatal(err)
			}
			c.more(t, d)
			want, wantRuns := snapshot(t, d), journalSnapshot(t, d)
			closeDriver(t, d)
			writeFile(t, filepath.Join(dir, checkpointName), old)
			d = open(t, dir)
			sameRows(t, "rows", snapshot(t, d), want)
			sameJournal(t, "runs", journalSnapshot(t, d), wantRuns)
		})
	}
}

// TestACrashAtAnyPointOfACompactionLosesNothing copies the folder before
// every I/O call of a compaction of both logs — what a process killed at
// that point leaves — and opens each copy. It also models what an OS crash
// can leave at each point: every checkpoint write since the compaction
// began lost, and, until the folder's fsync, the rename lost.
func TestACrashAtAnyPointOfACompactionLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := &injector{}
	d := open(t, dir, in.option())
	fillUsed(t, d, 0, 8)
	for i := range 8 { // dead records, so the compaction rewrites something
		if err := d.RenewRun(context.Background(), fmt.Sprintf("run-%03d", i), "w", time.Hour); err != nil && i%2 == 1 {
			t.Fatal(err)
		}
	}
	want, wantRuns := snapshot(t, d), journalSnapshot(t, d)
	ckBefore, _ := os.ReadFile(filepath.Join(dir, checkpointName))
	logsBefore := map[string][]byte{}
	for _, n := range ckNames {
		logsBefore[n], _ = os.ReadFile(filepath.Join(dir, n))
	}
	type point struct {
		what       string
		dir        string
		renameDone bool // the log of the compaction under way was renamed
		dirSynced  bool
		log        string
	}
	var points []point
	var cur string // the log being compacted
	renamed, dirSynced := false, false
	in.watch(func(op ioOp, name string) {
		if op == ioCreate && strings.HasSuffix(name, ".compact") {
			cur, renamed, dirSynced = strings.TrimSuffix(name, ".compact"), false, false
		}
		points = append(points, point{fmt.Sprintf("before %v of %s (compacting %s)", op, name, cur), copyDir(t, dir), renamed, dirSynced, cur})
		if op == ioRename && name == cur {
			renamed = true
		}
		if op == ioSyncDir && renamed {
			dirSynced = true
		}
	})
	if err := d.Compact(); err != nil {
		t.Fatal(err)
	}
	in.watch(nil)
	points = append(points, point{what: "after", dir: copyDir(t, dir), renameDone: true, dirSynced: true})
	if len(points) < 12 {
		t.Fatalf("only %d I/O calls during Compact", len(points))
	}
	check := func(t *testing.T, what, dir string) {
		t.Helper()
		d, err := Open(dir)
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		defer closeDriver(t, d)
		sameRows(t, what, snapshot(t, d), want)
		sameJournal(t, what, journalSnapshot(t, d), wantRuns)
	}
	for _, p := range points {
		check(t, p.what+": process crash", copyDir(t, p.dir))
		// Damage is still found at every point: the checkpoint names the
		// generation under way (next) before it is renamed in.
		for _, n := range ckNames {
			c := copyDir(t, p.dir)
			data, _ := os.ReadFile(filepath.Join(c, n))
			writeFile(t, filepath.Join(c, n), data[:len(data)/2])
			if _, err := Open(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: Open of a copy whose %s was cut in half: %v, want ErrCorrupt", p.what, n, err)
			}
		}
		// An OS crash that lost every checkpoint write since Compact began.
		c := copyDir(t, p.dir)
		writeFile(t, filepath.Join(c, checkpointName), ckBefore)
		check(t, p.what+": OS crash, checkpoint writes lost", c)
		// An OS crash before the folder's fsync: the rename is lost.
		if p.renameDone && !p.dirSynced {
			c := copyDir(t, p.dir)
			writeFile(t, filepath.Join(c, p.log), logsBefore[p.log])
			check(t, p.what+": OS crash, rename lost", c)
		}
	}
}

// A crash between a group commit's fsync and its checkpoint write leaves the
// checkpoint one commit behind: no false alarm.
func TestACrashBetweenAnFsyncAndItsCheckpointLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := &injector{}
	d := open(t, dir, in.option())
	fillUsed(t, d, 0, 2)
	var copies []string
	in.watch(func(op ioOp, name string) {
		if op == ioWrite && name == checkpointName {
			copies = append(copies, copyDir(t, dir))
		}
	})
	mustClaim(t, d, claimReq(key(50), "o"))
	mustComplete(t, d, key(50), "o", response(50))
	mustCreateRun(t, d, runOf("run-50", "w"), time.Hour)
	mustSaveStep(t, d, "run-50", "w", stepOf(50, 1))
	in.watch(nil)
	if len(copies) != 3 { // Complete, CreateRun, SaveStep
		t.Fatalf("%d checkpoint writes, want 3", len(copies))
	}
	for i, c := range copies {
		d, err := Open(c)
		if err != nil {
			t.Fatalf("crash before checkpoint write %d: Open: %v", i+1, err)
		}
		if r, err := d.Get(context.Background(), key(1)); err != nil || r.State != driver.Completed {
			t.Errorf("crash before checkpoint write %d: key 1 = %v, %v", i+1, r.State, err)
		}
		closeDriver(t, d)
	}
}

// A folder an older oke made has no CHECKPOINT and logs without a
// generation: it opens, its logs are rewritten once with one, and from then
// on a loss is detected.
func TestAFolderOfAnOlderOkeOpensAndIsCheckedFromThenOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wantRows, wantRuns := usedFolder(t, dir, 4)
	// Make it an older oke's: no CHECKPOINT, format records without gen.
	if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil {
		t.Fatal(err)
	}
	for _, n := range ckNames {
		path := filepath.Join(dir, n)
		data, _ := os.ReadFile(path)
		writeFile(t, path, olderOkesLog(t, data, n == journalName))
	}
	d := open(t, dir)
	sameRows(t, "rows", snapshot(t, d), wantRows)
	sameJournal(t, "runs", journalSnapshot(t, d), wantRuns)
	closeDriver(t, d)
	for _, n := range ckNames {
		data, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Contains(data[:bytes.IndexByte(data, '\n')], []byte(`"gen":"`)) {
			t.Errorf("%s has no generation after Open:\n%s", n, data[:bytes.IndexByte(data, '\n')])
		}
	}
	path := filepath.Join(dir, logName)
	data, _ := os.ReadFile(path)
	writeFile(t, path, data[:lastLineStart(data)])
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open after the upgrade of a truncated log: %v, want ErrCorrupt", err)
	}
}

func TestADamagedCheckpoint(t *testing.T) {
	t.Parallel()
	t.Run("one slot damaged: the other is read", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		want, _ := usedFolder(t, dir, 3)
		path := filepath.Join(dir, checkpointName)
		ck, _ := os.ReadFile(path)
		ck[10] ^= 1 // slot 0
		writeFile(t, path, ck)
		d := open(t, dir)
		sameRows(t, "rows", snapshot(t, d), want)
	})
	t.Run("both slots damaged: refused, naming it", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		usedFolder(t, dir, 3)
		path := filepath.Join(dir, checkpointName)
		ck, _ := os.ReadFile(path)
		ck[10] ^= 1
		ck[ckSlot+10] ^= 1
		writeFile(t, path, ck)
		_, err := Open(dir)
		if ce, ok := errors.AsType[*CorruptError](err); !ok || ce.Path != path || !strings.Contains(err.Error(), "delete it") {
			t.Fatalf("Open with a damaged CHECKPOINT: %v, want a *CorruptError naming %s and what to do", err, path)
		}
	})
}

// The longest checkpoint (both logs with a next generation, every number at
// its largest) fits its slot and reads back.
func TestTheLongestCheckpointFitsItsSlot(t *testing.T) {
	big := logState{gen: newGen(), size: 1<<63 - 1, records: 1<<63 - 1}
	c := &checkpoint{}
	for i := range c.logs {
		c.logs[i] = ckEntry{cur: big, next: big, hasNext: true, suspect: true}
	}
	slot := c.encodeSlot(nil, 1<<64-1)
	if len(slot) != ckSlot {
		t.Fatalf("slot is %d bytes, want %d:\n%s", len(slot), ckSlot, slot)
	}
	seq, logs, ok := decodeSlot(slot)
	if !ok || seq != 1<<64-1 || logs != c.logs {
		t.Fatalf("decodeSlot = %d %+v %v; want %+v", seq, logs, ok, c.logs)
	}
}
