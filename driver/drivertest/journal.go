package drivertest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// RunJournal runs the rules of the driver.Journal contract (runs, saved
// steps, run leases, parking, due runs, business-key claims), each a parallel
// subtest named after its rule. Run calls it, under "Journal", for every
// driver that implements driver.Journal; newDriver's drivers must.
func RunJournal(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	for _, r := range journalRules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			d := newDriver(t)
			t.Cleanup(func() { _ = d.Close() })
			j, ok := d.(journal)
			if !ok {
				t.Fatalf("%T does not implement driver.Journal", d)
			}
			r.test(t, j)
		})
	}
}

// journal is the driver under test, seen as both contracts.
type journal interface {
	driver.Driver
	driver.Journal
}

type journalRule struct {
	name string
	test func(t *testing.T, j journal)
}

// journalRules is one row per rule of driver.Journal's doc and of DESIGN.md
// section 4 that the store carries.
var journalRules = []journalRule{
	{"CreateRunWithOwnerIsHeldWithOneAttempt", testCreateRunOwned},
	{"CreateRunWithoutOwnerIsDueAtWakeAt", testCreateRunUnowned},
	{"CreateRunKeepsEveryField", testCreateRunFields},
	{"CreateRunRefusesATakenID", testCreateRunTakenID},
	{"CreateRunWithTakenDedupeKeyReturnsExistingRun", testCreateRunDedupe},
	{"CreateRunDedupeIsAtomicUnderConcurrency", testCreateRunDedupeConcurrent},
	{"GetRunReturnsStepsInOrder", testGetRunSteps},
	{"GetRunOfMissingRunIsErrNotFound", testGetRunMissing},
	{"ListRunsIsInIDOrderWithCursorFiltersAndLimit", testListRuns},
	{"ListRunsCountsSavedSteps", testListRunsSteps},
	{"AcquireRunTakesDueUnownedRun", testAcquireUnowned},
	{"AcquireRunRefusesLiveLease", testAcquireLiveLease},
	{"AcquireRunRefusesRunParkedUntilLater", testAcquireParked},
	{"AcquireRunRefusesFinishedRun", testAcquireFinished},
	{"AcquireRunOfMissingRunIsErrNotFound", testAcquireMissing},
	{"AcquireRunTakesLapsedRunFromDeadOwner", testAcquireLapsed},
	{"AcquireRunIsAtomicUnderConcurrency", testAcquireConcurrent},
	{"TakeoverOfLapsedRunIsAtomicUnderConcurrency", testTakeoverRunConcurrent},
	{"StaleOwnerIsFencedAfterTakeover", testStaleRunOwner},
	{"FencedCallsNeedTheCurrentOwner", testRunNonOwner},
	{"RenewRunExtendsLease", testRenewRun},
	{"NextAttemptsIsOneForARunCreatedHeldAndZeroForOneEnqueued", testNextAttemptsCreate},
	{"SaveStepResetsNextAttemptsToOne", testNextAttemptsSave},
	{"AcquireRunAfterALapseOrAReleaseCountsAnotherAttempt", testNextAttemptsTakeover},
	{"AcquireRunAfterASleepCountsNoAttempt", testNextAttemptsSleep},
	{"SaveStepMustBeTheNextInOrder", testSaveStepOrder},
	{"SaveStepKeepsResultFailureAndAttemptsExactly", testSaveStepExact},
	{"FinishRunCompletedStoresResultAndClearsOwner", testFinishCompleted},
	{"FinishRunFailedStoresResultAndError", testFinishFailed},
	{"FinishRunSleepingParksUntilWakeAt", testFinishSleeping},
	{"FinishRunRunningReleasesForRetryAtWakeAt", testFinishRelease},
	{"DueRunsListsExactlyTheDueRunsLongestDueFirst", testDueRuns},
	{"DueRunsHonoursLimitAndZeroIsNoLimit", testDueRunsLimit},
	{"DueRunsListsOnlyRunsOfTheGivenFlows", testDueRunsFlows},
	{"ClaimKeyFirstRunWins", testClaimKey},
	{"ClaimKeyIsAtomicUnderConcurrency", testClaimKeyConcurrent},
	{"RunsAndStepsShareNoMemoryWithCallers", testRunCopies},
	{"CloseMakesJournalCallsFailUnavailable", testJournalClose},
}

// --- fixtures ---------------------------------------------------------------

// racers is how many goroutines the concurrency rules start at once.
const racers = 50

// many is a limit larger than any rule's number of runs.
const many = 1000

// newRun is a run of a refund flow with no owner; set Owner to create it held.
func newRun(id string) driver.Run {
	return driver.Run{
		ID:        id,
		Flow:      "payments.refund",
		Input:     []byte(`{"chargeId":"ch_1"}`),
		Tenant:    "acme",
		Principal: "user:42",
	}
}

func createRun(t *testing.T, j journal, run driver.Run, lease time.Duration) driver.Run {
	t.Helper()
	got, err := j.CreateRun(t.Context(), run, lease)
	if err != nil {
		t.Fatalf("CreateRun(%q, owner %q): %v", run.ID, run.Owner, err)
	}
	return got
}

// createHeld creates run id held by owner for lease.
func createHeld(t *testing.T, j journal, id, owner string, lease time.Duration) driver.Run {
	t.Helper()
	r := newRun(id)
	r.Owner = owner
	return createRun(t, j, r, lease)
}

// createWaking creates run id unowned, due at wake (zero: now).
func createWaking(t *testing.T, j journal, id string, wake time.Time) driver.Run {
	t.Helper()
	r := newRun(id)
	r.WakeAt = wake
	return createRun(t, j, r, 0)
}

func getRun(t *testing.T, j journal, id string) (driver.Run, []driver.Step) {
	t.Helper()
	run, steps, err := j.GetRun(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRun(%q): %v", id, err)
	}
	return run, steps
}

func acquire(t *testing.T, j journal, id, owner string, lease time.Duration) (driver.Run, []driver.Step) {
	t.Helper()
	run, steps, err := j.AcquireRun(t.Context(), id, owner, lease)
	if err != nil {
		t.Fatalf("AcquireRun(%q, owner %q): %v", id, owner, err)
	}
	return run, steps
}

// stepN is step seq as a run would save it; the same seq gives the same step.
func stepN(seq int) driver.Step {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(seq) * time.Second)
	return driver.Step{
		Seq:        seq,
		Name:       fmt.Sprintf("step %d", seq),
		Result:     []byte(fmt.Sprintf(`{"n":%d}`, seq)),
		Attempts:   1,
		StartedAt:  t0,
		FinishedAt: t0.Add(10 * time.Millisecond),
	}
}

func saveStep(t *testing.T, j journal, id, owner string, s driver.Step) {
	t.Helper()
	if err := j.SaveStep(t.Context(), id, owner, s); err != nil {
		t.Fatalf("SaveStep(%q, owner %q, seq %d): %v", id, owner, s.Seq, err)
	}
}

func finishRun(t *testing.T, j journal, id, owner string, f driver.Finish) {
	t.Helper()
	if err := j.FinishRun(t.Context(), id, owner, f); err != nil {
		t.Fatalf("FinishRun(%q, owner %q, %v): %v", id, owner, f.Status, err)
	}
}

func dueRuns(t *testing.T, j journal, limit int) []string {
	t.Helper()
	ids, err := j.DueRuns(t.Context(), nil, limit)
	if err != nil {
		t.Fatalf("DueRuns(%d): %v", limit, err)
	}
	return ids
}

func isDue(t *testing.T, j journal, id string) bool {
	t.Helper()
	return slices.Contains(dueRuns(t, j, many), id)
}

// wantNotDue checks that run id cannot be acquired and is not listed as due.
func wantNotDue(t *testing.T, j journal, id, why string) {
	t.Helper()
	if isDue(t, j, id) {
		t.Errorf("%s: DueRuns lists %q, want it left out", why, id)
	}
	_, _, err := j.AcquireRun(t.Context(), id, "intruder", hold)
	wantErr(t, why+": AcquireRun", err, driver.ErrNotDue)
}

// wantDue checks that run id is listed as due (AcquireRun is left to the
// caller, since it changes the run).
func wantDue(t *testing.T, j journal, id, why string) {
	t.Helper()
	if !isDue(t, j, id) {
		t.Errorf("%s: DueRuns does not list %q (it lists %q)", why, id, dueRuns(t, j, many))
	}
}

func listIDs(runs []driver.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

// diffRunFields lists the fields a run was created with that got does not
// keep.
func diffRunFields(got, want driver.Run) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %q, want %q", field, g, w)) }
	for _, f := range []struct{ name, g, w string }{
		{"ID", got.ID, want.ID},
		{"Flow", got.Flow, want.Flow},
		{"Tenant", got.Tenant, want.Tenant},
		{"Principal", got.Principal, want.Principal},
		{"ReplayOf", got.ReplayOf, want.ReplayOf},
		{"Parent", got.Parent, want.Parent},
		{"Event", got.Event, want.Event},
		{"DedupeKey", got.DedupeKey, want.DedupeKey},
		{"Trace", got.Trace, want.Trace},
	} {
		if f.g != f.w {
			add(f.name, f.g, f.w)
		}
	}
	if !bytes.Equal(got.Input, want.Input) {
		add("Input", got.Input, want.Input)
	}
	if (got.IdemKey == nil) != (want.IdemKey == nil) || (got.IdemKey != nil && *got.IdemKey != *want.IdemKey) {
		d = append(d, fmt.Sprintf("IdemKey = %+v, want %+v", got.IdemKey, want.IdemKey))
	}
	return d
}

func sameRunFields(t *testing.T, what string, got, want driver.Run) {
	t.Helper()
	if d := diffRunFields(got, want); len(d) > 0 {
		t.Errorf("%s: run differs:\n\t%s", what, strings.Join(d, "\n\t"))
	}
}

// wantState checks where a run is in its life.
func wantState(t *testing.T, what string, got driver.Run, status driver.RunStatus, owner string, attempts int) {
	t.Helper()
	if got.Status != status || got.Owner != owner || got.Attempts != attempts {
		t.Errorf("%s: Status %v, Owner %q, Attempts %d; want %v, %q, %d",
			what, got.Status, got.Owner, got.Attempts, status, owner, attempts)
	}
}

// wantLease checks that a run's lease ends about lease after its last update.
func wantLease(t *testing.T, what string, got driver.Run, lease time.Duration) {
	t.Helper()
	if d := got.LeaseUntil.Sub(got.UpdatedAt); d < lease-slack || d > lease+time.Second {
		t.Errorf("%s: LeaseUntil %v is %v after UpdatedAt %v, want the lease %v", what, got.LeaseUntil, d, got.UpdatedAt, lease)
	}
}

// diffSteps says how got differs from want, or "".
func diffSteps(got, want []driver.Step) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d steps %v, want %d %v", len(got), stepNames(got), len(want), stepNames(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Name != w.Name || !bytes.Equal(g.Result, w.Result) ||
			!bytes.Equal(g.Failure, w.Failure) || g.Attempts != w.Attempts ||
			!near(g.StartedAt, w.StartedAt) || !near(g.FinishedAt, w.FinishedAt) {
			return fmt.Sprintf("step %d = {Seq %d, Name %q, Result %q, Failure %q, Attempts %d, %v–%v}, "+
				"want {Seq %d, Name %q, Result %q, Failure %q, Attempts %d, %v–%v}", i,
				g.Seq, g.Name, g.Result, g.Failure, g.Attempts, g.StartedAt, g.FinishedAt,
				w.Seq, w.Name, w.Result, w.Failure, w.Attempts, w.StartedAt, w.FinishedAt)
		}
	}
	return ""
}

func stepNames(steps []driver.Step) []string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = fmt.Sprintf("%d:%s", s.Seq, s.Name)
	}
	return names
}

func sameSteps(t *testing.T, what string, got, want []driver.Step) {
	t.Helper()
	if s := diffSteps(got, want); s != "" {
		t.Errorf("%s: %s", what, s)
	}
}

// lapse makes owner's lease on run id end: it renews it to a short lease
// and waits. (Creating the run with a short lease instead would race the
// owner's own calls against the lease on a loaded machine.)
func lapse(t *testing.T, j journal, id, owner string) {
	t.Helper()
	if err := j.RenewRun(t.Context(), id, owner, short); err != nil {
		t.Fatalf("RenewRun(%q, owner %q, %v): %v", id, owner, short, err)
	}
	time.Sleep(after)
}

// lapsedRun creates run id held by owner, saves steps, and lets owner's lease
// lapse, as when owner's process dies. It returns the saved steps.
func lapsedRun(t *testing.T, j journal, id, owner string, steps int) []driver.Step {
	t.Helper()
	createHeld(t, j, id, owner, hold)
	var saved []driver.Step
	for i := 1; i <= steps; i++ {
		s := stepN(i)
		saveStep(t, j, id, owner, s)
		saved = append(saved, s)
	}
	lapse(t, j, id, owner)
	return saved
}

// --- rules -----------------------------------------------------------------

func testCreateRunOwned(t *testing.T, j journal) {
	before := time.Now()
	want := newRun("run-owned")
	want.Owner = "worker-1"
	got := createRun(t, j, want, hold)
	sameRunFields(t, "CreateRun's run", got, want)
	wantState(t, "CreateRun with an owner", got, driver.RunRunning, "worker-1", 1)
	wantLease(t, "CreateRun with an owner", got, hold)
	if got.CreatedAt.Before(before.Add(-skew)) || got.CreatedAt.After(time.Now().Add(skew)) {
		t.Errorf("CreatedAt = %v, want the store's clock near %v", got.CreatedAt, before)
	}
	if got.UpdatedAt.Before(got.CreatedAt) {
		t.Errorf("UpdatedAt %v is before CreatedAt %v", got.UpdatedAt, got.CreatedAt)
	}
	if got.Result != nil || got.Error != "" {
		t.Errorf("new run has Result %v, Error %q; want none", got.Result, got.Error)
	}
	stored, steps := getRun(t, j, "run-owned")
	sameRunFields(t, "GetRun", stored, want)
	wantState(t, "GetRun", stored, driver.RunRunning, "worker-1", 1)
	if !near(stored.LeaseUntil, got.LeaseUntil) || !near(stored.CreatedAt, got.CreatedAt) {
		t.Errorf("GetRun: LeaseUntil %v, CreatedAt %v; CreateRun returned %v, %v",
			stored.LeaseUntil, stored.CreatedAt, got.LeaseUntil, got.CreatedAt)
	}
	if len(steps) != 0 {
		t.Errorf("new run has steps %v", stepNames(steps))
	}
	wantNotDue(t, j, "run-owned", "run held by its creator")
	if err := j.RenewRun(t.Context(), "run-owned", "worker-1", hold); err != nil {
		t.Errorf("RenewRun by the creating owner: %v", err)
	}
}

func testCreateRunUnowned(t *testing.T, j journal) {
	// Zero WakeAt: due now.
	now := createWaking(t, j, "run-now", time.Time{})
	wantState(t, "CreateRun without an owner", now, driver.RunRunning, "", 0)
	wantDue(t, j, "run-now", "unowned run with zero WakeAt")
	run, _ := acquire(t, j, "run-now", "worker-1", hold)
	wantState(t, "AcquireRun of the unowned run", run, driver.RunRunning, "worker-1", 1)

	// WakeAt ahead: not due before it.
	later := time.Now().Add(hold)
	created := createWaking(t, j, "run-later", later)
	wantState(t, "CreateRun without an owner, WakeAt ahead", created, driver.RunRunning, "", 0)
	if !near(created.WakeAt, later) {
		t.Errorf("WakeAt = %v, want %v", created.WakeAt, later)
	}
	wantNotDue(t, j, "run-later", "unowned run with WakeAt a minute ahead")

	// WakeAt reached: due.
	createWaking(t, j, "run-soon", time.Now().Add(short))
	time.Sleep(after)
	wantDue(t, j, "run-soon", "unowned run whose WakeAt has passed")
	run, _ = acquire(t, j, "run-soon", "worker-2", hold)
	wantState(t, "AcquireRun once WakeAt passed", run, driver.RunRunning, "worker-2", 1)
}

func testCreateRunFields(t *testing.T, j journal) {
	want := driver.Run{
		ID:        "run-fields",
		Flow:      "payments.refund",
		Input:     []byte("{ \"chargeId\": \"ch_\\u00e9 é\",\n  \"amount\": 500 }\n"),
		Tenant:    "globex",
		Principal: "apikey:7",
		ReplayOf:  "run-original",
		Parent:    "run-parent",
		Event:     "order.paid",
		DedupeKey: "evt_1",
		IdemKey:   &driver.Key{Tenant: "globex", Principal: "apikey:7", Flow: "payments.refund", Key: "idem-key-0000-fields"},
		Trace:     sampleTrace,
	}
	got := createRun(t, j, want, 0)
	sameRunFields(t, "CreateRun's run", got, want)
	stored, _ := getRun(t, j, want.ID)
	sameRunFields(t, "GetRun", stored, want)
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{}, many)
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(runs) != 1 {
		t.Fatalf("ListRuns: %v, want the one run", listIDs(runs))
	}
	sameRunFields(t, "ListRuns", runs[0], want)
	// The pick-up that resumes it (a resume's span links to its trace).
	acquired, _ := acquire(t, j, want.ID, "worker-1", hold)
	sameRunFields(t, "AcquireRun", acquired, want)
}

func testCreateRunTakenID(t *testing.T, j journal) {
	first := createHeld(t, j, "run-1", "worker-1", hold)
	again := newRun("run-1")
	again.Flow = "payments.other"
	again.Owner = "worker-2"
	if _, err := j.CreateRun(t.Context(), again, hold); err == nil {
		t.Fatalf("CreateRun with the ID of an existing run: err = nil, want an error (IDs are unique)")
	}
	stored, _ := getRun(t, j, "run-1")
	sameRunFields(t, "run after a second CreateRun with its ID", stored, first)
	wantState(t, "run after a second CreateRun with its ID", stored, driver.RunRunning, "worker-1", 1)
}

func testCreateRunDedupe(t *testing.T, j journal) {
	a := newRun("run-a")
	a.DedupeKey = "evt_1"
	a.Owner = "worker-a"
	createRun(t, j, a, hold)

	b := newRun("run-b")
	b.DedupeKey = "evt_1"
	got, err := j.CreateRun(t.Context(), b, hold)
	wantErr(t, "CreateRun with a taken DedupeKey", err, driver.ErrDuplicate)
	if got.ID != "run-a" {
		t.Errorf("CreateRun with a taken DedupeKey returned run %q, want the existing run-a", got.ID)
	}
	if _, _, err := j.GetRun(t.Context(), "run-b"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("GetRun of the refused duplicate: err = %v, want ErrNotFound (nothing inserted)", err)
	}

	// Another key, and no key at all, are no duplicates.
	c := newRun("run-c")
	c.DedupeKey = "evt_2"
	createRun(t, j, c, 0)
	createRun(t, j, newRun("run-d"), 0)
	createRun(t, j, newRun("run-e"), 0)

	// A finished run keeps its key.
	finishRun(t, j, "run-a", "worker-a", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}})
	f := newRun("run-f")
	f.DedupeKey = "evt_1"
	got, err = j.CreateRun(t.Context(), f, 0)
	wantErr(t, "CreateRun with the DedupeKey of a finished run", err, driver.ErrDuplicate)
	if got.ID != "run-a" || got.Status != driver.RunCompleted {
		t.Errorf("duplicate of a finished run returned %q (%v), want run-a (completed)", got.ID, got.Status)
	}
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{}, many)
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if ids := listIDs(runs); !slices.Equal(ids, []string{"run-a", "run-c", "run-d", "run-e"}) {
		t.Errorf("runs = %v, want run-a, run-c, run-d, run-e", ids)
	}
}

func testCreateRunDedupeConcurrent(t *testing.T, j journal) {
	got := make([]driver.Run, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		r := newRun(fmt.Sprintf("run-%02d", i))
		r.DedupeKey = "evt_race"
		got[i], errs[i] = j.CreateRun(t.Context(), r, 0)
	})
	var won []int
	for i, err := range errs {
		switch {
		case err == nil:
			won = append(won, i)
		case !errors.Is(err, driver.ErrDuplicate):
			t.Fatalf("creator %d: CreateRun: %v, want nil or ErrDuplicate", i, err)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d creators with one DedupeKey at once: %d inserted (%v), want exactly 1", racers, len(won), won)
	}
	winner := got[won[0]].ID
	for i := range racers {
		if got[i].ID != winner {
			t.Errorf("creator %d got run %q, want the winner %q", i, got[i].ID, winner)
		}
	}
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{}, many)
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if ids := listIDs(runs); len(ids) != 1 || ids[0] != winner {
		t.Errorf("runs stored = %v, want only the winner %q", ids, winner)
	}
}

func testGetRunSteps(t *testing.T, j journal) {
	createHeld(t, j, "run-steps", "worker-1", hold)
	var want []driver.Step
	for i := 1; i <= 5; i++ {
		s := stepN(i)
		saveStep(t, j, "run-steps", "worker-1", s)
		want = append(want, s)
		_, steps := getRun(t, j, "run-steps")
		sameSteps(t, fmt.Sprintf("GetRun after step %d", i), steps, want)
	}
}

func testGetRunMissing(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	_, _, err := j.GetRun(t.Context(), "run-2")
	wantErr(t, "GetRun of a missing run", err, driver.ErrNotFound)
}

func testListRunsSteps(t *testing.T, j journal) {
	createHeld(t, j, "run-steps-0", "worker-1", hold)
	createHeld(t, j, "run-steps-3", "worker-1", hold)
	for seq := 1; seq <= 3; seq++ {
		saveStep(t, j, "run-steps-3", "worker-1", stepN(seq))
	}
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{}, 0)
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	got := map[string]int{}
	for _, r := range runs {
		got[r.ID] = r.Steps
	}
	if got["run-steps-0"] != 0 || got["run-steps-3"] != 3 {
		t.Fatalf("ListRuns step counts: %v, want run-steps-0: 0, run-steps-3: 3", got)
	}
}

func testListRuns(t *testing.T, j journal) {
	// Created out of order, in two flows, in each status.
	type spec struct {
		id, flow string
		status   driver.RunStatus
	}
	specs := []spec{
		{"run-04", "a.flow", driver.RunCompleted},
		{"run-01", "a.flow", driver.RunRunning},
		{"run-06", "b.flow", driver.RunSleeping},
		{"run-03", "b.flow", driver.RunFailed},
		{"run-02", "b.flow", driver.RunRunning},
		{"run-05", "a.flow", driver.RunSleeping},
	}
	result := &driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
	for _, s := range specs {
		r := newRun(s.id)
		r.Flow = s.flow
		r.Owner = "worker-1"
		createRun(t, j, r, hold)
		switch s.status {
		case driver.RunCompleted:
			finishRun(t, j, s.id, "worker-1", driver.Finish{Status: driver.RunCompleted, Result: result})
		case driver.RunFailed:
			finishRun(t, j, s.id, "worker-1", driver.Finish{Status: driver.RunFailed, Result: &driver.Response{Status: 500}, Error: "boom"})
		case driver.RunSleeping:
			finishRun(t, j, s.id, "worker-1", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(hold)})
		}
	}
	list := func(f driver.RunFilter, limit int) []string {
		t.Helper()
		runs, err := j.ListRuns(t.Context(), f, limit)
		if err != nil {
			t.Fatalf("ListRuns(%+v, %d): %v", f, limit, err)
		}
		return listIDs(runs)
	}
	for _, c := range []struct {
		name   string
		filter driver.RunFilter
		limit  int
		want   []string
	}{
		{"all", driver.RunFilter{}, many, []string{"run-01", "run-02", "run-03", "run-04", "run-05", "run-06"}},
		{"limit 0 is no limit", driver.RunFilter{}, 0, []string{"run-01", "run-02", "run-03", "run-04", "run-05", "run-06"}},
		{"limit -1 is no limit", driver.RunFilter{After: "run-03"}, -1, []string{"run-04", "run-05", "run-06"}},
		{"after run-02", driver.RunFilter{After: "run-02"}, many, []string{"run-03", "run-04", "run-05", "run-06"}},
		{"after a missing ID", driver.RunFilter{After: "run-025"}, many, []string{"run-03", "run-04", "run-05", "run-06"}},
		{"limit 2", driver.RunFilter{}, 2, []string{"run-01", "run-02"}},
		{"page 2", driver.RunFilter{After: "run-02"}, 2, []string{"run-03", "run-04"}},
		{"last page", driver.RunFilter{After: "run-04"}, 2, []string{"run-05", "run-06"}},
		{"after the last", driver.RunFilter{After: "run-06"}, many, nil},
		{"flow", driver.RunFilter{Flow: "a.flow"}, many, []string{"run-01", "run-04", "run-05"}},
		{"flow, limit 2", driver.RunFilter{Flow: "b.flow"}, 2, []string{"run-02", "run-03"}},
		{"unknown flow", driver.RunFilter{Flow: "c.flow"}, many, nil},
		{"completed", driver.RunFilter{Status: []driver.RunStatus{driver.RunCompleted}}, many, []string{"run-04"}},
		{"running or sleeping", driver.RunFilter{Status: []driver.RunStatus{driver.RunRunning, driver.RunSleeping}}, many,
			[]string{"run-01", "run-02", "run-05", "run-06"}},
		{"finished", driver.RunFilter{Status: []driver.RunStatus{driver.RunCompleted, driver.RunFailed}}, many, []string{"run-03", "run-04"}},
		{"flow, status and cursor", driver.RunFilter{After: "run-01", Flow: "a.flow",
			Status: []driver.RunStatus{driver.RunRunning, driver.RunSleeping, driver.RunCompleted}}, 1, []string{"run-04"}},
	} {
		if got := list(c.filter, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("ListRuns %s (%+v, limit %d) = %v, want %v", c.name, c.filter, c.limit, got, c.want)
		}
	}
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{Status: []driver.RunStatus{driver.RunCompleted}}, many)
	if err != nil || len(runs) != 1 {
		t.Fatalf("ListRuns of completed runs: %v, %v", listIDs(runs), err)
	}
	if s := diffResponse(runs[0].Result, result); s != "" || runs[0].Status != driver.RunCompleted {
		t.Errorf("listed completed run: Status %v, %s", runs[0].Status, s)
	}
}

func testAcquireUnowned(t *testing.T, j journal) {
	want := createWaking(t, j, "run-1", time.Time{})
	got, steps := acquire(t, j, "run-1", "worker-1", hold)
	sameRunFields(t, "AcquireRun's run", got, want)
	wantState(t, "AcquireRun", got, driver.RunRunning, "worker-1", 1)
	wantLease(t, "AcquireRun", got, hold)
	if len(steps) != 0 {
		t.Errorf("AcquireRun of a new run: steps %v, want none", stepNames(steps))
	}
	stored, _ := getRun(t, j, "run-1")
	wantState(t, "GetRun after AcquireRun", stored, driver.RunRunning, "worker-1", 1)
	if !near(stored.LeaseUntil, got.LeaseUntil) {
		t.Errorf("GetRun: LeaseUntil %v, AcquireRun returned %v", stored.LeaseUntil, got.LeaseUntil)
	}
	wantNotDue(t, j, "run-1", "run just acquired")
}

func testAcquireLiveLease(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	createWaking(t, j, "run-2", time.Time{})
	acquire(t, j, "run-2", "worker-1", hold)
	for _, id := range []string{"run-1", "run-2"} {
		_, _, err := j.AcquireRun(t.Context(), id, "worker-2", hold)
		wantErr(t, "AcquireRun of "+id+" under a live lease", err, driver.ErrNotDue)
		stored, _ := getRun(t, j, id)
		wantState(t, "GetRun of "+id+" after the refused AcquireRun", stored, driver.RunRunning, "worker-1", 1)
	}
}

func testAcquireParked(t *testing.T, j journal) {
	createWaking(t, j, "run-later", time.Now().Add(hold))
	wantNotDue(t, j, "run-later", "unowned run with WakeAt a minute ahead")
	createHeld(t, j, "run-asleep", "worker-1", hold)
	finishRun(t, j, "run-asleep", "worker-1", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(hold)})
	wantNotDue(t, j, "run-asleep", "run sleeping a minute")
	for _, id := range []string{"run-later", "run-asleep"} {
		stored, _ := getRun(t, j, id)
		if stored.Owner != "" || stored.Attempts > 1 {
			t.Errorf("%s after a refused AcquireRun: Owner %q, Attempts %d; want no owner and no new attempt", id, stored.Owner, stored.Attempts)
		}
	}
}

func testAcquireFinished(t *testing.T, j journal) {
	for _, f := range []driver.Finish{
		{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}},
		{Status: driver.RunFailed, Result: &driver.Response{Status: 500}, Error: "boom"},
	} {
		id := "run-" + f.Status.String()
		createHeld(t, j, id, "worker-1", hold)
		finishRun(t, j, id, "worker-1", f)
		wantNotDue(t, j, id, f.Status.String()+" run")
		stored, _ := getRun(t, j, id)
		wantState(t, id+" after a refused AcquireRun", stored, f.Status, "", 1)
	}
}

func testAcquireMissing(t *testing.T, j journal) {
	createWaking(t, j, "run-1", time.Time{})
	_, _, err := j.AcquireRun(t.Context(), "run-2", "worker-1", hold)
	wantErr(t, "AcquireRun of a missing run", err, driver.ErrNotFound)
}

func testAcquireLapsed(t *testing.T, j journal) {
	saved := lapsedRun(t, j, "run-1", "dead", 2)
	wantDue(t, j, "run-1", "run whose owner's lease lapsed")
	got, steps := acquire(t, j, "run-1", "worker-2", hold)
	wantState(t, "AcquireRun of a lapsed run", got, driver.RunRunning, "worker-2", 2)
	wantLease(t, "AcquireRun of a lapsed run", got, hold)
	sameSteps(t, "steps given to the new owner", steps, saved)
	stored, storedSteps := getRun(t, j, "run-1")
	wantState(t, "GetRun after the takeover", stored, driver.RunRunning, "worker-2", 2)
	sameSteps(t, "GetRun after the takeover", storedSteps, saved)
}

// acquireRace has racers owners acquire run id at once, checks exactly one
// won, and returns the winner's run.
func acquireRace(t *testing.T, j journal, id string) driver.Run {
	t.Helper()
	got := make([]driver.Run, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		got[i], _, errs[i] = j.AcquireRun(t.Context(), id, fmt.Sprintf("racer-%02d", i), hold)
	})
	var won []int
	for i, err := range errs {
		switch {
		case err == nil:
			won = append(won, i)
		case !errors.Is(err, driver.ErrNotDue):
			t.Fatalf("racer %d: AcquireRun: %v, want nil or ErrNotDue", i, err)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d owners acquired one run at once: %d won (%v), want exactly 1", racers, len(won), won)
	}
	winner := got[won[0]]
	stored, _ := getRun(t, j, id)
	if stored.Owner != winner.Owner || stored.Attempts != winner.Attempts {
		t.Errorf("stored run: Owner %q, Attempts %d; the winner got Owner %q, Attempts %d",
			stored.Owner, stored.Attempts, winner.Owner, winner.Attempts)
	}
	return winner
}

func testAcquireConcurrent(t *testing.T, j journal) {
	createWaking(t, j, "run-race", time.Time{})
	if w := acquireRace(t, j, "run-race"); w.Attempts != 1 {
		t.Errorf("winner's Attempts = %d, want 1", w.Attempts)
	}
}

func testTakeoverRunConcurrent(t *testing.T, j journal) {
	lapsedRun(t, j, "run-race", "dead", 1)
	if w := acquireRace(t, j, "run-race"); w.Attempts != 2 {
		t.Errorf("winner's Attempts = %d, want 2", w.Attempts)
	}
}

// fencedRunCalls is each fenced journal primitive, called as owner on run id.
var fencedRunCalls = []struct {
	name string
	call func(t *testing.T, j journal, id, owner string) error
}{
	{"RenewRun", func(t *testing.T, j journal, id, owner string) error {
		return j.RenewRun(t.Context(), id, owner, hold)
	}},
	{"SaveStep", func(t *testing.T, j journal, id, owner string) error {
		s := stepN(2)
		s.Result = []byte(`"written by ` + owner + `"`)
		return j.SaveStep(t.Context(), id, owner, s)
	}},
	{"FinishRun", func(t *testing.T, j journal, id, owner string) error {
		return j.FinishRun(t.Context(), id, owner, driver.Finish{Status: driver.RunCompleted,
			Result: &driver.Response{Status: 201, Body: []byte(`"finished by ` + owner + `"`)}})
	}},
}

func testStaleRunOwner(t *testing.T, j journal) {
	saved := lapsedRun(t, j, "run-1", "stale", 1)
	fresh, _ := acquire(t, j, "run-1", "fresh", hold)
	for _, f := range fencedRunCalls {
		err := f.call(t, j, "run-1", "stale")
		wantErr(t, f.name+" by the stale owner after a takeover", err, driver.ErrNotOwner)
	}
	stored, steps := getRun(t, j, "run-1")
	wantState(t, "run after the stale owner's calls", stored, driver.RunRunning, "fresh", 2)
	if !near(stored.LeaseUntil, fresh.LeaseUntil) || stored.Result != nil {
		t.Errorf("run after the stale owner's calls: LeaseUntil %v, Result %v; want the new owner's %v, none",
			stored.LeaseUntil, stored.Result, fresh.LeaseUntil)
	}
	sameSteps(t, "steps after the stale owner's calls", steps, saved)
	// The stale owner's refused SaveStep did not reset the count: step 2
	// is on its second execution (the stale owner's, cut off, and fresh).
	if fresh.NextAttempts != 2 || stored.NextAttempts != 2 {
		t.Errorf("NextAttempts: %d when acquired, %d after the stale owner's calls; want 2 and 2",
			fresh.NextAttempts, stored.NextAttempts)
	}
	saveStep(t, j, "run-1", "fresh", stepN(2))
}

func testRunNonOwner(t *testing.T, j journal) {
	createHeld(t, j, "run-held", "worker-1", hold)
	createWaking(t, j, "run-unowned", time.Time{})
	createHeld(t, j, "run-done", "worker-1", hold)
	finishRun(t, j, "run-done", "worker-1", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}})
	for _, f := range fencedRunCalls {
		for _, c := range []struct{ id, owner, why string }{
			{"run-held", "worker-2", "another owner"},
			{"run-held", "", "the empty owner"},
			{"run-unowned", "", "the empty owner of an unowned run"},
			{"run-unowned", "worker-1", "an owner of an unowned run"},
			{"run-done", "worker-1", "the last owner of a finished run"},
			// A missing run is held by nobody: ErrNotOwner, as for rows.
			{"run-missing", "worker-1", "an owner of a missing run"},
		} {
			err := f.call(t, j, c.id, c.owner)
			wantErr(t, fmt.Sprintf("%s of %s by %s", f.name, c.id, c.why), err, driver.ErrNotOwner)
		}
	}
	held, steps := getRun(t, j, "run-held")
	wantState(t, "run-held after the calls", held, driver.RunRunning, "worker-1", 1)
	unowned, _ := getRun(t, j, "run-unowned")
	wantState(t, "run-unowned after the calls", unowned, driver.RunRunning, "", 0)
	done, doneSteps := getRun(t, j, "run-done")
	if done.Status != driver.RunCompleted || done.Result == nil || done.Result.Status != 201 || len(done.Result.Body) != 0 {
		t.Errorf("run-done after the calls: Status %v, Result %+v; want completed with its 201", done.Status, done.Result)
	}
	if len(steps)+len(doneSteps) != 0 {
		t.Errorf("refused SaveSteps saved steps: %v, %v", stepNames(steps), stepNames(doneSteps))
	}
	if _, _, err := j.GetRun(t.Context(), "run-missing"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("GetRun of the missing run after fenced calls: err = %v, want ErrNotFound", err)
	}
}

func testRenewRun(t *testing.T, j journal) {
	created := createHeld(t, j, "run-1", "worker-1", hold)
	if err := j.RenewRun(t.Context(), "run-1", "worker-1", 2*hold); err != nil {
		t.Fatalf("RenewRun: %v", err)
	}
	stored, _ := getRun(t, j, "run-1")
	if !stored.LeaseUntil.After(created.LeaseUntil.Add(hold / 2)) {
		t.Errorf("LeaseUntil after RenewRun(%v) = %v, want about a minute after the first lease %v",
			2*hold, stored.LeaseUntil, created.LeaseUntil)
	}
	wantNotDue(t, j, "run-1", "renewed run")
	stored, _ = getRun(t, j, "run-1")
	wantState(t, "run after renewal", stored, driver.RunRunning, "worker-1", 1)
	saveStep(t, j, "run-1", "worker-1", stepN(1))

	// The lease is now+lease, even when that is sooner than before.
	lapse(t, j, "run-1", "worker-1")
	wantDue(t, j, "run-1", "run renewed to a short lease that ended")
	run, _ := acquire(t, j, "run-1", "worker-2", hold)
	wantState(t, "run taken after its renewed lease ended", run, driver.RunRunning, "worker-2", 2)
}

// wantNext checks run id's NextAttempts as GetRun and ListRuns report it.
func wantNext(t *testing.T, j journal, what, id string, want int) {
	t.Helper()
	run, _ := getRun(t, j, id)
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{}, many)
	if err != nil {
		t.Fatalf("%s: ListRuns: %v", what, err)
	}
	listed := -1
	for _, r := range runs {
		if r.ID == id {
			listed = r.NextAttempts
		}
	}
	if run.NextAttempts != want || listed != want {
		t.Errorf("%s: NextAttempts %d (GetRun), %d (ListRuns); want %d", what, run.NextAttempts, listed, want)
	}
}

func testNextAttemptsCreate(t *testing.T, j journal) {
	held := createHeld(t, j, "run-held", "worker-1", hold)
	if held.NextAttempts != 1 {
		t.Errorf("CreateRun with an owner returned NextAttempts %d, want 1 (the creator begins step 1)", held.NextAttempts)
	}
	wantNext(t, j, "run created held", "run-held", 1)
	queued := createWaking(t, j, "run-queued", time.Time{})
	if queued.NextAttempts != 0 {
		t.Errorf("CreateRun without an owner returned NextAttempts %d, want 0 (nobody began step 1)", queued.NextAttempts)
	}
	wantNext(t, j, "run created unowned", "run-queued", 0)
	if run, _ := acquire(t, j, "run-queued", "worker-1", hold); run.NextAttempts != 1 {
		t.Errorf("AcquireRun of an enqueued run returned NextAttempts %d, want 1", run.NextAttempts)
	}
	wantNext(t, j, "enqueued run after its first pick-up", "run-queued", 1)
}

func testNextAttemptsSave(t *testing.T, j journal) {
	lapsedRun(t, j, "run-1", "worker-1", 0) // cut off before step 1 returned
	if run, _ := acquire(t, j, "run-1", "worker-2", hold); run.NextAttempts != 2 {
		t.Fatalf("AcquireRun after a lapse: NextAttempts %d, want 2", run.NextAttempts)
	}
	s1 := stepN(1)
	s1.Attempts = 2
	saveStep(t, j, "run-1", "worker-2", s1)
	wantNext(t, j, "after SaveStep of step 1", "run-1", 1)
	saveStep(t, j, "run-1", "worker-2", stepN(2))
	wantNext(t, j, "after SaveStep of step 2", "run-1", 1)
	_, steps := getRun(t, j, "run-1")
	sameSteps(t, "steps saved", steps, []driver.Step{s1, stepN(2)})
}

func testNextAttemptsTakeover(t *testing.T, j journal) {
	lapsedRun(t, j, "run-1", "worker-1", 1) // saved step 1, then died
	wantNext(t, j, "run whose holder died after step 1", "run-1", 1)
	if run, _ := acquire(t, j, "run-1", "worker-2", hold); run.NextAttempts != 2 {
		t.Errorf("AcquireRun after a lapse returned NextAttempts %d, want 2 (cut off between steps counts)", run.NextAttempts)
	}
	wantNext(t, j, "run taken over after a lapse", "run-1", 2)
	finishRun(t, j, "run-1", "worker-2", driver.Finish{Status: driver.RunRunning})
	wantNext(t, j, "run released for a retry", "run-1", 2) // FinishRun counts nothing
	if run, _ := acquire(t, j, "run-1", "worker-3", hold); run.NextAttempts != 3 {
		t.Errorf("AcquireRun after a release returned NextAttempts %d, want 3", run.NextAttempts)
	}
	wantNext(t, j, "run picked up after a release", "run-1", 3)
	// RenewRun counts nothing either.
	if err := j.RenewRun(t.Context(), "run-1", "worker-3", hold); err != nil {
		t.Fatalf("RenewRun: %v", err)
	}
	wantNext(t, j, "run after RenewRun", "run-1", 3)
}

func testNextAttemptsSleep(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	saveStep(t, j, "run-1", "worker-1", stepN(1)) // the sleep's step: its wake time
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunSleeping, WakeAt: time.Now().Add(-time.Second)})
	wantNext(t, j, "sleeping run", "run-1", 1)
	if run, _ := acquire(t, j, "run-1", "worker-2", hold); run.NextAttempts != 1 {
		t.Errorf("AcquireRun of a sleeping run returned NextAttempts %d, want 1 (waking is not a retry)", run.NextAttempts)
	}
	wantNext(t, j, "run woken from its sleep", "run-1", 1)
	// A waking execution that dies is a retry like any other.
	lapse(t, j, "run-1", "worker-2")
	if run, _ := acquire(t, j, "run-1", "worker-3", hold); run.NextAttempts != 2 {
		t.Errorf("AcquireRun after the woken holder's lease lapsed returned NextAttempts %d, want 2", run.NextAttempts)
	}
}

func testSaveStepOrder(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	try := func(s driver.Step, what string) {
		t.Helper()
		err := j.SaveStep(t.Context(), "run-1", "worker-1", s)
		wantErr(t, what, err, driver.ErrStepOrder)
	}
	try(stepN(2), "SaveStep of seq 2 before seq 1 (a gap)")
	try(stepN(0), "SaveStep of seq 0")
	s1 := stepN(1)
	saveStep(t, j, "run-1", "worker-1", s1)
	again := stepN(1)
	again.Result = []byte(`"overwritten"`)
	try(again, "SaveStep of seq 1 again (a repeat)")
	try(stepN(3), "SaveStep of seq 3 after seq 1 (a gap)")
	_, steps := getRun(t, j, "run-1")
	sameSteps(t, "steps after refused saves", steps, []driver.Step{s1})
	s2 := stepN(2)
	saveStep(t, j, "run-1", "worker-1", s2)
	try(stepN(2), "SaveStep of seq 2 again")
	_, steps = getRun(t, j, "run-1")
	sameSteps(t, "steps after seq 2", steps, []driver.Step{s1, s2})
}

func testSaveStepExact(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	t0 := time.Now().Add(-time.Minute)
	want := []driver.Step{
		{Seq: 1, Name: "refund id", Result: []byte("\"9b2f6c1e-\\u00e9-é\"\n"), Attempts: 3,
			StartedAt: t0, FinishedAt: t0.Add(1500 * time.Microsecond)},
		{Seq: 2, Name: "charge card", Failure: []byte(`{ "code": "PaymentDeclined", "status": 402, "message": "card declined" }`),
			Attempts: 1, StartedAt: t0.Add(time.Second), FinishedAt: t0.Add(2 * time.Second)},
		{Seq: 3, Name: "big", Result: bytes.Repeat([]byte(`{"k":"0123456789abcdef"},`), 4000), Attempts: 2,
			StartedAt: t0.Add(3 * time.Second), FinishedAt: t0.Add(4 * time.Second)},
	}
	want[2].Result = append(append([]byte{'['}, want[2].Result[:len(want[2].Result)-1]...), ']')
	for _, s := range want {
		saveStep(t, j, "run-1", "worker-1", s)
	}
	_, steps := getRun(t, j, "run-1")
	sameSteps(t, "GetRun", steps, want)
	if len(steps) == 3 && len(steps[1].Result) != 0 {
		t.Errorf("step with a Failure has Result %q, want none", steps[1].Result)
	}
	// The next owner is given the same steps.
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunRunning})
	_, steps = acquire(t, j, "run-1", "worker-2", hold)
	sameSteps(t, "AcquireRun", steps, want)
}

func testFinishCompleted(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	saved := []driver.Step{stepN(1), stepN(2)}
	for _, s := range saved {
		saveStep(t, j, "run-1", "worker-1", s)
	}
	result := sampleResponse()
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunCompleted, Result: &result})
	stored, steps := getRun(t, j, "run-1")
	wantState(t, "completed run", stored, driver.RunCompleted, "", 1)
	if s := diffResponse(stored.Result, &result); s != "" {
		t.Errorf("completed run: %s", s)
	}
	if stored.Error != "" {
		t.Errorf("completed run: Error = %q, want none", stored.Error)
	}
	sameSteps(t, "completed run", steps, saved)
	wantNotDue(t, j, "run-1", "completed run")
	for _, f := range fencedRunCalls {
		err := f.call(t, j, "run-1", "worker-1")
		wantErr(t, f.name+" by the owner of a completed run", err, driver.ErrNotOwner)
	}
}

func testFinishFailed(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	saveStep(t, j, "run-1", "worker-1", stepN(1))
	result := driver.Response{Status: 500, ContentType: "application/json",
		Body: []byte(`{"error":{"code":"InternalError","message":"Something went wrong."}}` + "\n")}
	const msg = "step \"charge\": card network down: dial tcp 10.0.0.1:443: i/o timeout"
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunFailed, Result: &result, Error: msg})
	stored, steps := getRun(t, j, "run-1")
	wantState(t, "failed run", stored, driver.RunFailed, "", 1)
	if s := diffResponse(stored.Result, &result); s != "" {
		t.Errorf("failed run: %s", s)
	}
	if stored.Error != msg {
		t.Errorf("failed run: Error = %q, want %q", stored.Error, msg)
	}
	sameSteps(t, "failed run", steps, []driver.Step{stepN(1)})
	wantNotDue(t, j, "run-1", "failed run")
}

// testParked is FinishRun with status (RunSleeping or RunRunning), which parks
// a run until WakeAt.
func testParked(t *testing.T, j journal, status driver.RunStatus) {
	// A minute ahead: not due.
	createHeld(t, j, "run-later", "worker-1", hold)
	saved := []driver.Step{stepN(1)}
	saveStep(t, j, "run-later", "worker-1", saved[0])
	later := time.Now().Add(hold)
	finishRun(t, j, "run-later", "worker-1", driver.Finish{Status: status, WakeAt: later})
	stored, steps := getRun(t, j, "run-later")
	wantState(t, "parked run", stored, status, "", 1)
	if !near(stored.WakeAt, later) {
		t.Errorf("parked run: WakeAt = %v, want %v", stored.WakeAt, later)
	}
	if stored.Result != nil {
		t.Errorf("parked run: Result = %+v, want none", stored.Result)
	}
	sameSteps(t, "parked run", steps, saved)
	wantNotDue(t, j, "run-later", "run parked a minute")
	for _, f := range fencedRunCalls {
		err := f.call(t, j, "run-later", "worker-1")
		wantErr(t, f.name+" by the owner that parked the run", err, driver.ErrNotOwner)
	}

	// WakeAt passed: due, and the next owner gets the saved steps.
	createHeld(t, j, "run-soon", "worker-1", hold)
	saveStep(t, j, "run-soon", "worker-1", saved[0])
	finishRun(t, j, "run-soon", "worker-1", driver.Finish{Status: status, WakeAt: time.Now().Add(short)})
	time.Sleep(after)
	wantDue(t, j, "run-soon", "run whose WakeAt passed")
	run, steps := acquire(t, j, "run-soon", "worker-2", hold)
	wantState(t, "run acquired after WakeAt", run, driver.RunRunning, "worker-2", 2)
	sameSteps(t, "run acquired after WakeAt", steps, saved)

	// Zero WakeAt: due at once.
	createHeld(t, j, "run-now", "worker-1", hold)
	finishRun(t, j, "run-now", "worker-1", driver.Finish{Status: status})
	wantDue(t, j, "run-now", "run parked with zero WakeAt")
	run, _ = acquire(t, j, "run-now", "worker-2", hold)
	wantState(t, "run acquired after a park with zero WakeAt", run, driver.RunRunning, "worker-2", 2)
}

func testFinishSleeping(t *testing.T, j journal) { testParked(t, j, driver.RunSleeping) }
func testFinishRelease(t *testing.T, j journal)  { testParked(t, j, driver.RunRunning) }

func testDueRuns(t *testing.T, j journal) {
	now := time.Now()
	// Due, in the order they became due.
	createWaking(t, j, "run-b", now.Add(-2*time.Hour))
	createWaking(t, j, "run-a", now.Add(-3*time.Hour))
	createHeld(t, j, "run-c", "worker-1", hold)
	finishRun(t, j, "run-c", "worker-1", driver.Finish{Status: driver.RunSleeping, WakeAt: now.Add(-time.Hour)})
	createWaking(t, j, "run-e", time.Time{}) // due since it was created
	createHeld(t, j, "run-d", "dead", short) // due once its lease lapses, after run-e
	// Not due.
	createHeld(t, j, "run-live", "worker-1", hold)
	createWaking(t, j, "run-later", now.Add(hold))
	createHeld(t, j, "run-asleep", "worker-1", hold)
	finishRun(t, j, "run-asleep", "worker-1", driver.Finish{Status: driver.RunSleeping, WakeAt: now.Add(hold)})
	createHeld(t, j, "run-done", "worker-1", hold)
	finishRun(t, j, "run-done", "worker-1", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}})
	createHeld(t, j, "run-failed", "worker-1", hold)
	finishRun(t, j, "run-failed", "worker-1", driver.Finish{Status: driver.RunFailed, Result: &driver.Response{Status: 500}, Error: "boom"})
	time.Sleep(after)

	want := []string{"run-a", "run-b", "run-c", "run-e", "run-d"}
	if got := dueRuns(t, j, many); !slices.Equal(got, want) {
		t.Fatalf("DueRuns = %v, want %v (the longest due first)", got, want)
	}
	// Each is what AcquireRun takes, and once taken it is no longer due.
	for i, id := range want {
		acquire(t, j, id, "worker-2", hold)
		if got := dueRuns(t, j, many); !slices.Equal(got, want[i+1:]) {
			t.Errorf("DueRuns after acquiring %s = %v, want %v", id, got, want[i+1:])
		}
	}
}

// Two apps with different flows share a store: each scheduler asks for its
// own flows' runs and must see no other (else it takes them, counts an
// attempt on them, and delays them).
func testDueRunsFlows(t *testing.T, j journal) {
	now := time.Now()
	create := func(id, flow string, due time.Duration) {
		r := newRun(id)
		r.Flow = flow
		r.WakeAt = now.Add(-due)
		createRun(t, j, r, 0)
	}
	create("run-a1", "app-a.pay", 5*time.Hour)
	create("run-b1", "app-b.mail", 4*time.Hour)
	create("run-a2", "app-a.ship", 3*time.Hour)
	create("run-b2", "app-b.mail", 2*time.Hour)
	create("run-a3", "app-a.pay", time.Hour)
	later := newRun("run-a-later")
	later.Flow, later.WakeAt = "app-a.pay", now.Add(hold)
	createRun(t, j, later, 0)
	time.Sleep(after)

	for _, c := range []struct {
		flows []string
		limit int
		want  []string
	}{
		{[]string{"app-a.pay", "app-a.ship"}, many, []string{"run-a1", "run-a2", "run-a3"}},
		{[]string{"app-a.ship", "app-a.pay"}, 2, []string{"run-a1", "run-a2"}},
		{[]string{"app-b.mail"}, many, []string{"run-b1", "run-b2"}},
		{[]string{"app-b.mail"}, 0, []string{"run-b1", "run-b2"}},
		{[]string{"app-c.none"}, many, nil},
		{nil, many, []string{"run-a1", "run-b1", "run-a2", "run-b2", "run-a3"}},
		{[]string{}, 3, []string{"run-a1", "run-b1", "run-a2"}},
	} {
		got, err := j.DueRuns(t.Context(), c.flows, c.limit)
		if err != nil {
			t.Fatalf("DueRuns(%q, %d): %v", c.flows, c.limit, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("DueRuns(%q, %d) = %v, want %v", c.flows, c.limit, got, c.want)
		}
	}
	if n, ok := j.(driver.Notifier); ok {
		if _, waiting, err := n.NextDue(t.Context(), []string{"app-b.mail"}); err != nil || waiting {
			t.Errorf("NextDue(app-b.mail) = waiting %v, %v; want none waiting (only app-a.pay has a parked run)", waiting, err)
		}
		if _, waiting, err := n.NextDue(t.Context(), []string{"app-a.pay"}); err != nil || !waiting {
			t.Errorf("NextDue(app-a.pay) = waiting %v, %v; want run-a-later", waiting, err)
		}
	}
}

func testDueRunsLimit(t *testing.T, j journal) {
	now := time.Now()
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("run-%d", i)
		createWaking(t, j, id, now.Add(-time.Duration(5-i)*time.Hour))
		want = append(want, id)
	}
	createWaking(t, j, "run-later", now.Add(hold))
	for _, limit := range []int{1, 2, 5, 6, 0, -1} {
		got := dueRuns(t, j, limit)
		w := want
		if limit > 0 {
			w = want[:min(limit, len(want))]
		}
		if !slices.Equal(got, w) {
			t.Errorf("DueRuns(%d) = %v, want %v", limit, got, w)
		}
	}
}

func testClaimKey(t *testing.T, j journal) {
	createHeld(t, j, "run-a", "worker-1", hold)
	createHeld(t, j, "run-b", "worker-2", hold)
	claimKey := func(key, runID, want string) {
		t.Helper()
		got, err := j.ClaimKey(t.Context(), key, runID)
		if err != nil {
			t.Fatalf("ClaimKey(%q, %q): %v", key, runID, err)
		}
		if got != want {
			t.Errorf("ClaimKey(%q, %q) = %q, want %q", key, runID, got, want)
		}
	}
	claimKey("order:42", "run-a", "run-a") // first wins
	claimKey("order:42", "run-a", "run-a") // the winner again: still its own
	claimKey("order:42", "run-b", "run-a") // another run learns who holds it
	claimKey("order:43", "run-b", "run-b") // keys are independent
	claimKey("order:43", "run-a", "run-b")
	// A finished run keeps what it claimed.
	finishRun(t, j, "run-a", "worker-1", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}})
	claimKey("order:42", "run-b", "run-a")
}

func testClaimKeyConcurrent(t *testing.T, j journal) {
	ids := make([]string, racers)
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%02d", i)
		createHeld(t, j, ids[i], "worker-"+ids[i], hold)
	}
	got := make([]string, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		got[i], errs[i] = j.ClaimKey(t.Context(), "order:race", ids[i])
	})
	var won []int
	for i := range racers {
		if errs[i] != nil {
			t.Fatalf("run %s: ClaimKey: %v", ids[i], errs[i])
		}
		if got[i] == ids[i] {
			won = append(won, i)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d runs claimed one key at once: %d won (%v), want exactly 1", racers, len(won), won)
	}
	winner := ids[won[0]]
	for i := range racers {
		if got[i] != winner {
			t.Errorf("run %s was told %q holds the key, want the winner %q", ids[i], got[i], winner)
		}
	}
	if h, err := j.ClaimKey(t.Context(), "order:race", ids[(won[0]+1)%racers]); err != nil || h != winner {
		t.Errorf("ClaimKey after the race = %q, %v; want %q", h, err, winner)
	}
}

func testRunCopies(t *testing.T, j journal) {
	r := newRun("run-1")
	r.Owner = "worker-1"
	r.Input = []byte(`{"chargeId":"ch_1"}`)
	r.IdemKey = &driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.refund", Key: "idem-key-0000-copies"}
	want := r
	want.Input = bytes.Clone(r.Input)
	wantKey := *r.IdemKey
	want.IdemKey = &wantKey
	got := createRun(t, j, r, hold)
	r.Input[2] = 'X' // the caller reuses its buffers
	r.IdemKey.Key = "changed"
	got.Input[3] = 'Y'
	got.IdemKey.Key = "changed too"

	s := stepN(1)
	wantStep := s
	wantStep.Result = bytes.Clone(s.Result)
	saveStep(t, j, "run-1", "worker-1", s)
	s.Result[1] = 'Z'

	stored, steps := getRun(t, j, "run-1")
	sameRunFields(t, "run after the caller changed its buffers", stored, want)
	sameSteps(t, "steps after the caller changed its buffers", steps, []driver.Step{wantStep})
	stored.Input[0] = 'W'
	steps[0].Result[0] = 'W'
	stored.IdemKey.Key = "changed again"
	stored, steps = getRun(t, j, "run-1")
	sameRunFields(t, "run after changing what GetRun returned", stored, want)
	sameSteps(t, "steps after changing what GetRun returned", steps, []driver.Step{wantStep})

	result := sampleResponse()
	wantResult := result
	wantResult.Body = bytes.Clone(result.Body)
	finishRun(t, j, "run-1", "worker-1", driver.Finish{Status: driver.RunCompleted, Result: &result})
	result.Body[0] = 'X'
	result.Status = 299
	stored, _ = getRun(t, j, "run-1")
	if s := diffResponse(stored.Result, &wantResult); s != "" {
		t.Errorf("Result after the caller changed its response: %s", s)
	}
	stored.Result.Body[0] = 'Y'
	runs, err := j.ListRuns(t.Context(), driver.RunFilter{}, many)
	if err != nil || len(runs) != 1 {
		t.Fatalf("ListRuns: %v, %v", listIDs(runs), err)
	}
	if s := diffResponse(runs[0].Result, &wantResult); s != "" {
		t.Errorf("Result after changing what GetRun returned: %s", s)
	}
}

func testJournalClose(t *testing.T, j journal) {
	createHeld(t, j, "run-1", "worker-1", hold)
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateRun", func() error { _, err := j.CreateRun(ctx, newRun("run-2"), 0); return err }},
		{"GetRun", func() error { _, _, err := j.GetRun(ctx, "run-1"); return err }},
		{"ListRuns", func() error { _, err := j.ListRuns(ctx, driver.RunFilter{}, 10); return err }},
		{"AcquireRun", func() error { _, _, err := j.AcquireRun(ctx, "run-1", "worker-2", hold); return err }},
		{"RenewRun", func() error { return j.RenewRun(ctx, "run-1", "worker-1", hold) }},
		{"SaveStep", func() error { return j.SaveStep(ctx, "run-1", "worker-1", stepN(1)) }},
		{"FinishRun", func() error {
			return j.FinishRun(ctx, "run-1", "worker-1", driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201}})
		}},
		{"DueRuns", func() error { _, err := j.DueRuns(ctx, nil, 10); return err }},
		{"ClaimKey", func() error { _, err := j.ClaimKey(ctx, "order:1", "run-1"); return err }},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, driver.ErrUnavailable) || !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed (which is ErrUnavailable)", c.name, err)
		}
	}
}
