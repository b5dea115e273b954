package app_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/pgtest"
)

// newDatabase creates a database of its own for a test that holds up to
// conns connections to it at once (its demos' and its own: demoConns,
// procConns, testDB); it is dropped when the test ends, after the demos'
// own cleanups, which were registered later. It returns a DSN for the
// database: oke's schema and the business tables to itself, so runs never
// collide. Open a demo on it with demoDSN or procDSN. The demo's -postgres
// mode is tested against a real server, never skipped (internal/pgtest).
func newDatabase(t *testing.T, conns int) string {
	t.Helper()
	pgtest.Need(t, conns)
	_, dsn := pgtest.NewDatabase(t, "oke_demo_test")
	return dsn
}

// The test server is shared with other tests and other clients: a demo's
// pools are small, and the connections they can hold are charged to the
// test's share of internal/pgtest's budget.
const (
	// demoPoolSize is the size of the Postgres driver's pools in a demo
	// (pool_max_conns in its -postgres DSN): with its wake-up listener the
	// driver holds 2*demoPoolSize+1 connections at most.
	demoPoolSize = 2
	// demoBusinessConns is the size of the business pool of the tests' own
	// demos (SetMaxOpenConns: see openDemo).
	demoBusinessConns = 2
	// demoConns is what one of the tests' own demos on -postgres holds at
	// most.
	demoConns = 2*demoPoolSize + 1 + demoBusinessConns
	// procConns is what a demo process on -postgres holds at most. Its
	// business pool the demo sizes itself (16; a DSN does not change it):
	// it grows to the most statements the process ever ran on it at once,
	// which in these tests is its migration and a read, or (in
	// TestThreeInstancesOnePostgres) the steps of the three pipelines one
	// process runs at once and a read.
	procConns = 2*demoPoolSize + 1 + 4
)

// demoDSN returns a -postgres DSN on the database at dsn for one of the
// tests' own demos (openDemo), its connections charged to the test's share,
// and done, which waits until the demo's backends are gone once it is closed
// and gives them back (for a restart; the test's end does it too).
func demoDSN(t *testing.T, dsn string) (demo string, done func()) {
	t.Helper()
	c := pgtest.Charge(t, demoConns)
	return c.DSN(pgtest.WithPoolSize(dsn, demoPoolSize)), c.Done
}

// procDSN returns a -postgres DSN on the database at dsn for one demo
// process, its connections charged to the test's share.
func procDSN(t *testing.T, dsn string) string {
	t.Helper()
	return pgtest.Charge(t, procConns).DSN(pgtest.WithPoolSize(dsn, demoPoolSize))
}

// testDB opens the test's own connection to the database at dsn, closed
// when the test ends.
func testDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.Charge(t, 1).DSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// openDemo opens the demo with cfg, its business pool on Postgres bounded
// (demoBusinessConns).
func openDemo(t *testing.T, cfg app.Config) *app.Server {
	t.Helper()
	s, err := app.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open the demo: %v", err)
	}
	if cfg.Postgres != "" {
		s.DB().SetMaxOpenConns(demoBusinessConns)
	}
	return s
}

// onPostgres reports whether t runs under TestPostgres: setup then opens
// the demo with -postgres on a fresh database instead of -data.
func onPostgres(t *testing.T) bool { return strings.HasPrefix(t.Name(), "TestPostgres/") }

// The demo's route tests again, with -postgres: the Postgres driver and the
// business tables in one database (a fresh one per demo).
func TestPostgres(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"charges", TestPostCharges},
		{"get charges", TestGetCharges},
		{"slow", TestPostSlow},
		{"notes", TestPostNotes},
		{"fail", TestPostFail},
		{"export", TestPostExport},
		{"events", TestGetEvents},
		{"webhook", TestPostWebhook},
		{"identity", TestIdentity},
		{"metrics", TestGetMetrics},
		{"other routes", TestOtherRoutes},
		{"refunds", TestPostRefunds},
		{"refund cut off", TestRefundCutOffStepCallsTheProviderAgainWithTheSameKey},
		{"charges are the tenant's", TestChargesAreTheTenants},
		{"refund at most once", TestRefundAtMostOncePerCharge},
		{"refund once on older data", TestRefundOnceOnOlderData},
		{"every error answer is the envelope", TestEveryErrorAnswerIsTheEnvelope},
		{"pipeline", TestPostPipeline},
		{"reminders", TestPostReminders},
		{"client waits for a durable run", TestClientWaitsForADurableRun},
		{"admin", TestAdmin},
		{"contract", TestContractIsFresh},
		{"nightly sweep", TestNightlySweepRunsOnItsSchedule},
	} {
		t.Run(tc.name, tc.test)
	}
}

// post sends a JSON POST from any goroutine (do fails the test, which only
// the test's goroutine may do).
func post(base, path, body string, hdr ...string) (reply, error) {
	req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// Two demo processes on one -postgres database both serve, and behave as
// one: a key sent to both at once runs the charge once; the other call
// replays it or gets 409; any later retry, on either, replays.
func TestPostgresProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo binary")
	}
	bin := buildDemo(t)
	dsn := newDatabase(t, 2*procConns+1)
	db := testDB(t, dsn)

	// Started together, so that both migrate at once.
	procs := []*proc{
		startProc(t, bin, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-postgres", procDSN(t, dsn)),
		startProc(t, bin, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-postgres", procDSN(t, dsn)),
	}
	for _, p := range procs {
		p.url = waitListening(t, p.stderr, p.done)
		do(t, p.url, "GET", "/healthz", "").want(t, 200, "")
		if !strings.Contains(p.stderr.String(), "driver postgres") {
			t.Fatalf("the demo does not say it runs on Postgres:\n%s", p.stderr)
		}
	}

	const keys = 12
	body := `{"amount":1500,"currency":"usd"}`
	live := map[string]reply{} // key → the answer that ran the charge
	var replays, conflicts int
	for i := range keys {
		key := newKey()
		var (
			wg      sync.WaitGroup
			answers [2]reply
			errs    [2]error
		)
		for j, p := range procs {
			wg.Go(func() { answers[j], errs[j] = post(p.url, "/charges", body, "Idempotency-Key", key) })
		}
		wg.Wait()
		nLive := 0
		for j, r := range answers {
			if errs[j] != nil {
				t.Fatalf("key %d, process %d: %v", i, j, errs[j])
			}
			switch {
			case r.Status == 201 && !r.replayed():
				nLive++
				live[key] = r
			case r.Status == 201:
				replays++
			case r.Status == 409:
				conflicts++
			default:
				t.Fatalf("key %d, process %d: status %d, body %s; want 201 or 409", i, j, r.Status, r.Body)
			}
		}
		if nLive != 1 {
			t.Fatalf("key %d: %d live answers (%d %s / %d %s), want exactly 1",
				i, nLive, answers[0].Status, answers[0].Body, answers[1].Status, answers[1].Body)
		}
		for j, r := range answers {
			if r.Status == 201 && r.replayed() && string(r.Body) != string(live[key].Body) {
				t.Fatalf("key %d, process %d replayed %s, want %s", i, j, r.Body, live[key].Body)
			}
		}
	}

	t.Logf("%d keys, each sent to both processes at once: %d live, %d replays, %d 409s", keys, len(live), replays, conflicts)
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM charges`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != keys {
		t.Fatalf("%d charge rows for %d keys, want one each", rows, keys)
	}
	var ran float64
	for _, p := range procs {
		ran += (&env{t: t, url: p.url}).executions("payments.charge")
	}
	if ran != keys {
		t.Fatalf("payments.charge ran %v times across both processes for %d keys, want %d", ran, keys, keys)
	}

	// Later retries replay on either process, and either reads the charge.
	for key, first := range live {
		for _, p := range procs {
			again := do(t, p.url, "POST", "/charges", body, "Idempotency-Key", key)
			again.want(t, 201, "")
			if !again.replayed() || string(again.Body) != string(first.Body) {
				t.Fatalf("retry: replayed=%v body %s, want a replay of %s", again.replayed(), again.Body, first.Body)
			}
			do(t, p.url, "GET", first.Header.Get("Location"), "").want(t, 200, "")
		}
	}

	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, p.stderr)
		}
	}
}

// A DSN with pgxpool's settings works: the business pool does not send
// them to the server.
func TestPostgresPoolSettingsInDSN(t *testing.T) {
	dsn, _ := demoDSN(t, newDatabase(t, demoConns)) // pool_max_conns
	dsn = pgtest.WithParam(dsn, "pool_max_conn_lifetime", "1h")
	e := setup(t, func(c *app.Config) { c.Postgres = dsn })
	e.charge(100)
	if n := e.count("charges"); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}
