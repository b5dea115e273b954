package app_test

import (
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

// newDatabase creates a database of its own for the test (dropped when it
// ends, after the demo's own cleanup, which was registered later) and
// returns a DSN for it: oke's schema and the business tables to itself, so
// runs never collide. The demo's -postgres mode is tested against a real
// server, never skipped (internal/pgtest).
func newDatabase(t *testing.T) string {
	t.Helper()
	_, dsn := pgtest.NewDatabase(t, "oke_demo_test")
	return dsn
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
		{"admin", TestAdmin},
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
	dsn := newDatabase(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	// Started together, so that both migrate at once.
	procs := []*proc{
		startProc(t, bin, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-postgres", dsn),
		startProc(t, bin, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-postgres", dsn),
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
	dsn := newDatabase(t)
	switch {
	case strings.Contains(dsn, "?"):
		dsn += "&pool_max_conns=8"
	case strings.Contains(dsn, "://"):
		dsn += "?pool_max_conns=8"
	default:
		dsn += " pool_max_conns=8"
	}
	e := setup(t, func(c *app.Config) { c.Postgres = dsn })
	e.charge(100)
	if n := e.count("charges"); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}
