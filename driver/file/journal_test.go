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
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// --- fixtures ---------------------------------------------------------------

func runOf(id, owner string) driver.Run {
	return driver.Run{ID: id, Flow: "payments.refund", Input: []byte(`{"chargeId":"ch_1"}`),
		Tenant: "acme", Principal: "user:42", Owner: owner}
}

func mustCreateRun(t testing.TB, d *Driver, r driver.Run, lease time.Duration) driver.Run {
	t.Helper()
	got, err := d.CreateRun(context.Background(), r, lease)
	if err != nil {
		t.Fatalf("CreateRun(%s): %v", r.ID, err)
	}
	return got
}

// stepOf is step seq of run i, with a result that is not plain ASCII.
func stepOf(i, seq int) driver.Step {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC).Add(time.Duration(seq) * time.Second)
	s := driver.Step{Seq: seq, Name: fmt.Sprintf("step %d", seq), Attempts: seq,
		StartedAt: t0, FinishedAt: t0.Add(1500 * time.Microsecond)}
	if seq%3 == 0 {
		s.Failure = []byte(fmt.Sprintf(`{"code":"PaymentDeclined","run":%d}`, i))
	} else {
		s.Result = []byte(fmt.Sprintf("{ \"run\": %d, \"seq\": %d, \"note\": \"é \\u00e9\\n\" }\n", i, seq))
	}
	return s
}

func mustSaveStep(t testing.TB, d *Driver, id, owner string, s driver.Step) {
	t.Helper()
	if err := d.SaveStep(context.Background(), id, owner, s); err != nil {
		t.Fatalf("SaveStep(%s, %d): %v", id, s.Seq, err)
	}
}

func mustFinishRun(t testing.TB, d *Driver, id, owner string, f driver.Finish) {
	t.Helper()
	if err := d.FinishRun(context.Background(), id, owner, f); err != nil {
		t.Fatalf("FinishRun(%s): %v", id, err)
	}
}

// runSnap is one run and its steps.
type runSnap struct {
	run   driver.Run
	steps []driver.Step
}

// journalState is everything the journal shows: every run with its steps,
// in ID order, and the due runs.
type journalState struct {
	runs []runSnap
	due  []string
}

func journalSnapshot(t testing.TB, d *Driver) journalState {
	t.Helper()
	ctx := context.Background()
	runs, err := d.ListRuns(ctx, driver.RunFilter{}, 0)
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	var st journalState
	for _, r := range runs {
		run, steps, err := d.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatalf("GetRun(%s): %v", r.ID, err)
		}
		if s := runDiff(r, run); s != "" {
			t.Fatalf("ListRuns and GetRun disagree on %s: %s", r.ID, s)
		}
		st.runs = append(st.runs, runSnap{run, steps})
	}
	if st.due, err = d.DueRuns(ctx, nil, 0); err != nil {
		t.Fatalf("DueRuns: %v", err)
	}
	return st
}

// runDiff says how a and b differ, or "".
func runDiff(a, b driver.Run) string {
	same := a.ID == b.ID && a.Flow == b.Flow && bytes.Equal(a.Input, b.Input) && a.Tenant == b.Tenant &&
		a.Principal == b.Principal && a.Status == b.Status && a.Owner == b.Owner &&
		a.LeaseUntil.Equal(b.LeaseUntil) && a.WakeAt.Equal(b.WakeAt) && a.Attempts == b.Attempts && a.NextAttempts == b.NextAttempts &&
		a.ReplayOf == b.ReplayOf && a.Parent == b.Parent && a.Event == b.Event && a.DedupeKey == b.DedupeKey &&
		(a.IdemKey == nil) == (b.IdemKey == nil) && (a.IdemKey == nil || *a.IdemKey == *b.IdemKey) &&
		(a.Result == nil) == (b.Result == nil) && a.Error == b.Error &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
	if same && a.Result != nil {
		same = a.Result.Status == b.Result.Status && a.Result.ContentType == b.Result.ContentType &&
			a.Result.Location == b.Result.Location && bytes.Equal(a.Result.Body, b.Result.Body)
	}
	if same {
		return ""
	}
	return fmt.Sprintf("\n\t%+v %+v\n\t%+v %+v", a, a.Result, b, b.Result)
}

func stepsDiff(a, b []driver.Step) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d steps vs %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Seq != y.Seq || x.Name != y.Name || !bytes.Equal(x.Result, y.Result) || !bytes.Equal(x.Failure, y.Failure) ||
			x.Attempts != y.Attempts || !x.StartedAt.Equal(y.StartedAt) || !x.FinishedAt.Equal(y.FinishedAt) {
			return fmt.Sprintf("step %d: %+v vs %+v", i, x, y)
		}
	}
	return ""
}

func sameJournal(t *testing.T, what string, got, want journalState) {
	t.Helper()
	if len(got.runs) != len(want.runs) {
		t.Fatalf("%s: %d runs, want %d", what, len(got.runs), len(want.runs))
	}
	for i := range want.runs {
		if s := runDiff(got.runs[i].run, want.runs[i].run); s != "" {
			t.Fatalf("%s: run %d differs (got, want):%s", what, i, s)
		}
		if s := stepsDiff(got.runs[i].steps, want.runs[i].steps); s != "" {
			t.Fatalf("%s: run %s: %s", what, want.runs[i].run.ID, s)
		}
	}
	if !slices.Equal(got.due, want.due) {
		t.Fatalf("%s: due runs %v, want %v", what, got.due, want.due)
	}
}

// fillJournal writes runs in every state: held with steps (some taken over
// after a lapse, so that their next step counts a second attempt), due,
// parked, sleeping, completed, failed; with claims, dedupe keys and
// idempotency keys. It returns the claims made.
func fillJournal(t *testing.T, d *Driver, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	claims := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("run-%03d", i)
		r := runOf(id, "w1")
		r.Input = []byte(fmt.Sprintf("{\"i\": %d,\n \"s\": \"\\u00e9\"}", i))
		if i%4 == 0 {
			r.DedupeKey = "evt_" + id
			r.IdemKey = &driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.refund", Key: "idem-key-" + id}
			r.Event, r.Parent, r.ReplayOf = "order.paid", "run-parent", "run-original"
		}
		if i%7 == 6 {
			r.Owner = ""
			r.WakeAt = time.Now().Add(-time.Duration(i) * time.Minute)
			mustCreateRun(t, d, r, 0)
			continue
		}
		mustCreateRun(t, d, r, time.Hour)
		for seq := 1; seq <= i%5; seq++ {
			mustSaveStep(t, d, id, "w1", stepOf(i, seq))
		}
		if i%6 == 0 {
			// w1 was cut off before its next step returned, and picks the
			// run up again: that step's second attempt.
			if err := d.RenewRun(ctx, id, "w1", -time.Second); err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.AcquireRun(ctx, id, "w1", time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		if i%3 == 0 {
			key := fmt.Sprintf("order:%d", i/2)
			holder, err := d.ClaimKey(ctx, key, id)
			if err != nil {
				t.Fatal(err)
			}
			claims[key] = holder
		}
		switch i % 6 {
		case 1:
			mustFinishRun(t, d, id, "w1", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{
				Status: 201, ContentType: "application/json", Location: "/refunds/" + id, Body: []byte{'{', '}', 0, 0xff}}})
		case 2:
			mustFinishRun(t, d, id, "w1", driver.Finish{Status: driver.RunFailed,
				Result: &driver.Response{Status: 500, Body: []byte(`{"error":{}}`)}, Error: "boom\n\"quoted\" é"})
		case 3:
			mustFinishRun(t, d, id, "w1", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(time.Duration(i) * time.Minute)})
		case 4:
			mustFinishRun(t, d, id, "w1", driver.Finish{Status: driver.RunRunning, WakeAt: time.Now().Add(-time.Duration(i) * time.Second)})
		case 5:
			if err := d.RenewRun(ctx, id, "w1", 2*time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	return claims
}

// checkJournalExtras checks that each key is still held by its run, and
// that the runs taken over count their next step's second attempt.
func checkJournalExtras(t *testing.T, what string, d *Driver, claims map[string]string, n int) {
	t.Helper()
	ctx := context.Background()
	for key, holder := range claims {
		got, err := d.ClaimKey(ctx, key, "run-000")
		if err != nil || got != holder {
			t.Fatalf("%s: ClaimKey(%s) = %q, %v; want the holder %q", what, key, got, err, holder)
		}
	}
	for i := range n {
		if i%6 != 0 || i%7 == 6 { // held by w1, not finished
			continue
		}
		id := fmt.Sprintf("run-%03d", i)
		run, _, err := d.GetRun(ctx, id)
		if err != nil || run.NextAttempts != 2 {
			t.Fatalf("%s: %s's NextAttempts = %d, %v; want 2 (cut off once before)", what, id, run.NextAttempts, err)
		}
	}
}

// --- tests -----------------------------------------------------------------

func TestJournalReopenKeepsRunsStepsAndClaimsExactly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	const n = 60
	claims := fillJournal(t, d, n)
	want := journalSnapshot(t, d)
	closeDriver(t, d)

	d = open(t, dir)
	sameJournal(t, "after reopen", journalSnapshot(t, d), want)
	// Compaction rewrites the same state.
	if err := d.Compact(); err != nil {
		t.Fatal(err)
	}
	sameJournal(t, "after compacting", journalSnapshot(t, d), want)
	closeDriver(t, d)
	d = open(t, dir)
	sameJournal(t, "after compacting and reopening", journalSnapshot(t, d), want)
	checkJournalExtras(t, "after compacting and reopening", d, claims, n)

	// A dedupe key and a run ID stay taken.
	r := runOf("run-new", "")
	r.DedupeKey = "evt_run-004"
	got, err := d.CreateRun(context.Background(), r, 0)
	if !errors.Is(err, driver.ErrDuplicate) || got.ID != "run-004" {
		t.Errorf("CreateRun with a dedupe key from before the restart = %q, %v; want run-004, ErrDuplicate", got.ID, err)
	}
	if _, err := d.CreateRun(context.Background(), runOf("run-001", ""), 0); err == nil {
		t.Errorf("CreateRun with an ID from before the restart succeeded")
	}
}

func TestJournalOpenWithoutCloseKeepsRuns(t *testing.T) {
	// A process that dies without Close: everything it wrote is in the page
	// cache, and the next Open reads it.
	t.Parallel()
	dir := t.TempDir()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	claims := fillJournal(t, d, 20)
	want := journalSnapshot(t, d)
	_ = d.unlock() // as if the process died: the kernel drops the lock
	d2 := open(t, dir)
	sameJournal(t, "after a crash", journalSnapshot(t, d2), want)
	checkJournalExtras(t, "after a crash", d2, claims, 20)
	_ = d.f.Close()
	_ = d.jr.f.Close()
}

func TestJournalTornTailLoads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	mustCreateRun(t, d, runOf("run-1", "w1"), time.Hour)
	mustSaveStep(t, d, "run-1", "w1", stepOf(1, 1))
	mustSaveStep(t, d, "run-1", "w1", stepOf(1, 2))
	before := journalSnapshot(t, d)
	mustSaveStep(t, d, "run-1", "w1", stepOf(1, 3)) // the last record
	closeDriver(t, d)

	data, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	for cut := lastStart; cut < len(data); cut++ {
		sub := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, journalName)
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := Open(sub)
		if err != nil {
			t.Fatalf("Open with journal.json cut at byte %d of %d: %v", cut, len(data), err)
		}
		sameJournal(t, fmt.Sprintf("cut at %d", cut), journalSnapshot(t, d), before)
		if got := fileSize(t, path); got != int64(lastStart) {
			t.Fatalf("cut at %d: journal.json is %d bytes after Open, want the torn tail truncated to %d", cut, got, lastStart)
		}
		if cut-lastStart > 8 && len(data)-cut > 8 && cut%16 != 0 {
			closeDriver(t, d)
			continue
		}
		// Writing after the repair gives a log that loads again.
		mustSaveStep(t, d, "run-1", "w1", stepOf(1, 3))
		closeDriver(t, d)
		d = open(t, sub)
		if _, steps, err := d.GetRun(context.Background(), "run-1"); err != nil || len(steps) != 3 {
			t.Fatalf("cut at %d: after repair and reopen, run-1 has %d steps, %v; want 3", cut, len(steps), err)
		}
		closeDriver(t, d)
	}
}

func TestJournalCorruptMiddleIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	mustCreateRun(t, d, runOf("run-1", "w1"), time.Hour)
	for seq := 1; seq <= 3; seq++ {
		mustSaveStep(t, d, "run-1", "w1", stepOf(1, seq))
	}
	closeDriver(t, d)
	path := filepath.Join(dir, journalName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Line 3 (step 1): change one byte of its payload.
	lines[2] = bytes.Replace(lines[2], []byte(`"step 1"`), []byte(`"step X"`), 1)
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a journal damaged in the middle: err = %v, want a *CorruptError", err)
	}
	if ce.Line != 3 || ce.Path != path || !strings.Contains(err.Error(), "journal.json line 3") {
		t.Errorf("CorruptError = %+v (%q), want %s line 3", ce, err, path)
	}
	if got := fileSize(t, path); got != int64(len(data)) {
		t.Errorf("Open changed the damaged file: %d bytes, want %d", got, len(data))
	}
	// The failed Open released the lock and closed the rows log.
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
}

func TestJournalRecordThatBreaksARuleIsAnError(t *testing.T) {
	// An intact record (its checksum matches) that cannot follow the ones
	// before it: a step out of order.
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	mustCreateRun(t, d, runOf("run-1", "w1"), time.Hour)
	closeDriver(t, d)
	chain := lastCRC(t, filepath.Join(dir, journalName))
	line, err := appendJRecord(nil, stepRecord("run-1", &driver.Step{Seq: 2, Name: "x"}, now()), &chain)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, journalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write(line)
	_ = f.Close()
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "step 2 of run \"run-1\" follows step 0") {
		t.Fatalf("Open with a step out of order: err = %v, want a CorruptError naming it", err)
	}
}

func TestJournalCompactionKeepsEverythingLiveAndShrinksFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, journalName)
	d := open(t, dir, WithCompactAfter(100))
	ctx := context.Background()
	claims := fillJournal(t, d, 30)
	// Dead records: renewals and started attempts of the held runs, and
	// finished runs' leases and attempts.
	peak := int64(0)
	for round := range 40 {
		for i := range 30 {
			id := fmt.Sprintf("run-%03d", i)
			if err := d.RenewRun(ctx, id, "w1", time.Duration(round+2)*time.Hour); err != nil && !errors.Is(err, driver.ErrNotOwner) {
				t.Fatal(err)
			}
		}
		peak = max(peak, fileSize(t, path))
	}
	d.jr.mu.Lock()
	compactions, records := d.jr.compactions, d.jr.records
	d.jr.mu.Unlock()
	if compactions == 0 {
		t.Fatalf("no compaction after ~%d renewals (threshold 100 dead records)", 40*30)
	}
	if records > 400 {
		t.Errorf("journal holds %d records after compacting, want about the live ones", records)
	}
	want := journalSnapshot(t, d)
	if err := d.Compact(); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if size := fileSize(t, path); size >= peak/2 {
		t.Errorf("compacted journal is %d bytes, want well under the peak %d", size, peak)
	}
	sameJournal(t, "after compacting", journalSnapshot(t, d), want)
	// Writes after compacting go to the new file and survive a reopen.
	mustCreateRun(t, d, runOf("run-new", "w2"), time.Hour)
	mustSaveStep(t, d, "run-new", "w2", stepOf(99, 1))
	want = journalSnapshot(t, d)
	closeDriver(t, d)
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("compaction left journal.json.compact behind: %v", err)
	}
	d = open(t, dir)
	sameJournal(t, "after compaction and reopen", journalSnapshot(t, d), want)
	checkJournalExtras(t, "after compaction and reopen", d, claims, 30)
}

func TestJournalCompactionDuringConcurrentSaves(t *testing.T) {
	// Compaction swaps journal.json under group commit: every SaveStep that
	// returned must be on disk afterwards.
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir, WithCompactAfter(50))
	ctx := context.Background()
	const workers, each = 8, 30
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("run-%d", w)
			mustCreateRun(t, d, runOf(id, "w"), time.Hour)
			for seq := 1; seq <= each; seq++ {
				for range 10 { // dead records, so the journal compacts
					if err := d.RenewRun(ctx, id, "w", time.Hour); err != nil {
						t.Error(err)
						return
					}
				}
				mustSaveStep(t, d, id, "w", stepOf(w, seq))
			}
		})
	}
	wg.Wait()
	d.jr.mu.Lock()
	compactions := d.jr.compactions
	d.jr.mu.Unlock()
	if compactions == 0 {
		t.Errorf("no compaction happened")
	}
	want := journalSnapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameJournal(t, "after reopen", journalSnapshot(t, d), want)
	for _, r := range want.runs {
		if len(r.steps) != each {
			t.Errorf("%s has %d steps, want %d", r.run.ID, len(r.steps), each)
		}
	}
}

func TestSaveStepIsOneDurableAppend(t *testing.T) {
	// The cost of a step: one record appended (the file is never rewritten)
	// and one fsync, however many steps and runs there are.
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, journalName)
	d := open(t, dir)
	for i := range 50 {
		mustCreateRun(t, d, runOf(fmt.Sprintf("run-%02d", i), "w"), time.Hour)
	}
	for seq := 1; seq <= 20; seq++ {
		for i := range 50 {
			id := fmt.Sprintf("run-%02d", i)
			size := fileSize(t, path)
			d.jr.commit.mu.Lock()
			syncs := d.jr.commit.syncs
			d.jr.commit.mu.Unlock()
			s := stepOf(i, seq)
			mustSaveStep(t, d, id, "w", s)
			var chain uint32
			line, err := appendJRecord(nil, stepRecord(id, &s, now()), &chain)
			if err != nil {
				t.Fatal(err)
			}
			// The line's length, give or take the digits of its timestamp.
			if grew := fileSize(t, path) - size; grew < int64(len(line))-8 || grew > int64(len(line))+8 {
				t.Fatalf("SaveStep %d of %s grew journal.json by %d bytes, want one record of ~%d", seq, id, grew, len(line))
			}
			d.jr.commit.mu.Lock()
			syncs = d.jr.commit.syncs - syncs
			d.jr.commit.mu.Unlock()
			if syncs != 1 {
				t.Fatalf("SaveStep %d of %s took %d fsyncs, want 1", seq, id, syncs)
			}
		}
	}
}

func TestConcurrentSaveStepsAreAllDurable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	const n = 100
	for i := range n {
		mustCreateRun(t, d, runOf(fmt.Sprintf("run-%03d", i), "w"), time.Hour)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for seq := 1; seq <= 3; seq++ {
				mustSaveStep(t, d, fmt.Sprintf("run-%03d", i), "w", stepOf(i, seq))
			}
		})
	}
	wg.Wait()
	d.jr.commit.mu.Lock()
	syncs, synced := d.jr.commit.syncs, d.jr.commit.synced
	d.jr.commit.mu.Unlock()
	d.jr.mu.Lock()
	seq := d.jr.seq
	d.jr.mu.Unlock()
	if synced < seq {
		t.Errorf("after every SaveStep returned, synced = %d < last write %d", synced, seq)
	}
	t.Logf("%d concurrent SaveSteps took %d fsyncs", 3*n, syncs)
	want := journalSnapshot(t, d)
	closeDriver(t, d)
	d = open(t, dir)
	sameJournal(t, "after reopen", journalSnapshot(t, d), want)
}

func TestRetentionDropsOldFinishedRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	d := open(t, dir)
	for _, id := range []string{"run-done", "run-failed", "run-held", "run-asleep"} {
		r := runOf(id, "w1")
		r.DedupeKey = "evt_" + id
		mustCreateRun(t, d, r, time.Hour)
		mustSaveStep(t, d, id, "w1", stepOf(1, 1))
		if _, err := d.ClaimKey(ctx, "order:"+id, id); err != nil {
			t.Fatal(err)
		}
	}
	mustFinishRun(t, d, "run-done", "w1", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}})
	mustFinishRun(t, d, "run-failed", "w1", driver.Finish{Status: driver.RunFailed, Result: &driver.Response{Status: 500}, Error: "boom"})
	mustFinishRun(t, d, "run-asleep", "w1", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(time.Hour)})
	closeDriver(t, d)
	time.Sleep(60 * time.Millisecond)

	// At Open, with a retention the finished runs have passed.
	d = open(t, dir, WithRetention(30*time.Millisecond))
	kept := []string{"run-asleep", "run-held"}
	check := func(what string) {
		t.Helper()
		runs, err := d.ListRuns(ctx, driver.RunFilter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, kept) {
			t.Fatalf("%s: runs %v, want %v", what, ids, kept)
		}
	}
	check("after Open")
	for _, id := range []string{"run-done", "run-failed"} {
		// Its claim and its dedupe key went with it.
		if got, err := d.ClaimKey(ctx, "order:"+id, "run-held"); err != nil || got != "run-held" {
			t.Errorf("ClaimKey of the dropped %s's key = %q, %v; want it free for run-held", id, got, err)
		}
		r := runOf(id+"-again", "")
		r.DedupeKey = "evt_" + id
		mustCreateRun(t, d, r, 0)
		kept = append(kept, id+"-again")
	}
	if got, err := d.ClaimKey(ctx, "order:run-asleep", "run-held"); err != nil || got != "run-asleep" {
		t.Errorf("ClaimKey of the sleeping run's key = %q, %v; want it still held", got, err)
	}
	// While running: the next write after the retention passes drops them.
	mustCreateRun(t, d, runOf("run-late", "w2"), time.Hour)
	mustFinishRun(t, d, "run-late", "w2", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}})
	time.Sleep(60 * time.Millisecond)
	mustCreateRun(t, d, runOf("run-next", ""), 0)
	kept = append(kept, "run-next")
	slices.Sort(kept)
	check("after a write past the retention")
	closeDriver(t, d)
	d = open(t, dir)
	check("after reopen")
}

func TestJournalRefusesStringsThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	d := open(t, t.TempDir())
	ctx := context.Background()
	bad := "run-\xff"
	if _, err := d.CreateRun(ctx, runOf(bad, ""), 0); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("CreateRun with an ID that is not UTF-8: err = %v, want a UTF-8 error", err)
	}
	r := runOf("run-1", "w1")
	r.DedupeKey = "evt_\xfe"
	if _, err := d.CreateRun(ctx, r, 0); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("CreateRun with a dedupe key that is not UTF-8: err = %v, want a UTF-8 error", err)
	}
	mustCreateRun(t, d, runOf("run-1", "w1"), time.Hour)
	s := stepOf(1, 1)
	s.Name = "step \xff"
	if err := d.SaveStep(ctx, "run-1", "w1", s); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("SaveStep with a name that is not UTF-8: err = %v, want a UTF-8 error", err)
	}
	if _, err := d.ClaimKey(ctx, "order:\xff", "run-1"); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("ClaimKey with a key that is not UTF-8: err = %v, want a UTF-8 error", err)
	}
	// An error message is for people: stored with U+FFFD, the same before
	// and after a restart.
	mustFinishRun(t, d, "run-1", "w1", driver.Finish{Status: driver.RunFailed, Error: "bad byte \xff"})
	run, _, err := d.GetRun(ctx, "run-1")
	if err != nil || run.Error != "bad byte \uFFFD" {
		t.Errorf("stored Error = %q, %v; want the bad byte replaced", run.Error, err)
	}
	if runs := journalSnapshot(t, d).runs; len(runs) != 1 {
		t.Errorf("refused calls stored %d runs", len(runs))
	}
}

func TestClaimKeyOfUnknownRunIsErrNotFound(t *testing.T) {
	t.Parallel()
	d := open(t, t.TempDir())
	if _, err := d.ClaimKey(context.Background(), "order:1", "run-missing"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("ClaimKey for a run that does not exist: err = %v, want ErrNotFound", err)
	}
}

func TestJournalFileSitsBesideTheRows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := open(t, dir)
	mustClaim(t, d, claimReq(key(1), "o"))
	mustCreateRun(t, d, runOf("run-1", "w"), time.Hour)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{lockName, checkpointName, logName, journalName}; !sameSet(names, want) {
		t.Errorf("folder holds %v, want %v", names, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(`{"crc":"`)) || !bytes.Contains(data, []byte(`"rec":{"op":"format","v":2,"gen":"`)) ||
		!bytes.Contains(data, []byte(`"op":"run","id":"run-1"`)) {
		t.Errorf("journal.json does not hold the expected records:\n%s", data)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestJournalReadsAnOlderOkesStepStarts opens a journal.json that an oke
// with StartStep wrote — start records, and a compacted run record with
// "starts" — and finds each run's NextAttempts in them: the count of the
// step after the last saved one. A lease record this oke writes (with
// "next") supersedes them.
func TestJournalReadsAnOlderOkesStepStarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := func(id string, starts ...jstart) *jrecord {
		return &jrecord{Op: jopRun, ID: id, Flow: "payments.refund", Tenant: "acme", Principal: "user:42",
			Status: "running", Owner: "old", LeaseUntil: at.Add(time.Second), Attempts: 1, CreatedAt: at, At: at,
			Starts: starts}
	}
	step := func(id string, seq int) *jrecord { // as SaveStep wrote it
		return &jrecord{Op: jopStep, ID: id, Seq: seq, Name: fmt.Sprintf("step %d", seq), Out: []byte(`1`),
			Attempts: 1, At: at}
	}
	compacted := func(id string, seq int) *jrecord { // as compaction wrote it
		r := step(id, seq)
		r.At = time.Time{}
		return r
	}
	start := func(id string, seq, n int) *jrecord {
		return &jrecord{Op: jopStart, ID: id, Seq: seq, Name: fmt.Sprintf("step %d", seq), Attempts: n}
	}
	lease := func(id string, attempts, next int) *jrecord {
		return &jrecord{Op: jopLease, ID: id, Owner: "old", LeaseUntil: at.Add(time.Second), Attempts: attempts,
			Next: next, At: at}
	}
	recs := []*jrecord{{Op: jopFormat, V: 1}, // an older oke's: no generation, unchained
		// Step 1 saved, step 2 begun by two executions (a takeover between).
		run("run-live"), start("run-live", 1, 1), step("run-live", 1), start("run-live", 2, 1),
		lease("run-live", 2, 0), start("run-live", 2, 2),
		// Compacted: the run record carries step 3's count, its steps follow.
		run("run-compacted", jstart{Seq: 3, Name: "step 3", Attempts: 4}), compacted("run-compacted", 1),
		compacted("run-compacted", 2),
		// Saved step 1 and never began step 2: this oke counts the saver.
		run("run-between"), start("run-between", 1, 1), step("run-between", 1),
		// An old count, then a pick-up by this oke: its "next" wins.
		run("run-mixed"), start("run-mixed", 1, 3), lease("run-mixed", 2, 5),
	}
	var buf []byte
	for _, r := range recs {
		var err error
		if buf, err = appendJRecord(buf, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, journalName), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, round := range []string{"opened", "compacted and reopened"} {
		d := open(t, dir)
		for _, c := range []struct {
			id   string
			next int
		}{{"run-live", 2}, {"run-compacted", 4}, {"run-between", 1}, {"run-mixed", 5}} {
			r, _, err := d.GetRun(context.Background(), c.id)
			if err != nil || r.NextAttempts != c.next {
				t.Errorf("%s: %s: NextAttempts %d, %v; want %d", round, c.id, r.NextAttempts, err, c.next)
			}
		}
		if err := d.Compact(); err != nil {
			t.Fatal(err)
		}
		closeDriver(t, d)
	}
	d := open(t, dir)
	defer closeDriver(t, d)
	r, _, err := d.AcquireRun(context.Background(), "run-live", "new", time.Hour)
	if err != nil || r.NextAttempts != 3 {
		t.Errorf("AcquireRun of run-live after its lease lapsed: NextAttempts %d, %v; want 3", r.NextAttempts, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"op":"start"`)) || bytes.Contains(data, []byte(`"starts"`)) {
		t.Errorf("the compacted journal still holds start records or starts:\n%s", data)
	}
}
