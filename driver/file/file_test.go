package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
)

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Driver {
		return open(t, t.TempDir())
	})
}

// TestTxConformance skips: the file driver has no SQL database for a
// flow's transaction (driver.TxDriver), and RunTx says so.
func TestTxConformance(t *testing.T) {
	drivertest.RunTx(t, func(t *testing.T) driver.Driver {
		return open(t, t.TempDir())
	}, drivertest.TxOptions{})
}

// open opens dir and closes it when the test ends.
func open(t testing.TB, dir string, opts ...Option) *Driver {
	t.Helper()
	d, err := Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func closeDriver(t testing.TB, d *Driver) {
	t.Helper()
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func key(i int) driver.Key {
	return driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.charge", Key: fmt.Sprintf("idem-key-%08d", i)}
}

func claimReq(k driver.Key, owner string) driver.ClaimRequest {
	return driver.ClaimRequest{Key: k, Fingerprint: "fp-" + k.Key, Owner: owner, Lease: time.Minute, TTL: 24 * time.Hour}
}

func response(i int) driver.Response {
	body := []byte(fmt.Sprintf(`{"id":"ch_%d","note":"line\nbreak \u00e9 \"q\" <tag>"}`, i))
	body = append(body, 0, 0xff, 0xfe, byte(i)) // not UTF-8
	return driver.Response{Status: 201, ContentType: "application/json", Location: fmt.Sprintf("/charges/ch_%d", i), Body: body}
}

func mustClaim(t testing.TB, d *Driver, r driver.ClaimRequest) driver.Row {
	t.Helper()
	res, err := d.Claim(context.Background(), r)
	if err != nil || !res.Claimed {
		t.Fatalf("Claim(%s): claimed %v, err %v", r.Key.Key, res.Claimed, err)
	}
	return res.Row
}

func mustComplete(t testing.TB, d *Driver, k driver.Key, owner string, resp driver.Response) {
	t.Helper()
	if err := d.Complete(context.Background(), k, owner, resp, 24*time.Hour); err != nil {
		t.Fatalf("Complete(%s): %v", k.Key, err)
	}
}

// snapshot is every row, in key order.
func snapshot(t testing.TB, d *Driver) []driver.Row {
	t.Helper()
	rows, err := d.List(context.Background(), driver.Key{}, 0)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return rows
}

func sameRows(t *testing.T, what string, got, want []driver.Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		same := g.Key == w.Key && g.Fingerprint == w.Fingerprint && g.State == w.State &&
			g.Owner == w.Owner && g.RunID == w.RunID &&
			g.LeaseUntil.Equal(w.LeaseUntil) && g.ExpiresAt.Equal(w.ExpiresAt) &&
			g.CreatedAt.Equal(w.CreatedAt) && g.CompletedAt.Equal(w.CompletedAt) &&
			(g.Response == nil) == (w.Response == nil)
		if same && g.Response != nil {
			same = g.Response.Status == w.Response.Status && g.Response.ContentType == w.Response.ContentType &&
				g.Response.Location == w.Response.Location && bytes.Equal(g.Response.Body, w.Response.Body)
		}
		if !same {
			t.Fatalf("%s: row %d:\n\tgot  %+v %+v\n\twant %+v %+v", what, i, g, g.Response, w, w.Response)
		}
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestReopenKeepsEveryRowExactly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	for i := range 50 {
		r := claimReq(key(i), fmt.Sprint("owner-", i))
		if i%5 == 0 {
			r.RunID = fmt.Sprint("run-", i)
		}
		mustClaim(t, d, r)
		switch i % 3 {
		case 0:
			mustComplete(t, d, key(i), fmt.Sprint("owner-", i), response(i))
		case 1:
			if err := d.Renew(context.Background(), key(i), fmt.Sprint("owner-", i), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 40; i < 50; i++ { // some rows are gone
		if err := d.Release(context.Background(), key(i), fmt.Sprint("owner-", i)); err != nil && !errors.Is(err, driver.ErrNotOwner) {
			t.Fatal(err)
		}
	}
	want := snapshot(t, d)
	closeDriver(t, d)

	d = open(t, dir)
	sameRows(t, "after reopen", snapshot(t, d), want)
	// And a replay through Claim gives the exact stored response.
	res, err := d.Claim(context.Background(), claimReq(key(3), "someone-else"))
	if err != nil || res.Claimed || res.Row.State != driver.Completed {
		t.Fatalf("Claim after reopen = %+v, %v; want the completed row", res, err)
	}
	if want := response(3); !bytes.Equal(res.Row.Response.Body, want.Body) || res.Row.Response.Location != want.Location {
		t.Errorf("replayed response = %+v, want %+v", *res.Row.Response, want)
	}
}

func TestOpenWithoutCloseKeepsRows(t *testing.T) {
	// A process that dies without Close leaves everything it wrote in the
	// page cache; a new Open (here, after the lock is dropped) reads it.
	t.Parallel()
	dir := t.TempDir()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, d, claimReq(key(1), "a"))
	mustClaim(t, d, claimReq(key(2), "b"))
	mustComplete(t, d, key(2), "b", response(2))
	want := snapshot(t, d)
	_ = d.unlock() // as if the process died: the kernel drops the lock
	d2 := open(t, dir)
	sameRows(t, "after a crash", snapshot(t, d2), want)
	_ = d.f.Close()
}

func TestTornTailLoads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	for i := range 5 {
		mustClaim(t, d, claimReq(key(i), "o"))
		mustComplete(t, d, key(i), "o", response(i))
	}
	before := snapshot(t, d) // rows 0..4
	mustClaim(t, d, claimReq(key(99), "last"))
	mustComplete(t, d, key(99), "last", response(99)) // the last record
	closeDriver(t, d)

	data, err := os.ReadFile(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	// Without its complete last record, key 99 is still the running claim.
	for cut := lastStart; cut < len(data); cut++ {
		sub := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, logName)
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := Open(sub)
		if err != nil {
			t.Fatalf("Open with the file cut at byte %d of %d: %v", cut, len(data), err)
		}
		rows := snapshot(t, d)
		if len(rows) != len(before)+1 {
			t.Fatalf("cut at %d: %d rows, want %d", cut, len(rows), len(before)+1)
		}
		sameRows(t, fmt.Sprintf("cut at %d", cut), rows[:len(before)], before)
		if last := rows[len(rows)-1]; last.Key != key(99) || last.State != driver.Running || last.Owner != "last" {
			t.Fatalf("cut at %d: last row %+v, want the running claim of key 99", cut, last)
		}
		if got := fileSize(t, path); got != int64(lastStart) {
			t.Fatalf("cut at %d: file is %d bytes after Open, want the torn tail truncated to %d", cut, got, lastStart)
		}
		if cut-lastStart > 8 && len(data)-cut > 8 && cut%16 != 0 {
			closeDriver(t, d)
			continue
		}
		// Writing after the repair gives a log that loads again.
		owner := rows[len(rows)-1].Owner
		mustComplete(t, d, key(99), owner, response(99))
		closeDriver(t, d)
		d = open(t, sub)
		if r, err := d.Get(context.Background(), key(99)); err != nil || r.State != driver.Completed {
			t.Fatalf("cut at %d: after repair and reopen, key 99 = %+v, %v", cut, r, err)
		}
		closeDriver(t, d)
	}
}

func TestTornTailOfZerosLoads(t *testing.T) {
	// After an OS crash an appended region can read back as zeros, even with
	// newlines from later pages: all damage after the last intact record is
	// a tail.
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	mustClaim(t, d, claimReq(key(1), "o"))
	mustComplete(t, d, key(1), "o", response(1))
	want := snapshot(t, d)
	closeDriver(t, d)
	path := filepath.Join(dir, logName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	good := fileSize(t, path)
	_, _ = f.Write(append(make([]byte, 5000), "\n\x00\x00{\"crc\":\"0000\n"...))
	_ = f.Close()
	d = open(t, dir)
	sameRows(t, "after a zero tail", snapshot(t, d), want)
	if got := fileSize(t, path); got != good {
		t.Errorf("file is %d bytes, want the tail truncated to %d", got, good)
	}
}

func TestCorruptMiddleIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	for i := range 4 {
		mustClaim(t, d, claimReq(key(i), "o"))
	}
	closeDriver(t, d)
	path := filepath.Join(dir, logName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Line 3 (the second claim): flip one byte of its payload.
	lines[2] = bytes.Replace(lines[2], []byte("idem-key"), []byte("idem-kex"), 1)
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a file damaged in the middle: err = %v, want a *CorruptError", err)
	}
	if ce.Line != 3 || ce.Path != path || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("CorruptError = %+v (%q), want file %s line 3", ce, err, path)
	}
	if got := fileSize(t, path); got != int64(len(data)) {
		t.Errorf("Open changed the damaged file: %d bytes, want %d", got, len(data))
	}
	// The failed Open released the lock.
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
}

func TestNewerFormatIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line, err := appendRecord(nil, &record{Op: opFormat, V: formatVersion + 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, logName), line, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", formatVersion+1)) {
		t.Fatalf("Open of a newer version's log: err = %v, want an error naming the version", err)
	}
}

func TestCompactionKeepsLiveRowsAndShrinksFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, logName)
	d := open(t, dir, WithCompactAfter(100))
	const live = 20
	for i := range live {
		mustClaim(t, d, claimReq(key(i), "o"))
	}
	mustComplete(t, d, key(0), "o", response(0))
	// Dead records: renewals, and rows that come and go.
	peak := int64(0)
	for round := range 30 {
		for i := 1; i < live; i++ {
			if err := d.Renew(context.Background(), key(i), "o", time.Duration(round+1)*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		k := key(1000 + round)
		mustClaim(t, d, claimReq(k, "tmp"))
		if err := d.Release(context.Background(), k, "tmp"); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, fileSize(t, path))
	}
	d.mu.Lock()
	compactions, records := d.compactions, d.records
	d.mu.Unlock()
	if compactions == 0 {
		t.Fatalf("no compaction after %d dead records (threshold 100, live %d)", 30*(live+1), live)
	}
	if records > 3*live+100 {
		t.Errorf("log holds %d records after compacting, want at most %d", records, 3*live+100)
	}
	want := snapshot(t, d)
	if err := d.Compact(); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	size := fileSize(t, path)
	if size >= peak/2 {
		t.Errorf("compacted log is %d bytes, want well under the peak %d", size, peak)
	}
	sameRows(t, "after Compact", snapshot(t, d), want)
	// Writes after compacting go to the new file and survive a reopen.
	mustClaim(t, d, claimReq(key(500), "new"))
	want = snapshot(t, d)
	closeDriver(t, d)
	if _, err := os.Stat(filepath.Join(dir, compactName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("compaction left %s behind: %v", compactName, err)
	}
	d = open(t, dir)
	sameRows(t, "after compaction and reopen", snapshot(t, d), want)
}

func TestCompactionDuringConcurrentCompletes(t *testing.T) {
	// Compaction swaps the file under group commit: every Complete that
	// returned must be on disk afterwards.
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir, WithCompactAfter(50))
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				k := key(w*1000 + i)
				mustClaim(t, d, claimReq(k, "o"))
				for range 3 {
					if err := d.Renew(context.Background(), k, "o", time.Minute); err != nil {
						t.Error(err)
						return
					}
				}
				mustComplete(t, d, k, "o", response(i))
			}
		})
	}
	wg.Wait()
	d.mu.Lock()
	compactions := d.compactions
	d.mu.Unlock()
	if compactions == 0 {
		t.Errorf("no compaction happened")
	}
	want := snapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameRows(t, "after reopen", snapshot(t, d), want)
	if len(want) != workers*each {
		t.Errorf("%d rows, want %d", len(want), workers*each)
	}
}

func TestOpenCompactsWhenDeadRecordsDominate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir, WithCompactAfter(1_000_000)) // no compaction while writing
	mustClaim(t, d, claimReq(key(1), "o"))
	for range 300 {
		if err := d.Renew(context.Background(), key(1), "o", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	closeDriver(t, d)
	path := filepath.Join(dir, logName)
	before := fileSize(t, path)
	d = open(t, dir, WithCompactAfter(100))
	if after := fileSize(t, path); after >= before/10 {
		t.Errorf("Open did not compact: %d bytes, was %d", after, before)
	}
	if _, err := d.Get(context.Background(), key(1)); err != nil {
		t.Errorf("row lost by compaction at Open: %v", err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	_, err := Open(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of %s: err = %v, want ErrLocked", dir, err)
	}
	var le *LockedError
	if !errors.As(err, &le) || le.Dir != dir {
		t.Errorf("error %#v, want a *LockedError for %s", err, dir)
	}
	msg := err.Error()
	for _, want := range []string{dir, "this same process", "close the Driver", "different", "Postgres"} {
		if !strings.Contains(msg, want) {
			t.Errorf("lock error %q does not mention %q", msg, want)
		}
	}
	closeDriver(t, d)
	d2, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v (Close must release the lock)", err)
	}
	closeDriver(t, d2)
}

func TestCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	d := open(t, t.TempDir())
	closeDriver(t, d)
	closeDriver(t, d)
	if err := d.Compact(); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Compact after Close: %v, want ErrClosed", err)
	}
}

func TestConcurrentCompletesAreAllDurable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	const n = 200
	for i := range n {
		mustClaim(t, d, claimReq(key(i), "o"))
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { mustComplete(t, d, key(i), "o", response(i)) })
	}
	wg.Wait()
	d.commit.mu.Lock()
	syncs, synced := d.commit.syncs, d.commit.synced
	d.commit.mu.Unlock()
	d.mu.Lock()
	seq := d.seq
	d.mu.Unlock()
	if synced < seq {
		t.Errorf("after every Complete returned, synced = %d < last write %d", synced, seq)
	}
	t.Logf("%d concurrent Completes took %d fsyncs", n, syncs)
	want := snapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameRows(t, "after reopen", snapshot(t, d), want)
}

func TestLargeResponseSurvivesReopen(t *testing.T) {
	// Lines longer than Open's read buffer.
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	resp := driver.Response{Status: 200, ContentType: "application/octet-stream", Body: make([]byte, 3<<20)}
	for i := range resp.Body {
		resp.Body[i] = byte(i * 7)
	}
	mustClaim(t, d, claimReq(key(1), "o"))
	mustComplete(t, d, key(1), "o", resp)
	mustClaim(t, d, claimReq(key(2), "o"))
	want := snapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameRows(t, "after reopen", snapshot(t, d), want)
}

func TestClaimRefusesKeyThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	d := open(t, t.TempDir())
	k := key(1)
	k.Principal = "user:\xff"
	if _, err := d.Claim(context.Background(), claimReq(k, "o")); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("Claim with a principal that is not UTF-8: err = %v, want a UTF-8 error", err)
	}
	if rows := snapshot(t, d); len(rows) != 0 {
		t.Errorf("a refused claim stored %d rows", len(rows))
	}
}
