package app_test

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
)

// send sends a request with client c from any goroutine (it never fails the
// test). hdr holds header name/value pairs.
func send(c *http.Client, method, url, body string, hdr ...string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// pipelineLog reads GET /pipeline/{tag} from base.
func pipelineLog(t *testing.T, c *http.Client, base, tag string) app.PipelineLog {
	t.Helper()
	r, err := send(c, "GET", base+"/pipeline/"+tag, "")
	if err != nil || r.Status != 200 {
		t.Fatalf("GET %s/pipeline/%s: %v %d %s", base, tag, err, r.Status, r.Body)
	}
	var log app.PipelineLog
	r.decode(t, &log)
	return log
}

// Three demo processes on one Postgres database behave as one: 200
// requests with 20 Idempotency-Keys, spread over the three at once, run
// each key's charge exactly once (every other call replays it or gets 409),
// and a durable run cut off by SIGKILL of its process is finished by
// another one. By default the pipeline's steps share one transaction, which
// the kill rolls back whole: every step then runs exactly once.
func TestThreeInstancesOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo binary")
	}
	start := time.Now()
	db, procs := startInstances(t, 3)
	c := &http.Client{Timeout: 20 * time.Second}

	if !t.Run("200 requests, 20 keys, 3 processes: each charge runs once", func(t *testing.T) {
		chargeOnceAcross(t, c, db, procs)
	}) {
		return
	}

	cut := 0 // pipelines the kill really cut off mid-run
	if !t.Run("SIGKILL of process 0 mid-run: processes 1 and 2 finish its runs", func(t *testing.T) {
		cut += killMidRun(t, c, db, procs[0], procs[1:], []string{"multi-a", "multi-b", "multi-c"}, true)
	}) {
		return
	}
	if !t.Run("SIGKILL of process 1 mid-run: process 2 finishes its runs", func(t *testing.T) {
		cut += killMidRun(t, c, db, procs[1], procs[2:], []string{"multi-d", "multi-e"}, true)
	}) {
		return
	}
	if cut == 0 {
		t.Fatal("no kill cut a pipeline off mid-run: the test proved nothing about durable runs")
	}

	if err := procs[2].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := procs[2].wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, procs[2].stderr)
	}
	t.Logf("%d of 5 pipelines cut off mid-run; the whole test took %s", cut, time.Since(start).Round(time.Millisecond))
}

// TestThreeInstancesOnePostgresClaimFirst is TestThreeInstancesOnePostgres
// with -claim-first: each request's claim is a row with a lease made before
// its charge runs, where by default oke holds payments.charge's claim in the
// charge's transaction; and a pipeline's steps commit one by one (its
// journaled path), where by default they commit together.
func TestThreeInstancesOnePostgresClaimFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo binary")
	}
	db, procs := startInstances(t, 3, "-claim-first")
	c := &http.Client{Timeout: 20 * time.Second}
	if !t.Run("200 requests, 20 keys, 3 processes: each charge runs once", func(t *testing.T) {
		chargeOnceAcross(t, c, db, procs)
	}) {
		return
	}
	// With -claim-first the pipeline's steps commit one by one (the usual
	// journaled path): a survivor resumes a killed run from its saved steps.
	cut := 0
	if !t.Run("SIGKILL of process 0 mid-run: processes 1 and 2 resume its runs from their saved steps", func(t *testing.T) {
		cut += killMidRun(t, c, db, procs[0], procs[1:], []string{"journaled-a", "journaled-b", "journaled-c"}, false)
	}) {
		return
	}
	if cut == 0 {
		t.Fatal("no kill cut a pipeline off mid-run: the test proved nothing about durable runs")
	}
}

// startInstances starts n demo processes together (so that they migrate at
// once) on a new database, with extra flags, and waits until each serves on
// Postgres. It returns a handle on the database.
func startInstances(t *testing.T, n int, extra ...string) (*sql.DB, []*proc) {
	t.Helper()
	dsn := newDatabase(t, n*procConns+1) // fails when no Postgres server answers
	bin := buildDemo(t)
	db := testDB(t, dsn)
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = startProc(t, bin, append([]string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-postgres", procDSN(t, dsn), "-lease", "2s", "-poll", "50ms"}, extra...)...)
	}
	for _, p := range procs {
		p.url = waitListening(t, p.stderr, p.done)
		do(t, p.url, "GET", "/healthz", "").want(t, 200, "")
		if !strings.Contains(p.stderr.String(), "driver postgres") {
			t.Fatalf("the demo does not say it runs on Postgres:\n%s", p.stderr)
		}
	}
	return db, procs
}

// chargeOnceAcross sends 200 requests with 20 keys, each key's requests
// spread across procs, and checks that each key's charge ran once: one
// live 201 per key, every other answer a replay of it or a 409, one charge
// row per key, and the flow's executions across the processes one per key.
func chargeOnceAcross(t *testing.T, c *http.Client, db *sql.DB, procs []*proc) {
	const keys, perKey, workers = 20, 10, 20
	type job struct{ i, key, proc int }
	type result struct {
		r   reply
		err error
	}
	keyNames := make([]string, keys)
	bodies := make([]string, keys)
	for k := range keyNames {
		keyNames[k] = newKey()
		bodies[k] = fmt.Sprintf(`{"amount":%d,"currency":"usd"}`, 1000+k)
	}
	// Request i carries key i%20 and goes to process i%3: consecutive
	// requests of one key go to different processes.
	jobs := make(chan job, keys*perKey)
	for i := range keys * perKey {
		jobs <- job{i: i, key: i % keys, proc: i % len(procs)}
	}
	close(jobs)
	results := make([]result, keys*perKey)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				r, err := send(c, "POST", procs[j.proc].url+"/charges", bodies[j.key], "Idempotency-Key", keyNames[j.key])
				results[j.i] = result{r, err}
			}
		})
	}
	wg.Wait()

	live := make([]*reply, keys)
	var replays, conflicts int
	for i, res := range results {
		k, p := i%keys, i%len(procs)
		if res.err != nil {
			t.Fatalf("request %d (key %d, process %d): %v", i, k, p, res.err)
		}
		r := res.r
		switch {
		case r.Status == 201 && !r.replayed():
			if live[k] != nil {
				t.Fatalf("key %d: two live 201s: %s and %s — the charge ran twice", k, live[k].Body, r.Body)
			}
			live[k] = &r
		case r.Status == 201:
			replays++
		case r.Status == 409:
			if code := r.errorCode(t); code != "IdempotencyInProgress" {
				t.Fatalf("request %d (key %d, process %d): 409 %s, want IdempotencyInProgress", i, k, p, code)
			}
			conflicts++
		default:
			t.Fatalf("request %d (key %d, process %d): status %d, body %s; want 201 or 409", i, k, p, r.Status, r.Body)
		}
	}
	for k, l := range live {
		if l == nil {
			t.Fatalf("key %d: no live 201 among its %d requests", k, perKey)
		}
	}
	for i, res := range results {
		k := i % keys
		if r := res.r; r.Status == 201 && r.replayed() && string(r.Body) != string(live[k].Body) {
			t.Fatalf("request %d (key %d) replayed %s, want %s", i, k, r.Body, live[k].Body)
		}
	}
	t.Logf("%d requests: %d live, %d replays, %d 409s", keys*perKey, keys, replays, conflicts)

	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM charges`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != keys {
		t.Fatalf("%d charge rows for %d keys, want one each", rows, keys)
	}
	var list struct {
		Charges []app.Charge `json:"charges"`
	}
	do(t, procs[1].url, "GET", "/charges", "").decode(t, &list)
	if len(list.Charges) != keys {
		t.Fatalf("GET /charges lists %d charges, want %d", len(list.Charges), keys)
	}
	var ran float64
	for _, p := range procs {
		ran += (&env{t: t, url: p.url}).executions("payments.charge")
	}
	if ran != keys {
		t.Fatalf("payments.charge ran %v times across the three processes for %d keys, want %d", ran, keys, keys)
	}

	// A later retry of each key replays, on any process.
	for k := range keys {
		r := do(t, procs[k%len(procs)].url, "POST", "/charges", bodies[k], "Idempotency-Key", keyNames[k])
		r.want(t, 201, "")
		if !r.replayed() || string(r.Body) != string(live[k].Body) {
			t.Fatalf("key %d, a later retry: replayed=%v body %s, want a replay of %s", k, r.replayed(), r.Body, live[k].Body)
		}
	}
}

const pipeSteps, pipeStepMs = 6, 150

// killMidRun starts a pipeline per tag on victim at once, SIGKILLs victim
// mid-run (6 steps take 900ms), and has the survivors finish them: each
// tag's request, retried on a survivor with the same key, ends in 201. It
// returns how many pipelines the kill really cut off mid-run.
//
// coalesced: the demo runs the pipeline's steps in one transaction (its
// default on Postgres: docs/durable.md, "One commit per run"), so nothing
// of a run is visible before its commit: the kill comes once every run
// holds its key's lock (its transaction is open), and the kill rolls each
// back whole — every step then runs exactly once, on the survivor. Else
// (-claim-first: a commit per step) the kill comes once every run has
// counted its first step, and the survivor resumes from the saved steps:
// only the step the kill cut off may run twice.
func killMidRun(t *testing.T, c *http.Client, db *sql.DB, victim *proc, survivors []*proc, tags []string, coalesced bool) (cut int) {
	t.Helper()
	steps, stepMs := pipeSteps, pipeStepMs
	keys := make([]string, len(tags))
	bodies := make([]string, len(tags))
	firsts := make([]chan error, len(tags))
	for i, tag := range tags {
		keys[i] = newKey()
		bodies[i] = fmt.Sprintf(`{"tag":%q,"steps":%d,"stepMs":%d}`, tag, steps, stepMs)
		firsts[i] = make(chan error, 1)
		go func() {
			r, err := send(c, "POST", victim.url+"/pipeline", bodies[i], "Idempotency-Key", keys[i])
			if err == nil {
				err = fmt.Errorf("answered %d %s before the kill", r.Status, r.Body)
			}
			firsts[i] <- err
		}()
	}
	// Wait (bounded) until every pipeline is under way, then kill.
	for deadline := time.Now().Add(15 * time.Second); ; {
		started := 0
		if coalesced {
			// Each run's transaction holds its key's lock (exclusive,
			// advisory) from its first statement until it commits at the
			// end.
			if err := db.QueryRow(`SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
				WHERE l.locktype = 'advisory' AND l.mode = 'ExclusiveLock' AND l.granted AND d.datname = current_database()`).Scan(&started); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, tag := range tags {
				if log := pipelineLog(t, c, survivors[0].url, tag); len(log.Steps) > 0 && log.Steps[0].Executions > 0 {
					started++
				}
			}
		}
		// A coalesced run holds a connection of the victim's small pool
		// for its whole transaction, so the runs may take turns: one under
		// way is mid-run enough (the others are cut before they begin).
		if started == len(tags) || coalesced && started > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipelines %q did not all start within 15s on the victim (%d under way); stderr:\n%s", tags, started, victim.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed process was not reaped in 30s")
	}
	for i, tag := range tags {
		select {
		case err := <-firsts[i]:
			t.Logf("pipeline %s, the first request: %v", tag, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("pipeline %s: the first request did not end within 30s of the kill", tag)
		}
		if log := pipelineLog(t, c, survivors[0].url, tag); len(log.Steps) < steps || log.Steps[steps-1].Executions == 0 {
			cut++
		}
	}

	for i, tag := range tags {
		b := survivors[i%len(survivors)]
		want := fmt.Sprintf(`{"tag":%q,"steps":%d}`, tag, steps)
		var got reply
		for deadline := time.Now().Add(30 * time.Second); ; {
			r, err := send(c, "POST", b.url+"/pipeline", bodies[i], "Idempotency-Key", keys[i])
			if err != nil {
				t.Fatalf("pipeline %s: retry on a survivor: %v", tag, err)
			}
			if r.Status == 201 {
				got = r
				break
			}
			if r.Status != 409 {
				t.Fatalf("pipeline %s: retry on a survivor: %d %s, want 201 or 409", tag, r.Status, r.Body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("pipeline %s: not finished by a survivor within 30s of the kill (last: %d %s)", tag, r.Status, r.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if strings.TrimSpace(string(got.Body)) != want {
			t.Fatalf("pipeline %s: 201 %s, want %s", tag, got.Body, want)
		}

		log := pipelineLog(t, c, b.url, tag)
		if len(log.Steps) != steps {
			t.Fatalf("pipeline %s: %+v, want %d steps", tag, log, steps)
		}
		twice := 0
		for j, s := range log.Steps {
			if s.Step != j+1 || s.Executions < 1 || s.Executions > 2 || (coalesced && s.Executions != 1) {
				t.Fatalf("pipeline %s: %+v — every step must run once, the cut one at most twice (exactly once in a coalesced run, whose kill rolled it all back)", tag, log.Steps)
			}
			if s.Executions == 2 {
				twice++
			}
		}
		if twice > 1 {
			t.Fatalf("pipeline %s: %+v — %d steps ran twice after one kill; saved steps must not run again", tag, log.Steps, twice)
		}
		t.Logf("pipeline %s: finished by another process, steps %+v", tag, log.Steps)

		// Any survivor now replays it.
		for _, s := range survivors {
			r := do(t, s.url, "POST", "/pipeline", bodies[i], "Idempotency-Key", keys[i])
			r.want(t, 201, "")
			if !r.replayed() || string(r.Body) != string(got.Body) {
				t.Fatalf("pipeline %s: a further retry: replayed=%v body %s, want a replay of %s", tag, r.replayed(), r.Body, got.Body)
			}
		}
	}
	return cut
}
