package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/client"
	"github.com/okengine/oke/internal/pgtest"
)

// pgDatabase is a database of its own for one test: oke's schema and the
// demo's business tables both live in it, so runs never collide, and its
// backends can be told apart from other tests' by name.
type pgDatabase struct {
	name string  // the database's name
	dsn  string  // a DSN for it
	db   *sql.DB // a connection to it, for the test's own checks
	// shared says the database is on the test server (internal/pgtest),
	// whose connections the test's share of the budget counts.
	shared bool
}

// The test server is shared with other tests and other clients: a demo
// process's pools are small, and the connections they can hold are charged
// to the test's share of internal/pgtest's budget.
const (
	// demoPoolSize is the size of the Postgres driver's pools in a demo
	// process (pool_max_conns in its -postgres DSN).
	demoPoolSize = 2
	// demoConns is how many connections a demo process on -postgres holds
	// at most: the driver's pools and wake-up listener, and two of its
	// business pool. The demo sizes that pool itself (16; a DSN does not
	// change it); the tests use it only for the demo's migration, health
	// checks and a read now and then, one at a time.
	demoConns = 2*demoPoolSize + 1 + 2
)

// newPgDatabase creates a database with a random name on the test server
// (internal/pgtest: a real server, never skipped) for a test that runs at
// most demos demo processes at once on it; it is dropped (WITH (FORCE))
// when the test ends.
func newPgDatabase(t *testing.T, demos int) *pgDatabase {
	t.Helper()
	pgtest.Need(t, 1+demos*demoConns)
	name, dsn := pgtest.NewDatabase(t, "oke_crash_test")
	// The test's own connection, opened now and kept (terminateBackends
	// spares it): on a busy shared server a new one may be refused later.
	pgtest.Charge(t, 1)
	db, err := sql.Open("pgx", pgtest.WithParam(dsn, "application_name", checkerApp))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	if err := db.Ping(); err != nil {
		t.Fatalf("connect to %s: %v", name, err)
	}
	t.Cleanup(func() { db.Close() })
	return &pgDatabase{name: name, dsn: dsn, db: db, shared: true}
}

// demoDSN returns the -postgres DSN for one demo process, its connections
// charged to the test's share, and done, which waits until the process's
// backends are gone once it has exited and gives the connections back (for
// a restart; the test's end does it too).
func (d *pgDatabase) demoDSN(t *testing.T) (dsn string, done func()) {
	t.Helper()
	dsn = pgtest.WithPoolSize(d.dsn, demoPoolSize)
	if !d.shared {
		return dsn, func() {}
	}
	c := pgtest.Charge(t, demoConns)
	return c.DSN(dsn), c.Done
}

// checkerApp is the application_name of the test's own connection to its
// database.
const checkerApp = "oke-crash-test-checker"

// terminateBackends ends every server process connected to the test's
// database (never another test's: they have databases of their own), but
// the test's own, and returns how many it ended.
func (d *pgDatabase) terminateBackends(t *testing.T) int {
	t.Helper()
	admin := pgtest.Admin(t)
	var n int
	err := admin.QueryRow(`SELECT count(*) FROM (
		SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name <> $2) s WHERE ended`, d.name, checkerApp).Scan(&n)
	if err != nil {
		t.Fatalf("terminate the backends of %s: %v", d.name, err)
	}
	return n
}

// chargeRows reads the charges table: charge ids by amount. The tests give
// every key an amount of its own, so a row says which key it charged.
func (d *pgDatabase) chargeRows(t *testing.T) map[int][]string {
	t.Helper()
	rows, err := d.db.Query(`SELECT amount, id FROM charges ORDER BY seq`)
	if err != nil {
		t.Fatalf("read charges: %v", err)
	}
	defer rows.Close()
	out := map[int][]string{}
	for rows.Next() {
		var amount int
		var id string
		if err := rows.Scan(&amount, &id); err != nil {
			t.Fatal(err)
		}
		out[amount] = append(out[amount], id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read charges: %v", err)
	}
	return out
}

// chargeBody is the body of POST /charges for a key's amount.
func chargeBody(amount int) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"usd"}`, amount)
}

// settled is a key's last answer, once retried to the end.
type settled struct {
	status   int
	body     string
	location string
	replayed bool
	err      error
}

// settleKeys sends POST /charges once more for every key (same body) with
// the retrying client, which waits out 409 IdempotencyInProgress (a lease
// still held by a dead process or a cut-off request) and retries 503 and
// network errors, with workers at once, and returns each key's final
// answer. Each key's retries end after a minute.
func settleKeys(base string, amounts map[string]int, workers int) map[string]settled {
	c, err := client.New(base,
		client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}),
		client.WithRetry(client.Retry{MaxAttempts: 1000, BaseDelay: 20 * time.Millisecond, MaxDelay: 500 * time.Millisecond}))
	if err != nil {
		panic(err) // a constant configuration
	}
	keys := make(chan string)
	out := make(map[string]settled, len(amounts))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for key := range keys {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				resp, err := c.Do(ctx, "POST", "/charges", []byte(chargeBody(amounts[key])), client.Key(key))
				cancel()
				s := settled{err: err}
				if resp != nil {
					s = settled{status: resp.Status, body: string(resp.Body), location: resp.Location, replayed: resp.IdempotentReplayed, err: err}
				}
				if s.status == 201 {
					s.err = nil
				}
				mu.Lock()
				out[key] = s
				mu.Unlock()
			}
		})
	}
	for key := range amounts {
		keys <- key
	}
	close(keys)
	wg.Wait()
	return out
}

// chargeID is the id in a charge's JSON, or "".
func chargeID(body string) string {
	var c struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(body), &c)
	return c.ID
}

// ledger checks what the database holds against what the clients were told:
// every key ends with exactly one charge row, the one its final 201 names,
// and no row belongs to no key. It returns the keys charged twice (or more)
// and fails the test on any other difference; the caller reports counts
// first.
type ledger struct {
	rows     int      // charge rows in all
	keys201  int      // distinct keys whose final answer is 201
	doubled  []string // keys with more than one charge row: "key: ids"
	problems []string // every other difference, one line each
}

func checkLedger(amounts map[string]int, final map[string]settled, rows map[int][]string) ledger {
	var l ledger
	byAmount := make(map[int]string, len(amounts))
	for key, a := range amounts {
		byAmount[a] = key
	}
	for a, ids := range rows {
		l.rows += len(ids)
		if _, ok := byAmount[a]; !ok {
			l.problems = append(l.problems, fmt.Sprintf("charge rows %v (amount %d) belong to no key sent", ids, a))
		}
	}
	for key, a := range amounts {
		f := final[key]
		ids := rows[a]
		if f.status != 201 {
			l.problems = append(l.problems, fmt.Sprintf("key %s: final answer %d %s (%v), want 201", key, f.status, f.body, f.err))
			continue
		}
		l.keys201++
		switch id := chargeID(f.body); {
		case len(ids) > 1:
			l.doubled = append(l.doubled, fmt.Sprintf("%s: %d rows %v, the answer names %s", key, len(ids), ids, id))
		case len(ids) == 0:
			l.problems = append(l.problems, fmt.Sprintf("key %s: 201 %s but no charge row", key, f.body))
		case ids[0] != id || f.location != "/charges/"+id:
			l.problems = append(l.problems, fmt.Sprintf("key %s: the charge row is %s, the answer names %s (Location %q)", key, ids[0], id, f.location))
		}
	}
	return l
}

// demoLog is a demo process's stderr, kept for the test's failure messages.
type demoLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *demoLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

// matching returns the lines that contain s.
func (l *demoLog) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// startLoggedDemo is startDemo, keeping the demo's stderr in log.
func startLoggedDemo(t *testing.T, bin, data string, log *demoLog, flags ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-data", data, "-admin-token", testAdminToken}, flags...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			log.add(sc.Text())
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case url, ok := <-found:
		if !ok {
			cmd.Wait()
			lines := log.matching("")
			t.Fatalf("the demo exited before listening; its last lines:\n%s", strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
		return cmd, url
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the demo did not start listening within a minute")
	}
	return nil, ""
}
