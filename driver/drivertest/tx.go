package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// TxOptions is what RunTx needs besides the driver: a table the rules can
// write to as a flow does, in the driver's own database.
type TxOptions struct {
	// Setup creates, in the database of d (a fresh driver of the suite, a
	// driver.TxDriver), an empty table for the flows' writes, and returns
	// the statements that write and read it. conn is a connection of
	// d.DB(), outside any transaction; Setup may use it or not. It runs
	// once per rule, before the rule, and the table must be that rule's
	// alone (in the fresh driver's database or schema: rules run in
	// parallel).
	Setup func(ctx context.Context, d driver.Driver, conn *sql.Conn) (Writes, error)
}

// Writes are the statements, in the driver's SQL dialect, that the rules
// send as a flow's writes and to read them back.
type Writes struct {
	// Insert adds one row to the table. It has one parameter, a text note.
	Insert string
	// Count returns, as one row of one integer column, how many rows of the
	// table hold a note. It has one parameter, the note.
	Count string
}

// RunTx runs the rules of the optional capabilities driver.TxDriver (a
// flow's transaction that commits with the stored response or step) and
// driver.TxClaimer (the claim sent with the transaction's first
// statement), each as a parallel subtest named after it. A driver that is
// no TxDriver skips the suite, saying so; one that is no TxClaimer, or no
// driver.Journal, skips the rules that need it; one that makes the
// claim outside the transaction (which TxClaimer allows when it cannot
// hold it) skips the rules about claims held in it.
//
// newDriver is as for Run (RunTx calls it once up front, on t, to see what
// the driver implements, and closes that driver at once). Each rule holds
// at most two connections of the driver's DB at a time.
func RunTx(t *testing.T, newDriver func(t *testing.T) driver.Driver, opts TxOptions) {
	t.Helper()
	probe := newDriver(t)
	_, isTx := probe.(driver.TxDriver)
	_, isClaimer := probe.(driver.TxClaimer)
	_, isJournal := probe.(driver.Journal)
	_ = probe.Close()
	if !isTx {
		t.Skipf("driver %T has no driver.TxDriver: its flows have no transaction to commit with (a capability, not a failure)", probe)
	}
	if opts.Setup == nil {
		t.Fatal("drivertest.RunTx: TxOptions.Setup is nil: the rules need a table to write to")
	}
	for _, r := range txRules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			switch {
			case r.needs == needsClaimer && !isClaimer:
				t.Skipf("driver %T has no driver.TxClaimer", probe)
			case r.needs == needsJournal && !isJournal:
				t.Skipf("driver %T has no driver.Journal", probe)
			}
			d := newDriver(t)
			t.Cleanup(func() { _ = d.Close() })
			f := &txFixture{t: t, d: d.(driver.TxDriver)}
			conn := f.conn()
			w, err := opts.Setup(t.Context(), d, conn)
			if err != nil {
				t.Fatalf("TxOptions.Setup: %v", err)
			}
			f.end(conn)
			f.w = w
			r.test(t, f)
		})
	}
}

type capability int

const (
	needsTx capability = iota
	needsJournal
	needsClaimer
)

type txRule struct {
	name  string
	needs capability
	test  func(t *testing.T, f *txFixture)
}

// txRules: one row per promise of driver.TxDriver and driver.TxClaimer
// (driver/tx.go), as a flow relies on it.
var txRules = []txRule{
	{"CommitCompleteStoresTheResponseWithTheFlowsWrites", needsTx, testCommitComplete},
	{"RollbackStoresNeitherTheResponseNorTheWrites", needsTx, testRollback},
	{"CommitCompleteOfAClaimTakenOverIsRefusedAndRollsTheWritesBack", needsTx, testCommitCompleteFenced},
	{"AStatementsFaultIsNotUnavailable", needsTx, testStatementFault},
	{"CommitStepSavesTheStepWithItsWrites", needsJournal, testCommitStep},
	{"CommitStepOfAnotherOwnerIsRefusedAndRollsTheWritesBack", needsJournal, testCommitStepFenced},
	{"CommitStepOutOfOrderIsRefusedAndRollsTheWritesBack", needsJournal, testCommitStepOrder},
	{"BeginClaimedRunsTheFlowForTheClaimsWinner", needsClaimer, testBeginClaimedWinner},
	{"BeginClaimedOfARunningKeyRunsNoStatement", needsClaimer, testBeginClaimedRunning},
	{"BeginClaimedOfACompletedKeyReplaysAndRunsNoStatement", needsClaimer, testBeginClaimedCompleted},
	{"BeginClaimedAfterTheClaimWasMadeClaimsNothing", needsClaimer, testBeginClaimedMade},
	{"HeldClaimLeavesNoRowUntilItCommits", needsClaimer, testHeldInvisible},
	{"HeldClaimRefusesOtherHeldClaimsAndARollbackFreesTheKey", needsClaimer, testHeldRefusesOthers},
	{"HeldClaimAndAClaimMadeOutsideATransactionNeverBothCommit", needsClaimer, testHeldLoses},
	{"HeldClaimReplacesAnExpiredRow", needsClaimer, testHeldReplacesExpired},
}

// --- fixtures ---------------------------------------------------------------

type txFixture struct {
	t *testing.T
	d driver.TxDriver
	w Writes
}

// conn returns a new connection of the driver's DB, which the rule's end
// rolls back (whatever is open on it) and closes.
func (f *txFixture) conn() *sql.Conn {
	f.t.Helper()
	conn, err := f.d.DB().Conn(f.t.Context())
	if err != nil {
		f.t.Fatalf("DB().Conn: %v", err)
	}
	f.t.Cleanup(func() { f.end(conn) })
	return conn
}

// end sends ROLLBACK on conn (an error is ignored: nothing may be open)
// and closes it, giving it back to DB's pool. Ending twice is harmless.
func (f *txFixture) end(conn *sql.Conn) {
	_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
	_ = conn.Close()
}

// begin returns a new connection with a transaction open on it (Begin).
func (f *txFixture) begin() *sql.Conn {
	f.t.Helper()
	conn := f.conn()
	if err := f.d.Begin(f.t.Context(), conn); err != nil {
		f.t.Fatalf("Begin: %v", err)
	}
	return conn
}

// insert sends the flow's write of note on conn.
func (f *txFixture) insert(conn *sql.Conn, note string) error {
	_, err := conn.ExecContext(f.t.Context(), f.w.Insert, note)
	return err
}

// mustInsert is insert, which must work.
func (f *txFixture) mustInsert(conn *sql.Conn, note string) {
	f.t.Helper()
	if err := f.insert(conn, note); err != nil {
		f.t.Fatalf("the flow's write %q: %v", note, err)
	}
}

// count returns how many committed writes hold note, read on a connection
// of DB of its own.
func (f *txFixture) count(note string) int {
	f.t.Helper()
	var n int
	if err := f.d.DB().QueryRowContext(f.t.Context(), f.w.Count, note).Scan(&n); err != nil {
		f.t.Fatalf("count the writes %q: %v", note, err)
	}
	return n
}

// wantWrites fails unless want committed writes hold note.
func (f *txFixture) wantWrites(what, note string, want int) {
	f.t.Helper()
	if n := f.count(note); n != want {
		f.t.Errorf("%s: %d committed writes %q, want %d", what, n, note, want)
	}
}

// wantNoRow fails unless key has no row.
func (f *txFixture) wantNoRow(what string, key driver.Key) {
	f.t.Helper()
	row, err := f.d.Get(f.t.Context(), key)
	if !errors.Is(err, driver.ErrNotFound) {
		f.t.Errorf("%s: Get = %+v, %v; want no row (ErrNotFound)", what, row, err)
	}
}

// wantCompleted fails unless key's row is completed with resp.
func (f *txFixture) wantCompleted(what string, key driver.Key, resp driver.Response) {
	f.t.Helper()
	row, err := f.d.Get(f.t.Context(), key)
	if err != nil {
		f.t.Errorf("%s: Get: %v, want the row completed", what, err)
		return
	}
	if row.State != driver.Completed {
		f.t.Errorf("%s: row is %v (owner %q), want completed", what, row.State, row.Owner)
	}
	if d := diffResponse(row.Response, &resp); d != "" {
		f.t.Errorf("%s: stored response: %s", what, d)
	}
}

// errNotOurs is what the rules' tickets tell a statement whose claim went
// to another request.
var errNotOurs = errors.New("drivertest: the claim is not this request's")

// ticket is a driver.ClaimTicket that claims req and records what the
// driver told it (the engine's own ticket decides more; the driver only
// passes its answer on).
type ticket struct {
	req     driver.ClaimRequest
	made    bool  // the claim was made already: Take reports it
	madeErr error // with this error (nil: it went to this request)
	taken   int   // Take handed the claim to the driver
	done    int   // Done calls
	res     driver.ClaimResult
	err     error
}

func (tk *ticket) Take() (driver.ClaimRequest, bool, error) {
	if tk.made {
		return tk.req, false, tk.madeErr
	}
	tk.taken++
	return tk.req, true, nil
}

func (tk *ticket) Done(res driver.ClaimResult, err error) error {
	tk.done++
	tk.res, tk.err = res, err
	switch {
	case err != nil:
		return err
	case !res.Claimed:
		return errNotOurs
	}
	return nil
}

// beginClaimed returns a new connection with t's claim sent ahead of a
// transaction (BeginClaimed), and what the flow's first statement, a write
// of note, returned.
func (f *txFixture) beginClaimed(tk *ticket, note string) (*sql.Conn, error) {
	f.t.Helper()
	conn := f.conn()
	if err := f.d.(driver.TxClaimer).BeginClaimed(f.t.Context(), conn, tk); err != nil {
		f.t.Fatalf("BeginClaimed: %v", err)
	}
	return conn, f.insert(conn, note)
}

// held is beginClaimed of a claim the driver may hold in the
// transaction (ClaimResult.InTx says whether it did).
func (f *txFixture) held(key driver.Key, owner, note string) (*sql.Conn, *ticket, error) {
	f.t.Helper()
	tk := &ticket{req: req(key, fpA, owner, hold, day)}
	conn, err := f.beginClaimed(tk, note)
	return conn, tk, err
}

// mustHold is held for a free key: the claim goes to owner, in the
// transaction. A driver that made it outside the transaction (TxClaimer
// allows that) skips the rule.
func (f *txFixture) mustHold(key driver.Key, owner, note string) *sql.Conn {
	f.t.Helper()
	conn, tk, err := f.held(key, owner, note)
	if err != nil || !tk.res.Claimed || tk.done != 1 {
		f.t.Fatalf("a claim held in the transaction, of a free key: the write returned %v; claim %+v (told %d times, %v); want it claimed, the write run", err, tk.res, tk.done, tk.err)
	}
	if !tk.res.InTx {
		f.t.Skipf("driver %T made the claim outside the transaction (TxClaimer allows it): the rules about held claims do not apply", f.d)
	}
	return conn
}

// --- TxDriver ---------------------------------------------------------------

// The flow's writes and its stored response commit together: after
// CommitComplete the row is completed with the response, the write is
// there, and the key replays that response.
func testCommitComplete(t *testing.T, f *txFixture) {
	key := testKey("tx-commit")
	mustClaim(t, f.d, req(key, fpA, "owner-1", hold, day))
	conn := f.begin()
	f.mustInsert(conn, "charge")
	resp := tracedResponse()
	if err := f.d.CommitComplete(t.Context(), conn, key, "owner-1", resp, day); err != nil {
		t.Fatalf("CommitComplete: %v", err)
	}
	f.wantCompleted("after CommitComplete", key, resp)
	f.wantWrites("after CommitComplete", "charge", 1)
	res := claim(t, f.d, req(key, fpA, "owner-2", hold, day))
	if res.Claimed || diffResponse(res.Row.Response, &resp) != "" {
		t.Errorf("a later claim of the key: Claimed %v, response %+v; want the stored response to replay", res.Claimed, res.Row.Response)
	}
}

// A flow's transaction that ends with ROLLBACK stores nothing: no write,
// no response; the row is still the flow's running claim.
func testRollback(t *testing.T, f *txFixture) {
	key := testKey("tx-rollback")
	mustClaim(t, f.d, req(key, fpA, "owner-1", hold, day))
	conn := f.begin()
	f.mustInsert(conn, "charge")
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatalf("ROLLBACK: %v", err)
	}
	f.wantWrites("after ROLLBACK", "charge", 0)
	if row := get(t, f.d, key); row.State != driver.Running || row.Owner != "owner-1" || row.Response != nil {
		t.Errorf("after ROLLBACK: row %v, owner %q, response %+v; want owner-1's running claim, no response", row.State, row.Owner, row.Response)
	}
}

// An attempt whose lease lapsed and whose key another claim took over
// cannot commit: CommitComplete is ErrNotOwner, the attempt's write is
// rolled back with it, the row stays the new owner's, and the connection
// serves a next transaction.
func testCommitCompleteFenced(t *testing.T, f *txFixture) {
	key := testKey("tx-fenced")
	mustClaim(t, f.d, req(key, fpA, "stalled", short, day))
	conn := f.begin()
	f.mustInsert(conn, "stalled")
	time.Sleep(after)
	if res := mustClaim(t, f.d, req(key, fpA, "takeover", hold, day)); !res.TookOver {
		t.Fatalf("the takeover's claim: TookOver = false, want true")
	}
	err := f.d.CommitComplete(t.Context(), conn, key, "stalled", sampleResponse(), day)
	wantErr(t, "CommitComplete by the owner whose claim was taken over", err, driver.ErrNotOwner)
	f.wantWrites("after the refused CommitComplete", "stalled", 0)
	if row := get(t, f.d, key); row.State != driver.Running || row.Owner != "takeover" || row.Response != nil {
		t.Errorf("after the refused CommitComplete: row %v, owner %q, response %+v; want the takeover's running claim", row.State, row.Owner, row.Response)
	}
	// The connection is clean: a next transaction on it commits.
	if err := f.d.Begin(t.Context(), conn); err != nil {
		t.Fatalf("Begin after the refusal: %v", err)
	}
	f.mustInsert(conn, "next")
	if _, err := conn.ExecContext(t.Context(), "COMMIT"); err != nil {
		t.Fatalf("COMMIT of the next transaction: %v", err)
	}
	f.wantWrites("after the next transaction", "next", 1)
}

// A statement that fails by its own fault (here, a table that does not
// exist) is no unavailability of the database: Unavailable says false, so
// oke answers 500, not 503.
func testStatementFault(t *testing.T, f *txFixture) {
	conn := f.begin()
	_, err := conn.ExecContext(t.Context(), "SELECT * FROM oke_drivertest_no_such_table")
	if err == nil {
		t.Fatal("a statement on a table that does not exist worked")
	}
	if f.d.Unavailable(err) {
		t.Errorf("Unavailable(%v) = true, want false: the statement's fault, not the database's", err)
	}
}

// createHeldRun creates a run held by owner for the CommitStep rules.
func createHeldRun(t *testing.T, f *txFixture, id, owner string) driver.Journal {
	t.Helper()
	j := f.d.(driver.Journal)
	run := newRun(id)
	run.Owner = owner
	if _, err := j.CreateRun(t.Context(), run, hold); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return j
}

func txStep(seq int) driver.Step {
	now := time.Now()
	return driver.Step{Seq: seq, Name: "charge", Result: []byte(`{"id":7}`), Attempts: 1, StartedAt: now.Add(-time.Millisecond), FinishedAt: now}
}

// wantSteps fails unless run id has n saved steps.
func wantSteps(t *testing.T, j driver.Journal, what, id string, n int) []driver.Step {
	t.Helper()
	_, steps, err := j.GetRun(t.Context(), id)
	if err != nil {
		t.Fatalf("%s: GetRun: %v", what, err)
	}
	if len(steps) != n {
		t.Errorf("%s: %d saved steps, want %d", what, len(steps), n)
	}
	return steps
}

// A durable step's writes and its saved result commit together.
func testCommitStep(t *testing.T, f *txFixture) {
	j := createHeldRun(t, f, "run-tx-step", "worker-1")
	conn := f.begin()
	f.mustInsert(conn, "payment")
	if err := f.d.CommitStep(t.Context(), conn, "run-tx-step", "worker-1", txStep(1)); err != nil {
		t.Fatalf("CommitStep: %v", err)
	}
	if steps := wantSteps(t, j, "after CommitStep", "run-tx-step", 1); len(steps) == 1 && string(steps[0].Result) != `{"id":7}` {
		t.Errorf("the saved step's result = %s, want {\"id\":7}", steps[0].Result)
	}
	f.wantWrites("after CommitStep", "payment", 1)
}

// A step whose run another execution holds cannot save: CommitStep is
// ErrNotOwner, and the step's write is rolled back with it.
func testCommitStepFenced(t *testing.T, f *txFixture) {
	j := createHeldRun(t, f, "run-tx-fenced", "worker-2")
	conn := f.begin()
	f.mustInsert(conn, "payment")
	err := f.d.CommitStep(t.Context(), conn, "run-tx-fenced", "worker-1", txStep(1))
	wantErr(t, "CommitStep by an owner that does not hold the run", err, driver.ErrNotOwner)
	wantSteps(t, j, "after the refused CommitStep", "run-tx-fenced", 0)
	f.wantWrites("after the refused CommitStep", "payment", 0)
}

// A step saved out of order is refused (ErrStepOrder), with its write.
func testCommitStepOrder(t *testing.T, f *txFixture) {
	j := createHeldRun(t, f, "run-tx-order", "worker-1")
	conn := f.begin()
	f.mustInsert(conn, "payment")
	err := f.d.CommitStep(t.Context(), conn, "run-tx-order", "worker-1", txStep(2))
	wantErr(t, "CommitStep of step 2 before step 1", err, driver.ErrStepOrder)
	wantSteps(t, j, "after the refused CommitStep", "run-tx-order", 0)
	f.wantWrites("after the refused CommitStep", "payment", 0)
}

// --- TxClaimer --------------------------------------------------------------

// The claim of a free key, sent with the flow's first statement, goes to
// the flow: the ticket is told once, the statement runs, in a transaction
// that commits with the response.
func testBeginClaimedWinner(t *testing.T, f *txFixture) {
	key := testKey("claimed-winner")
	tk := &ticket{req: req(key, fpA, "owner-1", hold, day)}
	conn, err := f.beginClaimed(tk, "charge")
	if err != nil || tk.taken != 1 || tk.done != 1 || !tk.res.Claimed {
		t.Fatalf("the first statement behind the claim of a free key: %v; claim %+v (taken %d, told %d times); want it claimed, the statement run", err, tk.res, tk.taken, tk.done)
	}
	resp := tracedResponse()
	if err := f.d.CommitComplete(t.Context(), conn, key, "owner-1", resp, day); err != nil {
		t.Fatalf("CommitComplete: %v", err)
	}
	f.wantCompleted("after CommitComplete", key, resp)
	f.wantWrites("after CommitComplete", "charge", 1)
}

// A claim of a key another request runs is refused: the ticket is told
// (not claimed, the holder's row), the first statement and every later
// one return the ticket's error and none runs, COMMIT and ROLLBACK
// succeed, and the connection serves a next transaction as new.
func testBeginClaimedRunning(t *testing.T, f *txFixture) {
	key := testKey("claimed-running")
	mustClaim(t, f.d, req(key, fpA, "first", hold, day))
	for _, end := range []string{"ROLLBACK", "COMMIT"} {
		tk := &ticket{req: req(key, fpA, "second-"+end, hold, day)}
		conn, err := f.beginClaimed(tk, "second")
		if !errors.Is(err, errNotOurs) || tk.taken != 1 || tk.done != 1 || tk.res.Claimed || tk.res.Row.Owner != "first" {
			t.Fatalf("%s: the first statement behind a claim of a running key: %v; claim %+v (taken %d, told %d times); want the ticket's refusal, the claim taken and told once, the holder's row",
				end, err, tk.res, tk.taken, tk.done)
		}
		if err := f.insert(conn, "second"); !errors.Is(err, errNotOurs) {
			t.Errorf("%s: a later statement: %v, want the ticket's refusal", end, err)
		}
		if _, err := conn.ExecContext(t.Context(), end); err != nil {
			t.Errorf("%s after the refusal: %v, want it to succeed", end, err)
		}
		f.wantWrites(end+": after the refusal", "second", 0)
		if err := f.d.Begin(t.Context(), conn); err != nil {
			t.Fatalf("%s: Begin after the refusal: %v", end, err)
		}
		f.mustInsert(conn, "next-"+end)
		if _, err := conn.ExecContext(t.Context(), "COMMIT"); err != nil {
			t.Fatalf("%s: COMMIT of the next transaction: %v", end, err)
		}
		f.end(conn)
		f.wantWrites(end+": the next transaction", "next-"+end, 1)
	}
	if row := get(t, f.d, key); row.State != driver.Running || row.Owner != "first" {
		t.Errorf("the row: %v, owner %q; want first's running claim", row.State, row.Owner)
	}
}

// A completed key replays, also through BeginClaimed: the ticket gets the
// stored response, and the flow's statement does not run.
func testBeginClaimedCompleted(t *testing.T, f *txFixture) {
	key := testKey("claimed-completed")
	mustClaim(t, f.d, req(key, fpA, "first", hold, day))
	resp := tracedResponse()
	complete(t, f.d, key, "first", resp, day)
	tk := &ticket{req: req(key, fpA, "replay", hold, day)}
	conn, err := f.beginClaimed(tk, "replay")
	if !errors.Is(err, errNotOurs) || tk.res.Claimed || tk.res.Row.State != driver.Completed || diffResponse(tk.res.Row.Response, &resp) != "" {
		t.Errorf("a claim of a completed key: %v; claim %+v; want the stored response, the statement not run", err, tk.res)
	}
	f.end(conn)
	f.wantWrites("after the replay", "replay", 0)
	f.wantCompleted("after the replay", key, resp)
}

// A ticket whose claim was made already (Take says so) is not claimed
// again: when the claim went to the request the statement runs in a
// transaction (a ROLLBACK undoes it); when it did not the statement
// returns the ticket's error and does not run.
func testBeginClaimedMade(t *testing.T, f *txFixture) {
	for _, c := range []struct {
		name string
		made error
	}{{"made and ours", nil}, {"made and refused", errNotOurs}} {
		tk := &ticket{req: req(testKey("claimed-made"), fpA, "owner-1", hold, day), made: true, madeErr: c.made}
		note := "write " + c.name
		conn, err := f.beginClaimed(tk, note)
		if !errors.Is(err, c.made) || (c.made == nil && err != nil) || tk.taken != 0 || tk.done != 0 {
			t.Errorf("%s: the statement: %v; Take handed the claim over %d times, Done told %d times; want %v, no claim", c.name, err, tk.taken, tk.done, c.made)
		}
		if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
			t.Errorf("%s: ROLLBACK: %v", c.name, err)
		}
		f.end(conn)
		f.wantWrites(c.name+", rolled back", note, 0)
	}
	f.wantNoRow("after tickets whose claims were made", testKey("claimed-made"))
}

// A claim held in the flow's transaction (InTx) leaves no row and no write
// while the transaction is open; its commit with the response stores
// both.
func testHeldInvisible(t *testing.T, f *txFixture) {
	key := testKey("held-invisible")
	conn := f.mustHold(key, "owner-1", "charge")
	f.wantNoRow("while the held claim's transaction is open", key)
	f.wantWrites("while the held claim's transaction is open", "charge", 0)
	resp := sampleResponse()
	if err := f.d.CommitComplete(t.Context(), conn, key, "owner-1", resp, day); err != nil {
		t.Fatalf("CommitComplete of the held claim: %v", err)
	}
	f.wantCompleted("after CommitComplete", key, resp)
	f.wantWrites("after CommitComplete", "charge", 1)
}

// While a held claim's transaction is open, another held claim of the key
// is refused and its statement does not run; once the first rolls back,
// nothing of it remains and the key is free at once.
func testHeldRefusesOthers(t *testing.T, f *txFixture) {
	key := testKey("held-refuses")
	first := f.mustHold(key, "first", "first")
	second, tk, err := f.held(key, "second", "second")
	if !errors.Is(err, errNotOurs) || tk.res.Claimed || tk.done != 1 {
		t.Errorf("a second held claim while the first's transaction is open: %v; claim %+v (told %d times); want it refused, the statement not run", err, tk.res, tk.done)
	}
	f.end(second)
	if _, err := first.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatalf("ROLLBACK of the first: %v", err)
	}
	f.end(first)
	f.wantNoRow("after the first rolled back", key)
	f.wantWrites("after the first rolled back", "first", 0)
	f.wantWrites("after the first rolled back", "second", 0)
	third, tk, err := f.held(key, "third", "third")
	if err != nil || !tk.res.Claimed {
		t.Fatalf("a held claim after the rollback: %v; claim %+v; want the key free", err, tk.res)
	}
	if err := f.d.CommitComplete(t.Context(), third, key, "third", sampleResponse(), day); err != nil {
		t.Fatalf("CommitComplete of the third: %v", err)
	}
	f.wantWrites("after the third committed", "third", 1)
}

// A claim made outside any transaction (Claim) while a held claim's
// transaction is open: both run, and the completion decides. The held
// one's CommitComplete finds the row taken, is ErrNotOwner, and rolls its
// write back; the row stays the other claim's.
func testHeldLoses(t *testing.T, f *txFixture) {
	key := testKey("held-loses")
	conn := f.mustHold(key, "held", "held")
	res := claim(t, f.d, req(key, fpA, "other", hold, day))
	if !res.Claimed {
		// A driver may refuse it too (the held claim is the one running);
		// then the held one completes.
		if err := f.d.CommitComplete(t.Context(), conn, key, "held", sampleResponse(), day); err != nil {
			t.Fatalf("CommitComplete of the held claim, the other refused: %v", err)
		}
		f.wantWrites("after CommitComplete", "held", 1)
		return
	}
	err := f.d.CommitComplete(t.Context(), conn, key, "held", sampleResponse(), day)
	wantErr(t, "CommitComplete of a held claim whose key another claim took", err, driver.ErrNotOwner)
	f.wantWrites("after the refused CommitComplete", "held", 0)
	if row := get(t, f.d, key); row.State != driver.Running || row.Owner != "other" {
		t.Errorf("the row: %v, owner %q; want the other claim's, running", row.State, row.Owner)
	}
}

// A held claim of a key whose row has expired replaces it: its commit
// stores the new response, also when a sweep deleted the expired row
// while the flow ran.
func testHeldReplacesExpired(t *testing.T, f *txFixture) {
	for _, swept := range []bool{false, true} {
		key := testKey("held-expired")
		if swept {
			key = testKey("held-expired-swept")
		}
		mustClaim(t, f.d, req(key, fpB, "old", hold, short))
		complete(t, f.d, key, "old", driver.Response{Status: 200, Body: []byte(`"old"`),
			Trace: "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"}, short)
		time.Sleep(after)
		conn := f.mustHold(key, "new", "new")
		if swept {
			if _, err := f.d.Sweep(t.Context(), 0); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
		}
		resp := tracedResponse()
		if err := f.d.CommitComplete(t.Context(), conn, key, "new", resp, day); err != nil {
			t.Fatalf("swept %v: CommitComplete over the expired row: %v", swept, err)
		}
		f.end(conn)
		f.wantCompleted("after CommitComplete over the expired row", key, resp)
		if row := get(t, f.d, key); row.Fingerprint != fpA {
			t.Errorf("swept %v: fingerprint %q, want the new claim's", swept, row.Fingerprint)
		}
	}
	f.wantWrites("after both", "new", 2)
}
