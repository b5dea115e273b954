package drivertest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// The rules of the operator's primitives: ListRuns' console filters
// (tenant, time range, replays, newest first), and the optional
// driver.RunCanceller, driver.RowDeleter and driver.RowFinder. A driver
// without an optional interface skips its rules, saying so; oke's three
// drivers implement all of them.
func init() {
	journalRules = append(journalRules,
		journalRule{"ListRunsFiltersByTenantReplayOfAndCreatedRange", testListRunsConsoleFilters},
		journalRule{"ListRunsDescendingPagesWithBeforeCursor", testListRunsDesc},
		journalRule{"CancelRunFailsASleepingOrWaitingRunWithTheResultGiven", testCancelRunParked},
		journalRule{"CancelRunFencesOutAHolderWhoseLeaseLapsed", testCancelRunLapsed},
		journalRule{"CancelRunRefusesALiveLeaseAFinishedRunAndAMissingOne", testCancelRunRefuses},
		journalRule{"CancelRunAndAcquireRunRaceWithExactlyOneWinner", testCancelRunRace},
	)
	rowRules = append(rowRules,
		rowRule{"DeleteRemovesARowInAnyStateAndFencesItsHolder", testDeleteRow},
		rowRule{"DeleteIdleLeavesARowALiveLeaseHoldsAndDeletesTheRest", testDeleteIdle},
		rowRule{"FindRowsFindsAKeyInEveryScopeUnlessNarrowed", testFindRows},
	)
}

func canceller(t *testing.T, j journal) driver.RunCanceller {
	t.Helper()
	c, ok := j.(driver.RunCanceller)
	if !ok {
		t.Skipf("%T does not implement the optional driver.RunCanceller", j)
	}
	return c
}

// cancelResult is the result CancelRun is given: what oke's App.Cancel
// stores (a 409 RunCancelled envelope).
var cancelResult = driver.Response{Status: 409, ContentType: "application/json",
	Body: []byte(`{"error":{"code":"RunCancelled","message":"cancelled"}}`)}

func listRunIDs(t *testing.T, j journal, f driver.RunFilter, limit int) []string {
	t.Helper()
	runs, err := j.ListRuns(t.Context(), f, limit)
	if err != nil {
		t.Fatalf("ListRuns(%+v, %d): %v", f, limit, err)
	}
	return listIDs(runs)
}

func testListRunsConsoleFilters(t *testing.T, j journal) {
	// Two tenants, one original run replayed twice. Created one after
	// another: their CreatedAt are the store's, non-decreasing.
	type spec struct{ id, tenant, replayOf string }
	specs := []spec{
		{"run-1", "acme", ""},
		{"run-2", "globex", ""},
		{"run-3", "acme", "run-1"},
		{"run-4", "globex", ""},
		{"run-5", "acme", "run-1"},
	}
	created := map[string]time.Time{}
	var runs []driver.Run
	for _, s := range specs {
		r := newRun(s.id)
		r.Tenant, r.ReplayOf = s.tenant, s.replayOf
		got := createRun(t, j, r, 0)
		created[s.id] = got.CreatedAt
		runs = append(runs, got)
	}
	// want applies the filter's definition to the runs as created.
	want := func(f driver.RunFilter) []string {
		var ids []string
		for _, r := range runs {
			if f.Match(&r) && f.InRange(r.ID) {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	mid := created["run-3"]
	for _, c := range []struct {
		name   string
		filter driver.RunFilter
		fixed  []string // the answer, when it does not depend on the clock
	}{
		{"tenant", driver.RunFilter{Tenant: "acme"}, []string{"run-1", "run-3", "run-5"}},
		{"tenant, after run-1", driver.RunFilter{Tenant: "acme", After: "run-1"}, []string{"run-3", "run-5"}},
		{"unknown tenant", driver.RunFilter{Tenant: "initech"}, nil},
		{"replays of run-1", driver.RunFilter{ReplayOf: "run-1"}, []string{"run-3", "run-5"}},
		{"replays of run-1, tenant globex", driver.RunFilter{ReplayOf: "run-1", Tenant: "globex"}, nil},
		{"created from run-3's time", driver.RunFilter{CreatedAfter: mid}, nil},
		{"created before run-3's time", driver.RunFilter{CreatedBefore: mid}, nil},
		{"created in [run-2, run-4)", driver.RunFilter{CreatedAfter: created["run-2"], CreatedBefore: created["run-4"]}, nil},
		{"created in an hour ago", driver.RunFilter{CreatedBefore: mid.Add(-time.Hour)}, nil},
		{"created from an hour ago", driver.RunFilter{CreatedAfter: mid.Add(-time.Hour)},
			[]string{"run-1", "run-2", "run-3", "run-4", "run-5"}},
		{"created before an hour on", driver.RunFilter{CreatedBefore: mid.Add(time.Hour), Tenant: "globex"},
			[]string{"run-2", "run-4"}},
	} {
		w := c.fixed
		if w == nil {
			w = want(c.filter)
		}
		if got := listRunIDs(t, j, c.filter, many); !slices.Equal(got, w) {
			t.Errorf("ListRuns %s (%+v) = %v, want %v", c.name, c.filter, got, w)
		}
	}
	// The time range's ends: run-3 is in [its CreatedAt, …) and not in
	// [… , its CreatedAt).
	if got := listRunIDs(t, j, driver.RunFilter{CreatedAfter: mid}, many); !slices.Contains(got, "run-3") {
		t.Errorf("ListRuns CreatedAfter = run-3's CreatedAt (%v) = %v: want run-3 (the range includes its start)", mid, got)
	}
	if got := listRunIDs(t, j, driver.RunFilter{CreatedBefore: mid}, many); slices.Contains(got, "run-3") {
		t.Errorf("ListRuns CreatedBefore = run-3's CreatedAt (%v) = %v: want no run-3 (the range excludes its end)", mid, got)
	}
}

func testListRunsDesc(t *testing.T, j journal) {
	for _, id := range []string{"run-03", "run-01", "run-05", "run-02", "run-04"} {
		r := newRun(id)
		if id == "run-02" || id == "run-04" {
			r.Flow = "b.flow"
		}
		createRun(t, j, r, 0)
	}
	for _, c := range []struct {
		name   string
		filter driver.RunFilter
		limit  int
		want   []string
	}{
		{"all, newest first", driver.RunFilter{Desc: true}, many, []string{"run-05", "run-04", "run-03", "run-02", "run-01"}},
		{"first page", driver.RunFilter{Desc: true}, 2, []string{"run-05", "run-04"}},
		{"next page", driver.RunFilter{Desc: true, Before: "run-04"}, 2, []string{"run-03", "run-02"}},
		{"last page", driver.RunFilter{Desc: true, Before: "run-02"}, 2, []string{"run-01"}},
		{"before a missing ID", driver.RunFilter{Desc: true, Before: "run-035"}, many, []string{"run-03", "run-02", "run-01"}},
		{"between cursors", driver.RunFilter{Desc: true, After: "run-01", Before: "run-05"}, many, []string{"run-04", "run-03", "run-02"}},
		{"ascending between cursors", driver.RunFilter{After: "run-01", Before: "run-05"}, many, []string{"run-02", "run-03", "run-04"}},
		{"flow, newest first", driver.RunFilter{Desc: true, Flow: "b.flow"}, many, []string{"run-04", "run-02"}},
		{"flow, next page", driver.RunFilter{Desc: true, Flow: "b.flow", Before: "run-04"}, 1, []string{"run-02"}},
	} {
		if got := listRunIDs(t, j, c.filter, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("ListRuns %s (%+v, limit %d) = %v, want %v", c.name, c.filter, c.limit, got, c.want)
		}
	}
}

// wantCancelled checks that run id is failed with cancelResult and msg, is
// not due, and that got (what CancelRun returned) says so too.
func wantCancelled(t *testing.T, j journal, id string, got driver.Run, msg string) {
	t.Helper()
	stored, _ := getRun(t, j, id)
	for what, r := range map[string]driver.Run{"CancelRun's run": got, "GetRun after CancelRun": stored} {
		if r.ID != id || r.Status != driver.RunFailed || r.Owner != "" || r.Error != msg {
			t.Errorf("%s: ID %q, Status %v, Owner %q, Error %q; want %q, failed, no owner, %q", what, r.ID, r.Status, r.Owner, r.Error, id, msg)
		}
		if s := diffResponse(r.Result, &cancelResult); s != "" {
			t.Errorf("%s: Result %s", what, s)
		}
	}
	wantNotDue(t, j, id, "a cancelled run")
}

func testCancelRunParked(t *testing.T, j journal) {
	c := canceller(t, j)
	// Sleeping, with a saved step.
	createHeld(t, j, "run-sleeping", "worker-1", hold)
	saveStep(t, j, "run-sleeping", "worker-1", stepN(1))
	finishRun(t, j, "run-sleeping", "worker-1", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(hold)})
	// Waiting: enqueued, due now; released for a retry later.
	createWaking(t, j, "run-due", time.Time{})
	createHeld(t, j, "run-retry", "worker-1", hold)
	finishRun(t, j, "run-retry", "worker-1", driver.Finish{Status: driver.RunRunning, WakeAt: time.Now().Add(hold)})
	for _, id := range []string{"run-sleeping", "run-due", "run-retry"} {
		got, err := c.CancelRun(t.Context(), id, cancelResult, "cancelled by an operator")
		if err != nil {
			t.Fatalf("CancelRun(%q): %v", id, err)
		}
		wantCancelled(t, j, id, got, "cancelled by an operator")
	}
	if _, steps := getRun(t, j, "run-sleeping"); len(steps) != 1 {
		t.Errorf("a cancelled run's steps: %d, want its 1 saved step kept", len(steps))
	}
	if due := dueRuns(t, j, 0); len(due) != 0 {
		t.Errorf("DueRuns after cancelling every run = %v, want none", due)
	}
}

func testCancelRunLapsed(t *testing.T, j journal) {
	c := canceller(t, j)
	lapsedRun(t, j, "run-1", "worker-dead", 1)
	got, err := c.CancelRun(t.Context(), "run-1", cancelResult, "cancelled")
	if err != nil {
		t.Fatalf("CancelRun of a run whose holder's lease lapsed: %v", err)
	}
	wantCancelled(t, j, "run-1", got, "cancelled")
	// The holder comes back: it no longer owns the run.
	wantErr(t, "SaveStep by the lapsed holder of a cancelled run", j.SaveStep(t.Context(), "run-1", "worker-dead", stepN(2)), driver.ErrNotOwner)
	wantErr(t, "RenewRun by the lapsed holder of a cancelled run", j.RenewRun(t.Context(), "run-1", "worker-dead", hold), driver.ErrNotOwner)
	wantErr(t, "FinishRun by the lapsed holder of a cancelled run", j.FinishRun(t.Context(), "run-1", "worker-dead",
		driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}}), driver.ErrNotOwner)
	wantCancelled(t, j, "run-1", got, "cancelled")
}

func testCancelRunRefuses(t *testing.T, j journal) {
	c := canceller(t, j)
	held := createHeld(t, j, "run-held", "worker-1", hold)
	_, err := c.CancelRun(t.Context(), "run-held", cancelResult, "cancelled")
	wantErr(t, "CancelRun of a run a live lease holds", err, driver.ErrRunHeld)
	now, _ := getRun(t, j, "run-held")
	sameRunFields(t, "a held run after a refused CancelRun", now, held)
	saveStep(t, j, "run-held", "worker-1", stepN(1)) // the holder goes on

	createHeld(t, j, "run-done", "worker-1", hold)
	res := &driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
	finishRun(t, j, "run-done", "worker-1", driver.Finish{Status: driver.RunCompleted, Result: res})
	_, err = c.CancelRun(t.Context(), "run-done", cancelResult, "cancelled")
	wantErr(t, "CancelRun of a completed run", err, driver.ErrRunFinished)
	done, _ := getRun(t, j, "run-done")
	if done.Status != driver.RunCompleted || diffResponse(done.Result, res) != "" {
		t.Errorf("a completed run after a refused CancelRun: %v, result %s", done.Status, diffResponse(done.Result, res))
	}
	_, err = c.CancelRun(t.Context(), "run-missing", cancelResult, "cancelled")
	wantErr(t, "CancelRun of a missing run", err, driver.ErrNotFound)
}

func testCancelRunRace(t *testing.T, j journal) {
	c := canceller(t, j)
	for i := range 10 {
		id := "run-race-" + string(rune('a'+i))
		createWaking(t, j, id, time.Time{})
		var (
			wg                sync.WaitGroup
			cancelErr, acqErr error
			start             = make(chan struct{})
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, cancelErr = c.CancelRun(t.Context(), id, cancelResult, "cancelled")
		}()
		go func() {
			defer wg.Done()
			<-start
			_, _, acqErr = j.AcquireRun(t.Context(), id, "worker-1", hold)
		}()
		close(start)
		wg.Wait()
		run, _ := getRun(t, j, id)
		switch {
		case cancelErr == nil && errors.Is(acqErr, driver.ErrNotDue):
			if run.Status != driver.RunFailed {
				t.Errorf("%s: the cancel won, but the run is %v", id, run.Status)
			}
		case acqErr == nil && errors.Is(cancelErr, driver.ErrRunHeld):
			if run.Status != driver.RunRunning || run.Owner != "worker-1" {
				t.Errorf("%s: the acquire won, but the run is %v owned by %q", id, run.Status, run.Owner)
			}
		default:
			t.Errorf("%s: CancelRun: %v, AcquireRun: %v; want exactly one to win (the other ErrRunHeld or ErrNotDue)", id, cancelErr, acqErr)
		}
	}
}

func deleter(t *testing.T, d driver.Driver) driver.RowDeleter {
	t.Helper()
	x, ok := d.(driver.RowDeleter)
	if !ok {
		t.Skipf("%T does not implement the optional driver.RowDeleter", d)
	}
	return x
}

func testDeleteRow(t *testing.T, d driver.Driver) {
	del := deleter(t, d)
	running, done := testKey("running"), testKey("done")
	mustClaim(t, d, req(running, fpA, "owner-1", hold, day))
	mustClaim(t, d, req(done, fpA, "owner-2", hold, day))
	complete(t, d, done, "owner-2", sampleResponse(), day)
	for _, k := range []driver.Key{running, done} {
		if err := del.Delete(t.Context(), k); err != nil {
			t.Fatalf("Delete(%q): %v", k.Key, err)
		}
		_, err := d.Get(t.Context(), k)
		wantErr(t, "Get after Delete", err, driver.ErrNotFound)
	}
	wantErr(t, "Complete by the holder of a deleted row", d.Complete(t.Context(), running, "owner-1", sampleResponse(), day), driver.ErrNotOwner)
	wantErr(t, "Renew by the holder of a deleted row", d.Renew(t.Context(), running, "owner-1", hold), driver.ErrNotOwner)
	wantErr(t, "Delete of a missing row", del.Delete(t.Context(), testKey("missing")), driver.ErrNotFound)
	// The key is free: a new claim, even with another fingerprint, runs.
	if res := mustClaim(t, d, req(done, fpB, "owner-3", hold, day)); res.Previous != nil {
		t.Errorf("claim after Delete: Previous = %+v, want none (the row is gone)", res.Previous)
	}
	if rows, err := d.List(t.Context(), driver.Key{}, 0); err != nil || len(rows) != 1 {
		t.Errorf("List after deleting two rows and claiming one: %d rows, %v; want 1", len(rows), err)
	}
}

// testDeleteIdle: DeleteIdle deletes nothing of a row a live lease holds
// (held, the row as it is; its holder completes it after), and deletes a
// completed row and a running one whose lease lapsed.
func testDeleteIdle(t *testing.T, d driver.Driver) {
	x, ok := d.(driver.IdleRowDeleter)
	if !ok {
		t.Skipf("%T does not implement the optional driver.IdleRowDeleter", d)
	}
	running, done, lapsed := testKey("running"), testKey("done"), testKey("lapsed")
	mustClaim(t, d, req(running, fpA, "owner-1", hold, day))
	mustClaim(t, d, req(done, fpA, "owner-2", hold, day))
	complete(t, d, done, "owner-2", sampleResponse(), day)
	mustClaim(t, d, req(lapsed, fpA, "owner-3", short, day))
	time.Sleep(after)

	row, held, err := x.DeleteIdle(t.Context(), running)
	if err != nil || !held || row.Owner != "owner-1" || row.State != driver.Running {
		t.Fatalf("DeleteIdle of a row a live lease holds: %+v held %v, %v; want the row, held", row, held, err)
	}
	complete(t, d, running, "owner-1", sampleResponse(), day) // its holder still owns it
	for _, k := range []driver.Key{done, lapsed} {
		if _, held, err := x.DeleteIdle(t.Context(), k); err != nil || held {
			t.Fatalf("DeleteIdle(%q): held %v, %v; want deleted", k.Key, held, err)
		}
		_, err := d.Get(t.Context(), k)
		wantErr(t, "Get after DeleteIdle", err, driver.ErrNotFound)
	}
	wantErr(t, "Renew by the holder of a deleted lapsed row", d.Renew(t.Context(), lapsed, "owner-3", hold), driver.ErrNotOwner)
	_, _, err = x.DeleteIdle(t.Context(), testKey("missing"))
	wantErr(t, "DeleteIdle of a missing row", err, driver.ErrNotFound)
}

func testFindRows(t *testing.T, d driver.Driver) {
	f, ok := d.(driver.RowFinder)
	if !ok {
		t.Skipf("%T does not implement the optional driver.RowFinder", d)
	}
	const key = "idem-key-0000-shared"
	scopes := []driver.Key{
		{Tenant: "globex", Principal: "user:1", Flow: "payments.charge", Key: key},
		{Tenant: "acme", Principal: "user:2", Flow: "payments.refund", Key: key},
		{Tenant: "acme", Principal: "user:1", Flow: "payments.charge", Key: key},
		{Tenant: "acme", Principal: "user:1", Flow: "payments.charge", Key: key + "-other"},
	}
	for i, k := range scopes {
		ttl := day
		if i == 1 {
			ttl = short // expired by the look-up: still found
		}
		mustClaim(t, d, req(k, fpA, "owner", hold, ttl))
		complete(t, d, k, "owner", tracedResponse(), ttl)
	}
	time.Sleep(after)
	find := func(k driver.Key, limit int) []driver.Key {
		t.Helper()
		rows, err := f.FindRows(t.Context(), k, limit)
		if err != nil {
			t.Fatalf("FindRows(%+v): %v", k, err)
		}
		var keys []driver.Key
		for _, r := range rows {
			keys = append(keys, r.Key)
			if r.State != driver.Completed || diffResponse(r.Response, ptr(tracedResponse())) != "" {
				t.Errorf("FindRows(%+v): row %+v: state %v, response %s", k, r.Key, r.State, diffResponse(r.Response, ptr(tracedResponse())))
			}
		}
		return keys
	}
	for _, c := range []struct {
		name  string
		k     driver.Key
		limit int
		want  []driver.Key
	}{
		{"every scope, in key order", driver.Key{Key: key}, 0, []driver.Key{scopes[2], scopes[1], scopes[0]}},
		{"limit", driver.Key{Key: key}, 2, []driver.Key{scopes[2], scopes[1]}},
		{"tenant", driver.Key{Tenant: "acme", Key: key}, 0, []driver.Key{scopes[2], scopes[1]}},
		{"principal", driver.Key{Principal: "user:1", Key: key}, 0, []driver.Key{scopes[2], scopes[0]}},
		{"flow", driver.Key{Flow: "payments.refund", Key: key}, 0, []driver.Key{scopes[1]}},
		{"whole scope", scopes[0], 0, []driver.Key{scopes[0]}},
		{"no such key", driver.Key{Key: "idem-key-0000-missing"}, 0, nil},
	} {
		if got := find(c.k, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("FindRows %s (%+v, limit %d) = %v, want %v", c.name, c.k, c.limit, got, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
