// Package drivertest is the conformance suite every oke driver runs. A driver
// is correct when Run passes against it, under the race detector:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, func(t *testing.T) driver.Driver {
//			d, err := file.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return d
//		})
//	}
//
// Each rule is a subtest named after it (ClaimIsAtomicUnderConcurrency,
// StaleOwnerCannotComplete, ...), so a failure names the rule that broke.
//
// A driver that keeps its rows in a SQL database a flow can write to
// (driver.TxDriver, and driver.TxClaimer) also runs RunTx, the rules of a
// flow's transaction: the flow's writes commit with its stored response
// or saved step, atomically and fenced by owner, or not at all; a claim
// sent with the transaction's first statement runs that statement only
// for the claim's winner. RunTx writes through the driver's own database/sql
// connections (DB) to a table the caller's Setup creates, in the driver's
// dialect:
//
//	func TestTxConformance(t *testing.T) {
//		drivertest.RunTx(t, newDriver, drivertest.TxOptions{
//			Setup: func(ctx context.Context, d driver.Driver, conn *sql.Conn) (drivertest.Writes, error) {
//				_, err := conn.ExecContext(ctx, `CREATE TABLE writes (note text NOT NULL)`)
//				return drivertest.Writes{
//					Insert: `INSERT INTO writes (note) VALUES ($1)`,
//					Count:  `SELECT count(*) FROM writes WHERE note = $1`,
//				}, err
//			},
//		})
//	}
//
// A driver without the capability (memory, file) skips RunTx by
// capability, saying which one it lacks; its test may call it all the same.
//
// The suite uses the driver's real clock: a store such as Postgres computes
// leases from its own now(), so nothing here can fake time. Rules about a lease
// or TTL that has ended use ~20ms durations and then sleep a few times longer;
// rules about a lease that still holds use leases of a minute or more. The
// suite only ever relies on "enough time has passed", never on "not yet", so a
// loaded machine makes it slower, not flaky.
package drivertest

import (
	"testing"

	"github.com/okengine/oke/driver"
)

// Run runs every conformance rule as a parallel subtest: the row primitives
// (rows.go); under "HTTP", every Idempotency-Key rule end to end through an
// oke.App on the driver (RunHTTP); and, when the driver implements the
// optional driver.Journal, under "Journal", every journal rule (RunJournal)
// and, under "Durable", every durable-execution rule end to end (RunDurable).
// newDriver must return a fresh, empty driver each time it is called (a new
// folder, a new schema); Run calls it once per subtest, and once up front to
// see whether the driver is a driver.Journal, and closes the driver when the
// subtest ends, so Close may be called twice and must not fail the second
// time loudly (its error is ignored). Register any further cleanup with
// t.Cleanup in newDriver: it runs after that Close.
func Run(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	probe := newDriver(t)
	_, isJournal := probe.(driver.Journal)
	_ = probe.Close()
	runRules(t, newDriver, rowRules)
	t.Run("HTTP", func(t *testing.T) { RunHTTP(t, newDriver) })
	if isJournal {
		t.Run("Journal", func(t *testing.T) {
			t.Parallel()
			RunJournal(t, newDriver)
		})
		t.Run("Durable", func(t *testing.T) {
			t.Parallel()
			RunDurable(t, newDriver)
		})
		t.Run("Schedules", func(t *testing.T) {
			t.Parallel()
			RunSchedules(t, newDriver)
		})
	}
}

// runRules runs each rule as a parallel subtest named after it, on a fresh
// driver that is closed when the subtest ends.
func runRules(t *testing.T, newDriver func(t *testing.T) driver.Driver, rules []rowRule) {
	t.Helper()
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			d := newDriver(t)
			t.Cleanup(func() { _ = d.Close() })
			r.test(t, d)
		})
	}
}
