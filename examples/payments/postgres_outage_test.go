package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
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
func TestPostgresBackendsKilledMidLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo binary under load")
	}
	start := time.Now()
	bin := demoBinary(t)
	pg := newPgDatabase(t) // fails when no Postgres server answers
	var log demoLog
	cmd, base := startLoggedDemo(t, bin, t.TempDir(), &log, "-postgres", pg.dsn, "-lease", "1s", "-poll", "50ms")
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	hc := &http.Client{Timeout: 15 * time.Second}
	const workers, terminations = 8, 6

	var (
		mu       sync.Mutex
		seq      int
		amounts  = map[string]int{} // every key sent → its amount
		acked    = map[string]ack{} // keys whose 201 a client saw
		statuses = map[string]int{} // "201", "201 replayed", "409", "503 StoreUnavailable", …
		wrong    []string           // answers the test does not accept
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
				mu.Unlock()
			}
		})
	}

	ended := 0
	for range terminations {
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		ended += pg.terminateBackends(t)
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
	l := checkLedger(amounts, final, pg.chargeRows(t))

	var seen []string
	for class, n := range statuses {
		seen = append(seen, fmt.Sprintf("%s: %d", class, n))
	}
	sort.Strings(seen)
	t.Logf("%d terminations ending %d backends in %s: %d keys sent (%s); after retries %d ended with 201, %d charge rows, %d keys charged twice",
		terminations, ended, time.Since(start).Round(time.Millisecond), len(amounts), strings.Join(seen, ", "), l.keys201, l.rows, len(l.doubled))
	if ended == 0 {
		t.Errorf("pg_terminate_backend ended no backend of %s: the test did not cut the demo off", pg.name)
	}
	report(t, "answers during the load that are not 201, 409 IdempotencyInProgress with Retry-After, or a 503 envelope", wrong)
	if len(wrong) > 0 {
		report(t, "lines the demo logged about failed flows", log.matching("flow failed"))
	}
	report(t, "keys charged twice", l.doubled)
	report(t, "keys answered 201 during the load whose retry did not replay it", notReplayed)
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
