package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPostgresBackendsKilledMidLoad has eight clients charge one demo
// process on -postgres, each request with a key and an amount of its own,
// while the test ends every server connection of the test's database
// (pg_terminate_backend) six times: oke's pool and the business pool both
// lose theirs mid-request. Every answer must be a 201, a 409
// IdempotencyInProgress with Retry-After, or a 503 with the JSON error
// envelope — no 500, no hang past the client's 15s timeout. Then every key
// is sent again until it settles: each ends with a 201 and exactly one
// charge row, a 201 seen during the load replays, and the same process —
// never restarted — takes a new charge.
//
// It runs twice: as the demo runs by default (the claim oke picks for
// payments.charge: in the charge's transaction when its contract allows),
// and with -claim-first (the claim made before the flow runs).
func TestPostgresBackendsKilledMidLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo binary under load")
	}
	for _, v := range []struct {
		name  string
		flags []string
	}{{"default claim", nil}, {"claim first", []string{"-claim-first"}}} {
		t.Run(v.name, func(t *testing.T) {
			pg := newPgDatabase(t, 1) // fails when no Postgres server answers
			ended := 0
			chargeThroughOutages(t, pg, 6, func(t *testing.T) string {
				n := pg.terminateBackends(t)
				ended += n
				return fmt.Sprintf("%d backends ended", n)
			}, v.flags...)
			if ended == 0 {
				t.Errorf("pg_terminate_backend ended no backend of %s: the test did not cut the demo off", pg.name)
			}
		})
	}
}

// chargeThroughOutages runs the demo on pg (with extra flags) under the
// load of eight clients, cuts it off from its database outages times (cut
// says what it did), and checks the answers and the charges table: see
// TestPostgresBackendsKilledMidLoad.
func chargeThroughOutages(t *testing.T, pg *pgDatabase, outages int, cut func(t *testing.T) string, extra ...string) {
	t.Helper()
	start := time.Now()
	bin := demoBinary(t)
	var log demoLog
	dsn, _ := pg.demoDSN(t)
	cmd, base := startLoggedDemo(t, bin, t.TempDir(), &log, append([]string{"-postgres", dsn, "-lease", "1s", "-poll", "50ms"}, extra...)...)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	hc := &http.Client{Timeout: 15 * time.Second}
	const workers = 8

	var (
		mu       sync.Mutex
		seq      int
		amounts  = map[string]int{}  // every key sent → its amount
		acked    = map[string]ack{}  // keys whose 201 a client saw
		notRun   = map[string]bool{} // keys answered 503 StoreUnavailable: "the request was not run"
		statuses = map[string]int{}  // "201", "201 replayed", "409", "503 StoreUnavailable", …
		wrong    []string            // answers the test does not accept
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				seq++
				key := fmt.Sprintf("pg-outage-%07d-%08x", seq, rand.Uint32())
				amount := 1000 + seq
				amounts[key] = amount
				mu.Unlock()
				a, err := send(hc, "POST", base+"/charges", chargeBody(amount), "Idempotency-Key", key)
				class, bad := classify(a, err)
				mu.Lock()
				statuses[class]++
				if bad != "" {
					wrong = append(wrong, key+": "+bad)
				}
				if a.status == 201 {
					acked[key] = ack{body: a.body, location: a.header.Get("Location")}
				}
				if class == "503 StoreUnavailable" {
					notRun[key] = true
				}
				mu.Unlock()
				if a.status != 201 {
					time.Sleep(20 * time.Millisecond) // a client backs off; no storm of fresh keys
				}
			}
		})
	}

	var cuts []string
	for range outages {
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		cuts = append(cuts, cut(t))
	}
	time.Sleep(300 * time.Millisecond) // load after the last one too
	close(stop)
	wg.Wait()

	select {
	case <-exited:
		t.Fatalf("the demo exited during the load: %v", cmd.ProcessState)
	default:
	}
	final := settleKeys(base, amounts, workers)
	var notReplayed []string
	for key, want := range acked {
		f := final[key]
		if f.status != 201 || !f.replayed || f.body != want.body || f.location != want.location {
			notReplayed = append(notReplayed, fmt.Sprintf("%s: 201 %s during the load, the retry got %d replayed=%v %s (%v)",
				key, strings.TrimSpace(want.body), f.status, f.replayed, strings.TrimSpace(f.body), f.err))
		}
	}
	// Honest 503s: a key answered StoreUnavailable ("the request was not
	// run") must not have run: its retry runs it live, never replays a
	// stored success of the first attempt. (A client that believed the
	// message and minted a new key would otherwise pay twice.)
	var lied []string
	for key := range notRun {
		if f := final[key]; f.replayed {
			lied = append(lied, fmt.Sprintf("%s: 503 StoreUnavailable during the load, then its retry replayed %d %s", key, f.status, strings.TrimSpace(f.body)))
		}
	}
	l := checkLedger(amounts, final, pg.chargeRows(t))

	var seen []string
	for class, n := range statuses {
		seen = append(seen, fmt.Sprintf("%s: %d", class, n))
	}
	sort.Strings(seen)
	t.Logf("%d outages (%s) in %s: %d keys sent (%s); after retries %d ended with 201, %d charge rows, %d keys charged twice",
		outages, strings.Join(cuts, "; "), time.Since(start).Round(time.Millisecond), len(amounts), strings.Join(seen, ", "), l.keys201, l.rows, len(l.doubled))
	report(t, "answers during the load that are not 201, 409 IdempotencyInProgress with Retry-After, or a 503 envelope", wrong)
	if len(wrong) > 0 {
		report(t, "lines the demo logged about failed flows", log.matching("flow failed"))
	}
	report(t, "keys charged twice", l.doubled)
	report(t, "keys answered 201 during the load whose retry did not replay it", notReplayed)
	report(t, "keys answered 503 StoreUnavailable whose retry replayed a stored answer (the request had run)", lied)
	t.Logf("%d keys answered 503 StoreUnavailable; none of their retries may replay", len(notRun))
	report(t, "other differences between the answers and the charges table", l.problems)
	if l.rows != l.keys201 {
		t.Errorf("%d charge rows for %d keys that ended with a 201, want one each", l.rows, l.keys201)
	}

	// The same process, never restarted, serves new requests.
	select {
	case <-exited:
		t.Fatalf("the demo exited: %v", cmd.ProcessState)
	default:
	}
	key := fmt.Sprintf("pg-outage-after-%016x", rand.Uint64())
	a, err := send(hc, "POST", base+"/charges", chargeBody(999), "Idempotency-Key", key)
	if err != nil || a.status != 201 || a.header.Get("Idempotent-Replayed") == "true" {
		t.Fatalf("a new charge after the load: %v %d %s, want a live 201", err, a.status, a.body)
	}
	if a, err := send(hc, "GET", base+a.header.Get("Location"), ""); err != nil || a.status != 200 {
		t.Fatalf("GET the new charge: %v %d %s", err, a.status, a.body)
	}
}

// classify names an answer for the tally, and says what is wrong with it
// ("" when it is one the test accepts).
func classify(a answer, err error) (class, bad string) {
	if err != nil {
		return "no answer", fmt.Sprintf("no answer: %v", err)
	}
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	envErr := json.Unmarshal([]byte(a.body), &env)
	code := env.Error.Code
	switch a.status {
	case 201:
		if a.header.Get("Idempotent-Replayed") == "true" {
			return "201 replayed", ""
		}
		return "201", ""
	case 409:
		if code != "IdempotencyInProgress" || a.header.Get("Retry-After") == "" {
			return "409 " + code, fmt.Sprintf("409 %s Retry-After %q, want IdempotencyInProgress with Retry-After", strings.TrimSpace(a.body), a.header.Get("Retry-After"))
		}
		return "409", ""
	case 503:
		if envErr != nil || code == "" || env.Error.Message == "" || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
			return "503 (no envelope)", fmt.Sprintf("503 %q (Content-Type %q), want the JSON error envelope", a.body, a.header.Get("Content-Type"))
		}
		return "503 " + code, ""
	}
	return fmt.Sprintf("%d %s", a.status, code), fmt.Sprintf("%d %s", a.status, strings.TrimSpace(a.body))
}

// TestPostgresServerRestartedMidLoad is TestPostgresBackendsKilledMidLoad
// with a whole server going away: it starts a throwaway server of its own
// (scripts/pg on a free port, never the shared one) and restarts it three
// times under the load, in fast mode (connections ended, a clean shutdown)
// and in immediate mode (every server process killed; crash recovery at the
// start). While it is down the demo cannot connect at all. It needs the
// PostgreSQL server binaries; without them it skips, except in CI.
func TestPostgresServerRestartedMidLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server and runs the demo binary under load")
	}
	srv := startThrowawayServer(t)
	pg := &pgDatabase{name: "test", dsn: srv.url}
	db, err := sql.Open("pgx", srv.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pg.db = db
	i := 0
	chargeThroughOutages(t, pg, 3, func(t *testing.T) string {
		mode := []string{"fast", "immediate"}[i%2]
		i++
		began := time.Now()
		srv.restart(t, mode)
		return fmt.Sprintf("restarted in %s mode in %s", mode, time.Since(began).Round(time.Millisecond))
	})
}

// throwawayServer is a PostgreSQL server that scripts/pg started for one
// test.
type throwawayServer struct {
	url   string // its database "test"
	data  string // its data directory
	pgCtl string // the pg_ctl binary
}

// startThrowawayServer starts a server with scripts/pg on a free port and
// stops it (deleting its data) when the test ends.
func startThrowawayServer(t *testing.T) *throwawayServer {
	t.Helper()
	pgCtl := findPgCtl()
	if pgCtl == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI: no pg_ctl (PostgreSQL server binaries): scripts/pg installs them before the tests")
		}
		t.Skip("no PostgreSQL server binaries (pg_ctl) to start a throwaway server with")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "pg"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PGPORT=%d", port))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/pg on port %d: %v\n%s", port, err, stderr.String())
	}
	srv := &throwawayServer{pgCtl: pgCtl}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "export OKE_TEST_DATABASE_URL="); ok {
			srv.url = strings.Trim(v, "'")
		}
		if v, ok := strings.CutPrefix(line, "export OKE_PG_DATA="); ok {
			srv.data = strings.Trim(v, "'")
		}
	}
	if srv.data == "" {
		// Something answered on the port before scripts/pg could start a
		// server there: not ours to restart.
		t.Fatalf("scripts/pg did not start a server on port %d (another one answers there?):\n%s%s", port, out, stderr.String())
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", srv.data).CombinedOutput(); err != nil {
			t.Errorf("scripts/pg stop %s: %v\n%s", srv.data, err, out)
		}
	})
	return srv
}

// restart restarts the server in mode (fast or immediate) and waits until it
// accepts connections again. As root it runs pg_ctl as the server's user,
// like scripts/pg.
func (s *throwawayServer) restart(t *testing.T, mode string) {
	t.Helper()
	args := []string{s.pgCtl, "-D", s.data, "-l", filepath.Join(s.data, "server.log"), "-m", mode, "-w", "-t", "60", "restart"}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl restart -m %s: %v\n%s", mode, err, out)
	}
}

// findPgCtl finds pg_ctl where scripts/pg looks for the server binaries.
func findPgCtl() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	if len(dirs) > 0 {
		return dirs[0]
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return p
	}
	return ""
}
