package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/pgtest"
)

// The connections a test here holds on the test server (internal/pgtest's
// budget): a demo on -postgres (its driver's pools of 2 with the wake-up
// listener, and its business pool), one oke command at a time (its pool
// of 2), and the test's own driver on one connection.
const (
	demoPoolSize      = 2
	demoBusinessConns = 2
	demoConns         = 2*demoPoolSize + 1 + demoBusinessConns
	cliConns          = 2
	ownConns          = 1
)

// pgSetup opens the demo on a database of its own (oke's tables in schema
// oke) and returns it, the -postgres flag for the commands, and a driver
// of the test's own on the same schema.
func pgSetup(t *testing.T) (*demo, []string, *postgres.Driver) {
	t.Helper()
	pgtest.Need(t, demoConns+cliConns+ownConns)
	_, dsn := pgtest.NewDatabase(t, "oke_cli")
	d := openDemoWith(t, func(cfg *app.Config) {
		cfg.DataDir = t.TempDir()
		cfg.Postgres = pgtest.Charge(t, demoConns).DSN(pgtest.WithPoolSize(dsn, demoPoolSize))
	})
	own, err := postgres.Open(context.Background(), pgtest.Charge(t, ownConns).DSN(pgtest.WithPoolSize(dsn, 1)))
	if err != nil {
		t.Fatalf("open the test's driver: %v", err)
	}
	t.Cleanup(func() { own.Close() })
	return d, []string{"-postgres", pgtest.Charge(t, cliConns).DSN(dsn)}, own
}

// TestRunsOnPostgres: DESIGN.md §11 — every oke runs command works on
// -postgres DSN, beside an app that uses the same database: ls (with its
// next page), show, replay (the app runs the new run), cancel, signal and
// resume, through the engine's calls.
func TestRunsOnPostgres(t *testing.T) {
	d, pg, own := pgSetup(t)
	if code := d.post("/pipeline", `{"tag":"pg","steps":2,"stepMs":0}`, "Idempotency-Key", "cli-pg-pipeline-0001"); code != 201 {
		t.Fatalf("POST /pipeline: %d", code)
	}
	if code := d.post("/reminders", `{"to":"later@example.com","delay":"1h"}`); code != 204 {
		t.Fatalf("POST /reminders: %d", code)
	}
	ch := postJSON(t, d.url+"/charges", `{"amount":500,"currency":"usd"}`, "Idempotency-Key", "cli-pg-charge-0001")
	waiting := postJSON(t, d.url+"/refund-requests", `{"chargeId":"`+ch["id"].(string)+`"}`)["id"].(string)

	stdout, _ := mustRun(t, append([]string{"runs", "ls"}, pg...)...)
	rows := table(t, stdout)
	if len(rows) < 3 || rows[0]["FLOW"] != "demo.pipeline" || rows[0]["STATUS"] != "completed" || rows[0]["STEPS"] != "2" {
		t.Fatalf("runs ls -postgres:\n%s", stdout)
	}
	pipe := rows[0]["ID"]
	var remind string
	for _, r := range rows {
		if r["FLOW"] == "demo.remind" && r["STATUS"] == "sleeping" {
			remind = r["ID"]
		}
	}
	if remind == "" {
		t.Fatalf("runs ls -postgres: no sleeping reminder\n%s", stdout)
	}

	t.Run("ls pages with the command it prints", func(t *testing.T) {
		all := map[string]bool{}
		for _, r := range rows {
			all[r["ID"]] = true
		}
		seen := pages(t, "runs", append([]string{"runs", "ls", "-limit", "1"}, pg...), func(out string) []string {
			var ids []string
			for _, r := range table(t, out) {
				ids = append(ids, r["ID"])
			}
			return ids
		})
		if len(seen) != len(all) {
			t.Fatalf("the pages listed %v, want each of %v once", seen, all)
		}
		for _, id := range seen {
			if !all[id] {
				t.Fatalf("the pages listed %v, want each of %v once", seen, all)
			}
		}
	})

	t.Run("show", func(t *testing.T) {
		v := showJSON(t, pipe, pg...)
		if len(v.Steps) != 2 || v.Steps[1].Name != "step 2" || v.Result == nil || v.Result.Status != 201 {
			t.Fatalf("show -postgres: %+v", v)
		}
		out, _ := mustRun(t, append([]string{"runs", "show", pipe}, pg...)...)
		if !strings.Contains(out, "status    completed") || !strings.Contains(out, "2    step 2  1") {
			t.Fatalf("show -postgres:\n%s", out)
		}
		if code, _, stderr := run(append([]string{"runs", "show", "run_nope"}, pg...)...); code != 1 || !strings.Contains(stderr, "no such run") {
			t.Fatalf("show of an unknown run: exit %d %s", code, stderr)
		}
	})

	t.Run("replay from step 2: the app on the database runs it", func(t *testing.T) {
		stdout, stderr := mustRun(t, append([]string{"runs", "replay", "-from-step", "2", pipe}, pg...)...)
		nid := strings.TrimSpace(stdout)
		if !strings.HasPrefix(nid, "run_") || !strings.Contains(stderr, "(step 1 reused)") || !strings.Contains(stderr, "an app on that database") {
			t.Fatalf("replay -postgres: stdout %q stderr %q", stdout, stderr)
		}
		waitFor(t, "the replay to complete", func() bool { return showJSON(t, nid, pg...).Status == "completed" })
		if got := d.get("/pipeline/pg"); got != `{"tag":"pg","steps":[{"step":1,"executions":1},{"step":2,"executions":2}]}` {
			t.Fatalf("after the replay from step 2: %s", got)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		out, _ := mustRun(t, append([]string{"runs", "cancel", remind}, pg...)...)
		if !strings.Contains(out, "cancelled "+remind+": it is failed with 409 RunCancelled") {
			t.Fatalf("cancel -postgres: %s", out)
		}
		if code, _, stderr := run(append([]string{"runs", "cancel", remind}, pg...)...); code != 1 || !strings.Contains(stderr, "finished") {
			t.Fatalf("cancel of a finished run: exit %d %s", code, stderr)
		}
	})

	t.Run("signal wakes the waiting run", func(t *testing.T) {
		waitFor(t, "the request to wait", func() bool { return showJSON(t, waiting, pg...).Waiting != nil })
		out, _ := mustRun(t, append([]string{"runs", "signal", "-payload", `{"approved":false,"by":"pg"}`, "-key", "cli-pg-k1", waiting, "approval"}, pg...)...)
		if !strings.Contains(out, `sent signal "approval" to `+waiting) {
			t.Fatalf("signal -postgres: %s", out)
		}
		waitFor(t, "the request to finish", func() bool { return showJSON(t, waiting, pg...).Status == "completed" })
		if v := showJSON(t, waiting, pg...); len(v.Signals) != 1 || v.Signals[0].Key != "cli-pg-k1" || v.Signals[0].Step == 0 {
			t.Fatalf("the run's signals: %+v", v.Signals)
		}
	})

	t.Run("resume a dead run: the app picks it up", func(t *testing.T) {
		ctx := context.Background()
		const id = "run_dead_cli_pg"
		if _, err := own.CreateRun(ctx, driver.Run{ID: id, Flow: "demo.pipeline", Input: []byte(`{"tag":"dead","steps":1,"stepMs":0}`),
			Tenant: "default", Principal: "anon", Owner: "w"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := own.FinishRun(ctx, id, "w", driver.Finish{Status: driver.RunDead, Strikes: 10, Error: "dead-lettered after 10 failed pick-ups in a row"}); err != nil {
			t.Fatal(err)
		}
		out, _ := mustRun(t, append([]string{"runs", "ls", "-status", "dead"}, pg...)...)
		if rows := table(t, out); len(rows) != 1 || rows[0]["ID"] != id {
			t.Fatalf("ls -status dead -postgres:\n%s", out)
		}
		out, _ = mustRun(t, append([]string{"runs", "resume", id}, pg...)...)
		if !strings.Contains(out, "resumed "+id+": it is running") {
			t.Fatalf("resume -postgres: %s", out)
		}
		waitFor(t, "the resumed run to complete", func() bool { return showJSON(t, id, pg...).Status == "completed" })
		if code, _, stderr := run(append([]string{"runs", "resume", id}, pg...)...); code != 1 || !strings.Contains(stderr, "not dead-lettered") {
			t.Fatalf("resume of a run that is not dead: exit %d %s", code, stderr)
		}
	})
}

// TestIdempotencyOnPostgres: DESIGN.md §11 — every oke idempotency command
// works on -postgres DSN: ls (paged), show (-reveal), delete (a row in
// flight refused unless -force) and sweep.
func TestIdempotencyOnPostgres(t *testing.T) {
	d, pg, own := pgSetup(t)
	const key = "cli-pg-key-show-0001"
	for _, user := range []string{"user:1", "user:2", "user:3"} {
		if code := d.post("/charges", `{"amount":700,"currency":"usd"}`, "Idempotency-Key", key, "Authorization", "Bearer "+user); code != 201 {
			t.Fatalf("POST /charges as %s: %d", user, code)
		}
	}
	ctx := context.Background()
	// A row in flight: held, its lease an hour long.
	held := driver.Key{Tenant: "default", Principal: "user:9", Flow: "payments.charge", Key: "cli-pg-key-held-0001"}
	if res, err := own.Claim(ctx, driver.ClaimRequest{Key: held, Fingerprint: "f", Owner: "holder", Lease: time.Hour, TTL: time.Hour}); err != nil || !res.Claimed {
		t.Fatalf("claim the held row: %+v %v", res, err)
	}

	t.Run("ls, page by page", func(t *testing.T) {
		stdout, stderr := mustRun(t, append([]string{"idempotency", "ls"}, pg...)...)
		if rows := table(t, stdout); len(rows) != 4 || strings.Contains(stderr, "more") {
			t.Fatalf("ls -postgres: stdout\n%s\nstderr %q", stdout, stderr)
		}
		seen := pages(t, "rows", append([]string{"idempotency", "ls", "-limit", "3"}, pg...), rowKeys(t))
		if len(seen) != 4 || seen[3] != "default/user:9/cli-pg-key-held-0001" {
			t.Fatalf("pages of 3 rows: %v", seen)
		}
	})

	t.Run("show", func(t *testing.T) {
		if rows := rowsJSON(t, append([]string{"idempotency", "show", key}, pg...)...); len(rows) != 3 || !rows[0].BodyHidden {
			t.Fatalf("show -postgres: %+v", rows)
		}
		out, _ := mustRun(t, append([]string{"idempotency", "show", key, "-principal", "user:2", "-reveal"}, pg...)...)
		if !strings.Contains(out, `"amount":700`) {
			t.Fatalf("show -reveal -postgres:\n%s", out)
		}
	})

	t.Run("delete", func(t *testing.T) {
		out, _ := mustRun(t, append([]string{"idempotency", "delete", key, "-principal", "user:1"}, pg...)...)
		if !strings.Contains(out, `deleted the row of "`+key+`" (tenant "default", principal "user:1"`) {
			t.Fatalf("delete -postgres: %s", out)
		}
		code, stdout, stderr := run(append([]string{"idempotency", "delete", held.Key}, pg...)...)
		if code != 1 || !strings.Contains(stderr, "held by a request still running") || !strings.Contains(stderr, "-force") || stdout != "" {
			t.Fatalf("delete of a row in flight: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if _, err := own.Get(ctx, held); err != nil {
			t.Fatalf("the refused row: %v", err)
		}
		mustRun(t, append([]string{"idempotency", "delete", held.Key, "-force"}, pg...)...)
		if _, err := own.Get(ctx, held); err == nil {
			t.Fatal("delete -force left the row in flight")
		}
	})

	t.Run("sweep", func(t *testing.T) {
		for i := range 3 {
			k := driver.Key{Tenant: "default", Principal: "anon", Flow: "demo.note", Key: fmt.Sprintf("cli-pg-expired-%04d", i)}
			if _, err := own.Claim(ctx, driver.ClaimRequest{Key: k, Fingerprint: "f", Owner: "o", Lease: time.Minute, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := own.Complete(ctx, k, "o", driver.Response{Status: 201}, time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond) // past their TTL of 1 ms
		out, _ := mustRun(t, append([]string{"idempotency", "sweep", "-batch", "2"}, pg...)...)
		if strings.TrimSpace(out) != "deleted 3 expired rows in 2 batches of at most 2 rows" {
			t.Fatalf("sweep -postgres: %q", out)
		}
		out, _ = mustRun(t, append([]string{"idempotency", "sweep"}, pg...)...)
		if strings.TrimSpace(out) != "deleted 0 expired rows in 1 batch of at most 1000 rows" {
			t.Fatalf("a second sweep -postgres: %q", out)
		}
	})
}

// TestPostgresMistakes: a DSN's password is never shown, in -h or in an
// error; a schema without oke's tables says how to make them; -schema
// alone is a usage error.
func TestPostgresMistakes(t *testing.T) {
	const pw = "s3cret-pw-4711"
	for _, dsn := range []string{
		"postgres://postgres:" + pw + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
		"host=127.0.0.1 port=1 user=postgres password=" + pw + " dbname=x sslmode=disable connect_timeout=2",
		"postgres://postgres@127.0.0.1:1/x?sslmode=disable&password=" + pw,
		"postgres://postgres:" + pw + "@[::1/x", // not a URL
	} {
		for _, args := range [][]string{{"runs", "ls"}, {"idempotency", "sweep"}, {"runs", "ls", "-h"}} {
			code, stdout, stderr := run(append(args, "-postgres", dsn)...)
			if code == 0 && args[len(args)-1] != "-h" || strings.Contains(stdout+stderr, pw) {
				t.Errorf("%v -postgres %q: exit %d, stdout %q, stderr %q: want a failure that does not show the password", args, dsn, code, stdout, stderr)
			}
		}
	}
	pgtest.Need(t, cliConns)
	_, dsn := pgtest.NewDatabase(t, "oke_cli")
	dsn = pgtest.Charge(t, cliConns).DSN(dsn)
	code, _, stderr := run("runs", "ls", "-postgres", dsn, "-schema", "nope")
	if code != 1 || !strings.Contains(stderr, "schema nope of that Postgres database has no oke tables") || !strings.Contains(stderr, "oke migrate -postgres DSN -schema nope") {
		t.Fatalf("a schema without tables: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run("runs", "ls", "-schema", "other")
	if code != 2 || !strings.Contains(stderr, "give -postgres DSN too") {
		t.Fatalf("-schema without -postgres: exit %d, stderr %q", code, stderr)
	}
}

// pages lists page after page: it runs args, takes what each page shows
// (ids), and runs the command the page's "more WHAT: …" line on stderr
// prints, until a page prints none. Every page but the last must print it.
func pages(t *testing.T, what string, args []string, ids func(stdout string) []string) []string {
	t.Helper()
	var seen []string
	for range 50 {
		stdout, stderr := mustRun(t, args...)
		got := ids(stdout)
		if len(got) == 0 {
			t.Fatalf("oke %s printed an empty page\nstderr: %s", strings.Join(args, " "), stderr)
		}
		seen = append(seen, got...)
		_, line, ok := strings.Cut(stderr, "more "+what+": ")
		if !ok {
			return seen
		}
		line, _, _ = strings.Cut(line, "\n")
		words := shellWords(t, line)
		if len(words) < 2 || words[0] != "oke" {
			t.Fatalf("the next page's command %q is not an oke command", line)
		}
		args = words[1:]
	}
	t.Fatalf("more than 50 pages: %v", seen)
	return nil
}

// rowKeys reads a page of idempotency ls: tenant/principal/key of each row.
func rowKeys(t *testing.T) func(string) []string {
	return func(out string) []string {
		var keys []string
		for _, r := range table(t, out) {
			keys = append(keys, r["TENANT"]+"/"+r["PRINCIPAL"]+"/"+r["KEY"])
		}
		return keys
	}
}

// shellWords splits a command line as a POSIX shell does words made of
// plain characters and single-quoted strings.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		in    bool // a word has begun
		quote bool // inside '…'
	)
	for _, r := range line {
		switch {
		case quote && r == '\'':
			quote = false
		case quote:
			cur.WriteRune(r)
		case r == '\'':
			quote, in = true, true
		case r == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case strings.ContainsRune("\"$`\\;&|<>()*?", r):
			t.Fatalf("the command %q holds %q, which needs more of a shell than this test has", line, r)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote {
		t.Fatalf("the command %q has an unclosed quote", line)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}
