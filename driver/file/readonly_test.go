package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

func TestOpenReadOnlyOfAFolderWithoutDataCreatesNothing(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	withLock := t.TempDir() // LOCK only: an Open that failed before its logs
	writeFile(t, filepath.Join(withLock, lockName), nil)
	notAFolder := filepath.Join(t.TempDir(), "file")
	writeFile(t, notAFolder, []byte("x"))
	cases := []struct {
		name, dir, why string
	}{
		{"an empty folder", empty, "no idempotency.json or journal.json"},
		{"a folder with only a LOCK", withLock, "no idempotency.json or journal.json"},
		{"a missing folder", filepath.Join(t.TempDir(), "nope"), "does not exist"},
		{"a file", notAFolder, "not a folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := filepath.Dir(c.dir)
			before := listing(t, parent)
			d, err := OpenReadOnly(c.dir)
			if !errors.Is(err, ErrNoData) {
				if d != nil {
					d.Close()
				}
				t.Fatalf("OpenReadOnly(%s): err = %v, want ErrNoData", c.dir, err)
			}
			for _, want := range []string{c.dir, c.why, "-data folder"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			sameListing(t, "after OpenReadOnly", listing(t, parent), before)
		})
	}
}

func TestOpenReadOnlyReadsWithoutWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	wantRows, wantRuns := usedFolder(t, dir, 4)
	// A torn tail in each log: left out, not truncated.
	for _, n := range ckNames {
		f, err := os.OpenFile(filepath.Join(dir, n), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteString(`{"crc":"0000`)
		_ = f.Close()
	}
	// So is an unfinished compaction.
	writeFile(t, filepath.Join(dir, logName+".compact"), []byte("half"))
	before := listing(t, dir)

	d, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	sameRows(t, "rows", snapshot(t, d), wantRows)
	sameJournal(t, "runs", journalSnapshot(t, d), wantRuns)
	if r, err := d.Get(ctx, key(1)); err != nil || r.State != driver.Completed {
		t.Errorf("Get: %v, %v", r.State, err)
	}

	writes := map[string]func() error{
		"Claim":      func() error { _, err := d.Claim(ctx, claimReq(key(9), "o")); return err },
		"Renew":      func() error { return d.Renew(ctx, key(1), "o", time.Minute) },
		"Complete":   func() error { return d.Complete(ctx, key(1), "o", response(1), time.Hour) },
		"Release":    func() error { return d.Release(ctx, key(1), "o") },
		"Sweep":      func() error { _, err := d.Sweep(ctx, 0); return err },
		"Compact":    d.Compact,
		"CreateRun":  func() error { _, err := d.CreateRun(ctx, runOf("run-9", "w"), time.Hour); return err },
		"AcquireRun": func() error { _, _, err := d.AcquireRun(ctx, "run-001", "w", time.Hour); return err },
		"RenewRun":   func() error { return d.RenewRun(ctx, "run-001", "w", time.Hour) },
		"SaveStep":   func() error { return d.SaveStep(ctx, "run-001", "w", stepOf(1, 3)) },
		"FinishRun": func() error {
			return d.FinishRun(ctx, "run-001", "w", driver.Finish{Status: driver.RunFailed, Result: &driver.Response{Status: 500}})
		},
		"ClaimKey": func() error { _, err := d.ClaimKey(ctx, "order:9", "run-001"); return err },
	}
	for name, call := range writes {
		err := call()
		if !errors.Is(err, ErrReadOnly) || !errors.Is(err, driver.ErrUnavailable) || !strings.Contains(err.Error(), "OpenReadOnly") {
			t.Errorf("%s on a read-only driver: err = %v, want ErrReadOnly (and driver.ErrUnavailable)", name, err)
		}
	}
	closeDriver(t, d)
	sameListing(t, "after a read-only open and close", listing(t, dir), before)
}

func TestOpenReadOnlyAndTheLock(t *testing.T) {
	t.Parallel()
	t.Run("while a driver has the folder open: ErrLocked", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		d := open(t, dir)
		if _, err := OpenReadOnly(dir); !errors.Is(err, ErrLocked) {
			t.Fatalf("OpenReadOnly while Open holds %s: %v, want ErrLocked", dir, err)
		}
		closeDriver(t, d)
		r, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatalf("OpenReadOnly after Close: %v", err)
		}
		// Two readers share the lock; an Open meanwhile is refused.
		r2, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatalf("a second OpenReadOnly: %v", err)
		}
		if _, err := Open(dir); !errors.Is(err, ErrLocked) {
			t.Errorf("Open while a read-only driver is open: %v, want ErrLocked", err)
		}
		closeDriver(t, r)
		closeDriver(t, r2)
		closeDriver(t, open(t, dir))
	})
	t.Run("without a LOCK file: goes on, creates none", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		want, _ := usedFolder(t, dir, 2)
		if err := os.Remove(filepath.Join(dir, lockName)); err != nil {
			t.Fatal(err)
		}
		before := listing(t, dir)
		d, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatalf("OpenReadOnly without LOCK: %v", err)
		}
		sameRows(t, "rows", snapshot(t, d), want)
		closeDriver(t, d)
		sameListing(t, "after", listing(t, dir), before)
	})
}

func TestOpenReadOnlyRefusesADamagedFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usedFolder(t, dir, 3)
	if err := os.Remove(filepath.Join(dir, journalName)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenReadOnly of a folder whose journal.json was deleted: %v, want a LossError", err)
	}
}

// An older oke's folder (no CHECKPOINT, logs without a generation, only
// idempotency.json) is read as it is, and left so.
func TestOpenReadOnlyOfAnOlderOkesFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line, err := appendRecord(nil, putRecord(&driver.Row{Key: key(1), Fingerprint: "fp", State: driver.Running,
		Owner: "o", LeaseUntil: now().Add(time.Minute), ExpiresAt: now().Add(time.Hour), CreatedAt: now()}), nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, logName), append(olderFormatLine(false), line...))
	before := listing(t, dir)
	d, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	if rows := snapshot(t, d); len(rows) != 1 || rows[0].Key != key(1) {
		t.Errorf("rows %v, want key 1", rows)
	}
	if runs, err := d.ListRuns(context.Background(), driver.RunFilter{}, 0); err != nil || len(runs) != 0 {
		t.Errorf("ListRuns without journal.json: %v, %v", runs, err)
	}
	closeDriver(t, d)
	sameListing(t, "after", listing(t, dir), before)
}
