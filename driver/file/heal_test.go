package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// mustFailUnavailable checks that err is driver.ErrUnavailable with cause
// wrapped.
func mustFailUnavailable(t *testing.T, what string, err, cause error) {
	t.Helper()
	if !errors.Is(err, driver.ErrUnavailable) || (cause != nil && !errors.Is(err, cause)) {
		t.Fatalf("%s: err = %v, want driver.ErrUnavailable wrapping %v", what, err, cause)
	}
}

func TestAFailedWriteLeavesNoPartialRecordAndTheNextWriteSucceeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name   string
		inject func(in *injector)
		cause  error
	}{
		{"disk full mid-write", func(in *injector) {
			in.set(ioWrite, logName, &partialWrite{n: 40, err: syscall.ENOSPC})
		}, syscall.ENOSPC},
		{"a write and its take-back fail, and so does a rewrite (an immutable file)", func(in *injector) {
			in.set(ioWrite, logName, &partialWrite{n: 40, err: syscall.EPERM})
			in.set(ioTruncate, logName, syscall.EPERM)
			in.set(ioRename, logName, syscall.EPERM)
		}, syscall.EPERM},
		{"a write fails, and so does the fsync of its take-back", func(in *injector) {
			in.set(ioWrite, logName, &partialWrite{n: 40, err: syscall.EIO})
			in.set(ioSync, logName, syscall.EIO)
			in.set(ioSync, logName+".compact", syscall.EIO)
		}, syscall.EIO},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in := &injector{}
			d := open(t, dir, in.option())
			mustClaim(t, d, claimReq(key(1), "o"))
			mustComplete(t, d, key(1), "o", response(1))
			good := fileSize(t, filepath.Join(dir, logName))

			c.inject(in)
			_, err := d.Claim(ctx, claimReq(key(2), "o"))
			mustFailUnavailable(t, "Claim on a failing disk", err, c.cause)
			// While the disk fails, writes fail too...
			_, err = d.Claim(ctx, claimReq(key(3), "o"))
			mustFailUnavailable(t, "a second Claim on a failing disk", err, nil)
			// ...and replays of what was stored before go on.
			res, err := d.Claim(ctx, claimReq(key(1), "retry"))
			if err != nil || res.Claimed || res.Row.State != driver.Completed {
				t.Fatalf("replay while the disk fails: %+v, %v; want the stored response", res, err)
			}
			if _, err := d.Get(ctx, key(1)); err != nil {
				t.Fatalf("Get of a stored row while the disk fails: %v", err)
			}

			in.clear() // the disk works again: no restart needed
			mustClaim(t, d, claimReq(key(4), "o"))
			mustComplete(t, d, key(4), "o", response(4))
			if got := fileSize(t, filepath.Join(dir, logName)); got <= good {
				t.Fatalf("log is %d bytes after the next write, was %d", got, good)
			}
			want := snapshot(t, d)
			closeDriver(t, d)
			d = open(t, dir)
			sameRows(t, "after reopen", snapshot(t, d), want)
			if len(want) != 2 || want[0].Key != key(1) || want[1].Key != key(4) {
				t.Errorf("rows %v, want keys 1 and 4 only (the failed claims took nothing)", want)
			}
		})
	}
}

// After a failed fsync nothing of the file's pages is trusted (the kernel
// may have dropped them and will not say so again): the log takes no write
// until it is rewritten from memory into a new file, and what was written
// before the failure is shown only once it is durable.
func TestAFailedFsyncIsHealedByARewrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, cause := range []error{syscall.EIO, syscall.ENOSPC} {
		t.Run(cause.Error(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in := &injector{}
			d := open(t, dir, in.option())
			mustClaim(t, d, claimReq(key(1), "o"))
			mustComplete(t, d, key(1), "o", response(1))
			mustClaim(t, d, claimReq(key(2), "o"))
			gen := d.gen

			in.set(ioSync, logName, cause)
			in.set(ioSync, logName+".compact", cause) // the rewrite fails too, for now
			mustFailUnavailable(t, "Complete whose fsync fails", d.Complete(ctx, key(2), "o", response(2), time.Hour), cause)
			if ck, _ := os.ReadFile(filepath.Join(dir, checkpointName)); !bytes.Contains(ck, []byte(`"suspect":true`)) {
				t.Errorf("CHECKPOINT does not mark the log suspect:\n%s", ck)
			}
			_, err := d.Get(ctx, key(2))
			mustFailUnavailable(t, "Get of the response whose fsync failed", err, nil)
			if r, err := d.Get(ctx, key(1)); err != nil || r.State != driver.Completed {
				t.Fatalf("Get of a response fsynced before: %v, %v", r.State, err)
			}
			_, err = d.Claim(ctx, claimReq(key(3), "o"))
			mustFailUnavailable(t, "Claim while the log cannot be rewritten", err, cause)
			for _, want := range []string{"takes no writes since a write or fsync failed", "once the disk works again", "the last attempt"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q: %v", want, err)
				}
			}

			in.clear()
			mustClaim(t, d, claimReq(key(3), "o"))
			if d.heals != 1 || d.gen == gen {
				t.Errorf("heals %d, generation %s (was %s); want the log rewritten once", d.heals, d.gen, gen)
			}
			// The response whose fsync failed was in memory: it is durable now.
			if r, err := d.Get(ctx, key(2)); err != nil || r.State != driver.Completed {
				t.Fatalf("Get of key 2 after the rewrite: %v, %v; want its response", r.State, err)
			}
			mustComplete(t, d, key(3), "o", response(3))
			want := snapshot(t, d)
			closeDriver(t, d)
			if ck, _ := os.ReadFile(filepath.Join(dir, checkpointName)); bytes.Contains(ck, []byte(`"suspect":true`)) {
				t.Errorf("CHECKPOINT still marks the healed log suspect:\n%s", ck)
			}
			d = open(t, dir)
			sameRows(t, "after reopen", snapshot(t, d), want)
		})
	}
}

func TestAFailedJournalFsyncIsHealedByARewrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	in := &injector{}
	d := open(t, dir, in.option())
	mustCreateRun(t, d, runOf("run-1", "w"), time.Hour)
	mustSaveStep(t, d, "run-1", "w", stepOf(1, 1))
	mustCreateRun(t, d, runOf("run-2", "w"), time.Hour)

	in.set(ioSync, journalName, syscall.EIO)
	in.set(ioSync, journalName+".compact", syscall.EIO)
	mustFailUnavailable(t, "SaveStep whose fsync fails", d.SaveStep(ctx, "run-2", "w", stepOf(2, 1)), syscall.EIO)
	_, _, err := d.GetRun(ctx, "run-2")
	mustFailUnavailable(t, "GetRun of the run whose step is not durable", err, nil)
	if _, steps, err := d.GetRun(ctx, "run-1"); err != nil || len(steps) != 1 {
		t.Fatalf("GetRun of a run fsynced before: %d steps, %v", len(steps), err)
	}
	mustFailUnavailable(t, "SaveStep while the journal cannot be rewritten", d.SaveStep(ctx, "run-1", "w", stepOf(1, 2)), nil)
	// The rows log is another file: it goes on.
	mustClaim(t, d, claimReq(key(1), "o"))
	mustComplete(t, d, key(1), "o", response(1))

	in.clear()
	mustSaveStep(t, d, "run-1", "w", stepOf(1, 2))
	if d.jr.heals != 1 {
		t.Errorf("journal heals %d, want 1", d.jr.heals)
	}
	want := journalSnapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameJournal(t, "after reopen", journalSnapshot(t, d), want)
	if _, steps, _ := d.GetRun(ctx, "run-2"); len(steps) != 1 {
		t.Errorf("run-2 has %d steps, want the one whose fsync failed, made durable by the rewrite", len(steps))
	}
}

// Every failure to write surfaces as driver.ErrUnavailable with its cause, so
// the app answers 503: here a full disk, at write and at fsync time.
func TestEveryWriteFailureIsErrUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type call struct {
		name  string
		setup func(t *testing.T, d *Driver)
		call  func(d *Driver) error
		fsync bool // fails at fsync time (delayed allocation); else at write time
	}
	held := func(t *testing.T, d *Driver) { mustClaim(t, d, claimReq(key(1), "o")) }
	run := func(t *testing.T, d *Driver) { mustCreateRun(t, d, runOf("run-1", "w"), time.Hour) }
	calls := []call{
		{"Claim", nil, func(d *Driver) error { _, err := d.Claim(ctx, claimReq(key(1), "o")); return err }, false},
		{"Claim linking a run", nil, func(d *Driver) error {
			r := claimReq(key(1), "o")
			r.RunID = "run-1"
			_, err := d.Claim(ctx, r)
			return err
		}, true},
		{"Renew", held, func(d *Driver) error { return d.Renew(ctx, key(1), "o", time.Minute) }, false},
		{"Complete", held, func(d *Driver) error { return d.Complete(ctx, key(1), "o", response(1), time.Hour) }, false},
		{"Complete", held, func(d *Driver) error { return d.Complete(ctx, key(1), "o", response(1), time.Hour) }, true},
		{"Release", held, func(d *Driver) error { return d.Release(ctx, key(1), "o") }, false},
		{"Sweep", func(t *testing.T, d *Driver) {
			r := claimReq(key(1), "o")
			r.Lease, r.TTL = 0, 0
			mustClaim(t, d, r)
		}, func(d *Driver) error { _, err := d.Sweep(ctx, 0); return err }, false},
		{"CreateRun", nil, func(d *Driver) error { _, err := d.CreateRun(ctx, runOf("run-1", "w"), time.Hour); return err }, false},
		{"CreateRun", nil, func(d *Driver) error { _, err := d.CreateRun(ctx, runOf("run-1", "w"), time.Hour); return err }, true},
		{"AcquireRun", func(t *testing.T, d *Driver) { mustCreateRun(t, d, runOf("run-1", ""), 0) },
			func(d *Driver) error { _, _, err := d.AcquireRun(ctx, "run-1", "w", time.Hour); return err }, false},
		{"RenewRun", run, func(d *Driver) error { return d.RenewRun(ctx, "run-1", "w", time.Hour) }, false},
		{"SaveStep", run, func(d *Driver) error { return d.SaveStep(ctx, "run-1", "w", stepOf(1, 1)) }, false},
		{"SaveStep", run, func(d *Driver) error { return d.SaveStep(ctx, "run-1", "w", stepOf(1, 1)) }, true},
		{"FinishRun", run, func(d *Driver) error {
			return d.FinishRun(ctx, "run-1", "w", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 200}})
		}, false},
		{"FinishRun", run, func(d *Driver) error {
			return d.FinishRun(ctx, "run-1", "w", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 200}})
		}, true},
		{"ClaimKey", run, func(d *Driver) error { _, err := d.ClaimKey(ctx, "order:1", "run-1"); return err }, false},
		{"ClaimKey", run, func(d *Driver) error { _, err := d.ClaimKey(ctx, "order:1", "run-1"); return err }, true},
		{"Compact", held, func(d *Driver) error { return d.Compact() }, false},
		{"Close", held, func(d *Driver) error { return d.Close() }, true},
	}
	for _, c := range calls {
		when := "write"
		if c.fsync {
			when = "fsync"
		}
		t.Run(c.name+" at "+when, func(t *testing.T) {
			t.Parallel()
			in := &injector{}
			d := open(t, t.TempDir(), in.option())
			if c.setup != nil {
				c.setup(t, d)
			}
			op := ioWrite
			if c.fsync {
				op = ioSync
			}
			for _, n := range []string{logName, journalName, logName + ".compact", journalName + ".compact"} {
				in.set(op, n, syscall.ENOSPC)
			}
			mustFailUnavailable(t, c.name+" with the disk full", c.call(d), syscall.ENOSPC)
			if c.name == "Close" {
				return
			}
			in.clear()
			// The next write works, without a restart.
			mustClaim(t, d, claimReq(key(9), "o"))
			mustComplete(t, d, key(9), "o", response(9))
			mustCreateRun(t, d, runOf("run-9", "w"), time.Hour)
			mustSaveStep(t, d, "run-9", "w", stepOf(9, 1))
		})
	}
}

// A compaction whose folder fsync fails leaves the rename's durability
// unknown: the log takes no write until a rewrite (with a good folder fsync)
// succeeds.
func TestAFailedFolderFsyncAfterACompactionHeals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := &injector{}
	d := open(t, dir, in.option())
	fillUsed(t, d, 0, 3)
	in.set(ioSyncDir, ".", syscall.EIO)
	mustFailUnavailable(t, "Compact whose folder fsync fails", d.Compact(), syscall.EIO)
	_, err := d.Claim(context.Background(), claimReq(key(10), "o"))
	mustFailUnavailable(t, "Claim while the folder cannot be fsynced", err, nil)
	if r, err := d.Get(context.Background(), key(1)); err != nil || r.State != driver.Completed {
		t.Fatalf("a replay while the folder cannot be fsynced: %v, %v", r.State, err)
	}
	in.clear()
	mustClaim(t, d, claimReq(key(10), "o"))
	want := snapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameRows(t, "after reopen", snapshot(t, d), want)
}

// CHECKPOINT is best effort once the logs are fsynced: failing to write it
// fails no call, and the next Open checks against an older one.
func TestAFailedCheckpointWriteFailsNoCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := &injector{}
	d := open(t, dir, in.option())
	fillUsed(t, d, 0, 2)
	in.set(ioWrite, checkpointName, syscall.EIO)
	fillUsed(t, d, 2, 2)
	if d.ck.failed == 0 {
		t.Fatal("no checkpoint write was attempted")
	}
	want := snapshot(t, d)
	_ = d.unlock() // the process dies, with a checkpoint older than the logs
	defer d.f.Close()
	defer d.jr.f.Close()
	d2 := open(t, dir)
	sameRows(t, "after reopen", snapshot(t, d2), want)
}

// A process that dies after an fsync failed, before it healed the log,
// leaves it marked suspect in CHECKPOINT: the next Open rewrites it rather
// than trust pages the kernel may never write.
func TestASuspectLogIsRewrittenAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := &injector{}
	d := open(t, dir, in.option())
	mustClaim(t, d, claimReq(key(1), "o"))
	mustComplete(t, d, key(1), "o", response(1))
	mustClaim(t, d, claimReq(key(2), "o"))
	in.set(ioSync, logName, syscall.EIO)
	mustFailUnavailable(t, "Complete", d.Complete(context.Background(), key(2), "o", response(2), time.Hour), syscall.EIO)
	gen := d.gen
	_ = d.unlock() // the process dies
	defer d.f.Close()
	defer d.jr.f.Close()
	d2 := open(t, dir)
	if d2.gen == gen || d2.compactions != 1 {
		t.Errorf("generation %s (was %s), compactions %d: want the log rewritten at Open", d2.gen, gen, d2.compactions)
	}
	if r, err := d2.Get(context.Background(), key(2)); err != nil || r.State != driver.Completed {
		t.Errorf("key 2 = %v, %v; want the response the page cache held", r.State, err)
	}
	if ck, _ := os.ReadFile(filepath.Join(dir, checkpointName)); bytes.Contains(ck, []byte(`"suspect":true`)) {
		t.Errorf("CHECKPOINT still marks the log suspect after Open:\n%s", ck)
	}
}

// Close heals a broken log if it can; if it cannot, it says so.
func TestCloseOfABrokenLog(t *testing.T) {
	t.Parallel()
	for _, healable := range []bool{true, false} {
		t.Run(fmt.Sprintf("healable=%v", healable), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in := &injector{}
			d := open(t, dir, in.option())
			mustClaim(t, d, claimReq(key(1), "o"))
			in.set(ioSync, logName, syscall.EIO)
			in.set(ioSync, logName+".compact", syscall.EIO)
			mustFailUnavailable(t, "Complete", d.Complete(context.Background(), key(1), "o", response(1), time.Hour), syscall.EIO)
			if healable {
				in.clear()
				closeDriver(t, d)
				d = open(t, dir)
				if r, err := d.Get(context.Background(), key(1)); err != nil || r.State != driver.Completed {
					t.Errorf("after Close healed the log: key 1 = %v, %v", r.State, err)
				}
				return
			}
			mustFailUnavailable(t, "Close of a log that cannot be healed", d.Close(), syscall.EIO)
			in.clear()
			closeDriver(t, open(t, dir)) // the lock was released; the folder opens
		})
	}
}
