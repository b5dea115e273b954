package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// heldPool is the pool size of the held-claim tests' drivers: enough
// connections for requests to meet on the server.
const heldPool = 4

// heldApp is an app on a driver of heldPool connections with one flow,
// POST /charges, whose claim is held in its transaction (ClaimInTx): it
// inserts a charge through Fx.Tx, then waits for gate(in.Key) when gate
// is set.
func heldApp(t *testing.T, gate func(key int) <-chan struct{}) (*oke.App, *postgres.Driver) {
	t.Helper()
	return heldAppWith(t, heldConfig{claim: oke.ClaimInTx, gate: gate})
}

// heldConfig is what heldAppWith varies: the flow's claim mode, the app's
// lease (zero: the default) and the gate its flow waits for after its
// INSERT.
type heldConfig struct {
	claim oke.ClaimStrategy
	lease time.Duration
	gate  func(key int) <-chan struct{}
}

// heldAppWith is heldApp with the claim mode and lease of c.
func heldAppWith(t *testing.T, c heldConfig) (*oke.App, *postgres.Driver) {
	t.Helper()
	gate := c.gate
	url, _ := server(t)
	schema := fmt.Sprintf("oke_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	dropSchemaAtEnd(t, schema)
	d := openDriver(t, url, heldPool, postgres.WithSchema(schema))
	if err := d.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	table := chargesTable(t, d)
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1, Lease: c.lease})
	type in struct{ Key, Amount int64 }
	app.Handle(oke.POST("/charges"), oke.NewFlow("held.charge",
		oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, Claim: c.claim}},
		func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[map[string]int64], error) {
			id, err := txCharge(ctx, fx, table, in.Amount)
			if err != nil {
				return oke.Response[map[string]int64]{}, err
			}
			if gate != nil {
				<-gate(int(in.Key))
			}
			return oke.Created(map[string]int64{"id": id, "amount": in.Amount}, fmt.Sprint("/charges/", id)), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	return app, d
}

func postCharge(t *testing.T, app *oke.App, key string, k, amount int) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/charges",
		strings.NewReader(fmt.Sprintf(`{"Key":%d,"Amount":%d}`, k, amount)))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	app.ServeHTTP(w, r)
	return w
}

// A completed key always replays, however many replays arrive at once,
// with the claim held in the transaction (spec 004: same fingerprint,
// completed → the stored response): 200 concurrent replays of one finished
// key, three times over, all replay; none is 409. So do they while another
// transaction holds the key's lock (as a replay that took it would): the
// row decides, not the lock.
func TestHeldClaimCompletedKeyAlwaysReplays(t *testing.T) {
	t.Parallel()
	app, d := heldApp(t, nil)
	const key = "replayed-key-00000000001"
	first := postCharge(t, app, key, 1, 100)
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	replays := func(round string) {
		t.Helper()
		const n = 200
		var wg sync.WaitGroup
		start := make(chan struct{})
		codes := make([]int, n)
		replayed := make([]bool, n)
		bodies := make([]string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				w := postCharge(t, app, key, 1, 100)
				codes[i], replayed[i], bodies[i] = w.Code, w.Header().Get("Idempotent-Replayed") == "true", w.Body.String()
			}()
		}
		close(start)
		wg.Wait()
		count := map[int]int{}
		bad := 0
		for i := range n {
			count[codes[i]]++
			if codes[i] != http.StatusCreated || !replayed[i] || bodies[i] != first.Body.String() {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: answers %v, %d not the stored response replayed; want all %d replayed", round, count, bad, n)
		}
	}
	for i := range 3 {
		replays(fmt.Sprintf("round %d", i+1))
	}

	// Another transaction holds the key's lock meanwhile.
	tx, err := d.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "held.charge", Key: key}
	if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1)`, postgres.LockKey(d, k)); err != nil {
		t.Fatal(err)
	}
	replays("with the key's lock held elsewhere")
}

// A different payload while the first request runs is 422, never 409, with
// the claim held in the transaction (spec 004: different fingerprint →
// 422); the same payload meanwhile is 409. For each of 60 keys, three
// requests with one payload and three with another race; the one that
// claims the key holds it (its flow waits) until the five others are
// answered, so every other answer comes while it runs.
func TestHeldClaimOtherPayloadWhileRunningIs422(t *testing.T) {
	t.Parallel()
	const keys, per = 60, 3
	gates := make([]chan struct{}, keys)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	app, _ := heldApp(t, func(k int) <-chan struct{} { return gates[k] })
	// Keys race a few at a time: each running flow holds a connection of
	// the pool until the key's other requests are answered.
	const together = heldPool - 2
	sem := make(chan struct{}, together)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			key := fmt.Sprintf("raced-payloads-key-%05d", k)
			type answer struct{ amount, code int }
			answers := make(chan answer, 2*per)
			start := make(chan struct{})
			for i := range 2 * per {
				amount := 1 + i%2 // two payloads
				go func() {
					<-start
					answers <- answer{amount, postCharge(t, app, key, k, amount).Code}
				}()
			}
			close(start)
			var got []answer
			for len(got) < 2*per-1 {
				got = append(got, <-answers)
			}
			close(gates[k]) // the key's holder may finish now
			winner := <-answers
			mu.Lock()
			defer mu.Unlock()
			if winner.code != http.StatusCreated {
				t.Errorf("key %d: the last answer is %d, want 201 from the request that ran (answers before it: %v)", k, winner.code, got)
				return
			}
			for _, a := range got {
				want := http.StatusConflict // the same payload, still running
				if a.amount != winner.amount {
					want = http.StatusUnprocessableEntity
				}
				if a.code != want {
					t.Errorf("key %d: payload %d answered %d while payload %d ran, want %d", k, a.amount, a.code, winner.amount, want)
				}
			}
		}()
	}
	wg.Wait()
}

// A different payload is 422, never 409, whenever the key's holder is
// known (spec 004: different fingerprint → 422), in every claim mode, also
// while the holder commits: for each of 60 keys, 20 requests with one
// payload and 20 with another race with nothing holding the winner back,
// so that the losers meet it running, committing and committed; the race
// is run 5 times (twice with the claim made first, one statement that
// returns the row). The winner's payload answers 201 (live once, replayed
// after) or 409 while it runs; the other payload answers 422, always. The
// holder takes its request's lock (key and fingerprint) in the statement
// that takes the key's, so a request that finds the key taken can tell the
// holder's payload from its own — if it reads the key's row after it
// looked at the locks: a holder that committed in between let its lock go
// after its row became visible.
func TestRacingPayloadsAre422NotConflict(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name   string
		claim  oke.ClaimStrategy
		rounds int
	}{{"held in the transaction", oke.ClaimInTx, 5}, {"claimed first", oke.ClaimFirst, 2}} {
		t.Run(mode.name, func(t *testing.T) {
			app, _ := heldAppWith(t, heldConfig{claim: mode.claim})
			const keys, per = 60, 20
			rounds := mode.rounds
			// Keys race a few at a time, all of a key's requests together.
			const together = 3
			var wrong, conflicts atomic.Int64
			for round := range rounds {
				sem := make(chan struct{}, together)
				var wg sync.WaitGroup
				for k := range keys {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						defer func() { <-sem }()
						key := fmt.Sprintf("raced-%d-%d-%s", round, k, strings.Repeat("k", 16))
						type answer struct {
							amount, code int
							replayed     bool
						}
						answers := make([]answer, 2*per)
						start := make(chan struct{})
						var reqs sync.WaitGroup
						for i := range 2 * per {
							reqs.Add(1)
							go func() {
								defer reqs.Done()
								<-start
								amount := 1 + i%2 // two payloads
								w := postCharge(t, app, key, k, amount)
								answers[i] = answer{amount, w.Code, w.Header().Get("Idempotent-Replayed") == "true"}
							}()
						}
						close(start)
						reqs.Wait()
						winner := 0
						for _, a := range answers {
							if a.code == http.StatusCreated && !a.replayed {
								if winner != 0 {
									t.Errorf("key %s: two requests ran: %v", key, answers)
									return
								}
								winner = a.amount
							}
						}
						if winner == 0 {
							t.Errorf("key %s: no request ran: %v", key, answers)
							return
						}
						for _, a := range answers {
							switch {
							case a.amount == winner && (a.code == http.StatusCreated || a.code == http.StatusConflict):
								if a.code == http.StatusConflict {
									conflicts.Add(1)
								}
							case a.amount != winner && a.code == http.StatusUnprocessableEntity:
							default:
								wrong.Add(1)
								t.Errorf("key %s: payload %d answered %d (replayed %v) when payload %d ran", key, a.amount, a.code, a.replayed, winner)
							}
						}
					}()
				}
				wg.Wait()
			}
			t.Logf("%d wrong answers; %d conflicts (409) for the winner's payload", wrong.Load(), conflicts.Load())
		})
	}
}

// A claim held in the transaction lasts no longer than the lease while its
// holder sends nothing (issue 21): a holder paused inside its transaction —
// here its flow waits after its INSERT, with a lease of 2 s — has its
// session ended by the server (idle_in_transaction_session_timeout), which
// rolls its INSERT back and lets the key go. A retry with the key, after
// Retry-After as a client does, then runs (spec 004: after the lease a
// non-durable flow runs again); the paused holder, once it goes on, cannot
// commit: it answers 503 or the retry's response, never its own. One charge
// is written.
func TestHeldClaimLapsesWithItsLease(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	reached, resume := make(chan struct{}), make(chan struct{})
	app, d := heldAppWith(t, heldConfig{claim: oke.ClaimInTx, lease: 2 * time.Second, gate: func(int) <-chan struct{} {
		if calls.Add(1) == 1 {
			close(reached)
			return resume
		}
		done := make(chan struct{})
		close(done)
		return done
	}})
	var wake sync.Once
	letGo := func() { wake.Do(func() { close(resume) }) }
	t.Cleanup(letGo) // a failed test lets the holder finish before the app closes
	const key = "paused-holder-key-000001"
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- postCharge(t, app, key, 1, 100) }()
	<-reached // the holder wrote its charge and holds the key

	var second *httptest.ResponseRecorder
	var codes []int
	for attempt := 0; ; attempt++ {
		second = postCharge(t, app, key, 1, 100)
		codes = append(codes, second.Code)
		if second.Code != http.StatusConflict && second.Code != http.StatusServiceUnavailable {
			break
		}
		if attempt == 30 {
			t.Fatalf("the key is still taken after %d retries (answers %v): the paused holder keeps it past its lease", attempt, codes)
		}
		ra, _ := strconv.Atoi(second.Header().Get("Retry-After"))
		time.Sleep(time.Duration(max(ra, 1)) * time.Second)
	}
	if second.Code != http.StatusCreated || second.Header().Get("Idempotent-Replayed") == "true" {
		t.Fatalf("the retry after the lease: %d (replayed %q) %s, want 201 live", second.Code, second.Header().Get("Idempotent-Replayed"), second.Body)
	}

	letGo() // the holder wakes up and tries to commit
	late := <-first
	if late.Code == http.StatusCreated && late.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the paused holder answered its own 201 after its lease: %s", late.Body)
	} else if late.Code == http.StatusCreated && late.Body.String() != second.Body.String() {
		t.Errorf("the paused holder replayed %s, want the retry's response %s", late.Body, second.Body)
	}
	t.Logf("the paused holder answered %d %s", late.Code, late.Body)
	var n int
	if err := d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{d.Schema(), "charges"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d charges written, want 1", n)
	}
	if again := postCharge(t, app, key, 1, 100); again.Code != http.StatusCreated || again.Body.String() != second.Body.String() {
		t.Errorf("a later retry: %d %s, want the retry's response replayed: %s", again.Code, again.Body, second.Body)
	}
}

// A COMMIT the server refuses changed nothing, so the key is free to run
// again (issue 21; spec 004 "Failures": a failure before any effect deletes
// the row), in both claim modes: a charge whose deferred foreign key fails
// at COMMIT answers 503 Unavailable, stored nowhere (with the claim made
// first, its row is deleted rather than left to lapse, which answered 409
// until the lease ended); the retry with the same key, once the reference
// exists, runs and answers 201; one charge is written.
func TestCommitTheServerRefusedFreesTheKey(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name  string
		claim oke.ClaimStrategy
		// unique: the deferred constraint is a unique one (23505, which
		// a completion's own unique violation must not be taken for)
		unique bool
	}{
		{"held in the transaction", oke.ClaimInTx, false},
		{"claimed first", oke.ClaimFirst, false},
		{"held in the transaction, deferred unique", oke.ClaimInTx, true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			url, _ := server(t)
			schema := fmt.Sprintf("oke_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
			dropSchemaAtEnd(t, schema)
			d := openDriver(t, url, testPool, postgres.WithSchema(schema))
			if err := d.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			books := pgx.Identifier{schema, "books"}.Sanitize()
			charges := pgx.Identifier{schema, "charges"}.Sanitize()
			for _, q := range []string{
				`CREATE TABLE ` + books + ` (id bigint PRIMARY KEY)`,
				`CREATE TABLE ` + charges + ` (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
					book bigint NOT NULL REFERENCES ` + books + ` DEFERRABLE INITIALLY DEFERRED)`,
			} {
				if _, err := d.Pool().Exec(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			insert := `INSERT INTO ` + charges + ` (book) VALUES (1) RETURNING id`
			if mode.unique {
				// The book exists; a second charge of it breaks a
				// deferred unique constraint until the first is gone.
				for _, q := range []string{
					`INSERT INTO ` + books + ` (id) VALUES (1)`,
					`ALTER TABLE ` + charges + ` ADD UNIQUE (book) DEFERRABLE INITIALLY DEFERRED`,
					`INSERT INTO ` + charges + ` (book) VALUES (1)`,
				} {
					if _, err := d.Pool().Exec(t.Context(), q); err != nil {
						t.Fatal(err)
					}
				}
			}
			app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			t.Cleanup(func() { app.Close(context.Background()) })
			app.Handle(oke.POST("/charges"), oke.NewFlow("refused.charge",
				oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, Claim: mode.claim}},
				func(ctx context.Context, in struct{ Key, Amount int64 }, fx *oke.Fx) (oke.Response[map[string]int64], error) {
					tx, err := fx.Tx(ctx)
					if err != nil {
						return oke.Response[map[string]int64]{}, err
					}
					var id int64
					if err := tx.QueryRow(ctx, insert).Scan(&id); err != nil {
						return oke.Response[map[string]int64]{}, err
					}
					return oke.Created(map[string]int64{"id": id}, ""), nil
				}))
			if err := app.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			const key = "refused-commit-key-00001"
			first := postCharge(t, app, key, 1, 100)
			if first.Code != http.StatusServiceUnavailable || !strings.Contains(first.Body.String(), `"Unavailable"`) {
				t.Fatalf("a COMMIT the server refused: %d %s, want 503 Unavailable", first.Code, first.Body)
			}
			fix := `INSERT INTO ` + books + ` (id) VALUES (1)`
			if mode.unique {
				fix = `DELETE FROM ` + charges
			}
			if _, err := d.Pool().Exec(t.Context(), fix); err != nil {
				t.Fatal(err)
			}
			second := postCharge(t, app, key, 1, 100)
			if second.Code != http.StatusCreated || second.Header().Get("Idempotent-Replayed") == "true" {
				t.Fatalf("the retry with the same key: %d (replayed %q) %s, want 201 live", second.Code, second.Header().Get("Idempotent-Replayed"), second.Body)
			}
			if third := postCharge(t, app, key, 1, 100); third.Code != http.StatusCreated || third.Body.String() != second.Body.String() {
				t.Errorf("a later retry: %d %s, want %s replayed", third.Code, third.Body, second.Body)
			}
			var n int
			if err := d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+charges).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("%d charges, want 1", n)
			}
		})
	}
}

// A request that waits (Prefer: wait) on a key whose holder is paused
// inside its transaction gets to run once the holder lost the key with its
// lease, within its wait: the holder wrote no row for the wait to read, so
// the wait claims again a lease at a time. Here the lease is 2 s and the
// wait 30 s: the waiting request answers 201, live, with
// Preference-Applied: wait=30; the paused holder, once it goes on, does not
// commit; one charge is written.
func TestHeldClaimLapsesWhileARequestWaits(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	reached, resume := make(chan struct{}), make(chan struct{})
	app, d := heldAppWith(t, heldConfig{claim: oke.ClaimInTx, lease: 2 * time.Second, gate: func(int) <-chan struct{} {
		if calls.Add(1) == 1 {
			close(reached)
			return resume
		}
		done := make(chan struct{})
		close(done)
		return done
	}})
	var wake sync.Once
	letGo := func() { wake.Do(func() { close(resume) }) }
	t.Cleanup(letGo)
	const key = "paused-holder-key-000002"
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- postCharge(t, app, key, 1, 100) }()
	<-reached

	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/charges", strings.NewReader(`{"Key":1,"Amount":100}`))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Prefer", "wait=30")
	waited := httptest.NewRecorder()
	app.ServeHTTP(waited, r)
	if waited.Code != http.StatusCreated || waited.Header().Get("Idempotent-Replayed") == "true" ||
		waited.Header().Get("Preference-Applied") != "wait=30" {
		t.Fatalf("the waiting request: %d %v %s, want 201 live with Preference-Applied: wait=30", waited.Code, waited.Header(), waited.Body)
	}
	letGo()
	if late := <-first; late.Code == http.StatusCreated && late.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the paused holder answered its own 201 after its lease: %s", late.Body)
	}
	var n int
	if err := d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{d.Schema(), "charges"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d charges written, want 1", n)
	}
}

// The advisory locks of a claim held in a transaction are its schema's: two
// apps on two schemas of one database, with the same key, do not exclude
// each other (before, the second got a 409 while the first ran, although
// their rows are in different tables), and on one schema the key still
// excludes.
func TestHeldClaimLocksAreTheSchemas(t *testing.T) {
	t.Parallel()
	twoDrivers(t)
	da, db := newDriver(t), newDriver(t)
	ctx := t.Context()
	ta, tb := chargesTable(t, da), chargesTable(t, db)
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "schema-lock-key-00000001"}

	a, tka, err := heldTx(t, da, ta, key, "a", 1)
	if err != nil || !tka.res.Claimed {
		t.Fatalf("app A: %v, claim %+v; want it claimed", err, tka.res)
	}
	b, tkb, err := heldTx(t, db, tb, key, "b", 2)
	if err != nil || !tkb.res.Claimed || tkb.res.Busy {
		t.Fatalf("app B, another schema, while A holds the key: %v, claim %+v; want it claimed, not busy", err, tkb.res)
	}
	for _, c := range []struct {
		name  string
		d     *postgres.Driver
		table string
	}{{"A", da, ta}, {"B", db, tb}} {
		again, tk, err := heldTx(t, c.d, c.table, key, "again", 3)
		if !errors.Is(err, errNotOurs) || tk.res.Claimed || !tk.res.Busy || !tk.res.BusySame {
			t.Errorf("a second claim on %s's schema while it holds the key: %v, claim %+v; want busy with the same request (409)", c.name, err, tk.res)
		}
		again.Close()
	}
	for _, c := range []struct {
		name string
		conn *sql.Conn
		d    *postgres.Driver
	}{{"A", a, da}, {"B", b, db}} {
		resp := driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{}`)}
		if err := c.d.CommitComplete(ctx, c.conn, key, strings.ToLower(c.name), resp, time.Hour); err != nil {
			t.Errorf("%s's completion: %v", c.name, err)
		}
	}
}

// During a rolling deploy from v0.1.0, whose held claim took the schema's
// locks and, shared, the schema-less ones of the oke before it, a v0.1.0
// instance and this one exclude each other on one schema: a claim while
// v0.1.0 holds the key is busy, with the answer of v0.1.0's payload (409
// for the same, 422 for another), and while this one holds it v0.1.0's
// lock statement cannot have it, and v0.1.0's look at who holds the key
// (the greatest of oke_lock_holder with both forms) finds this one with
// its payload. (An oke before v0.1.0 took only the schema-less locks: this
// one does not exclude it, docs/postgres.md says so.)
func TestHeldClaimExcludesAV010Instance(t *testing.T) {
	t.Parallel()
	d := newDriver(t)
	ctx := t.Context()
	table := chargesTable(t, d)
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "v010-instance-key-000001"}
	// v0.1.0's heldLockSQL.
	const v010Lock = `SELECT pg_try_advisory_xact_lock($1) AND pg_try_advisory_xact_lock_shared($3)
		FROM (SELECT pg_advisory_xact_lock_shared($2), pg_advisory_xact_lock_shared($4) OFFSET 0) AS r`
	v010Args := func(fp string) []any {
		return []any{postgres.LockKey(d, key), postgres.RequestLockKey(d, key, fp),
			postgres.LegacyLockKey(key), postgres.LegacyRequestLockKey(key, fp)}
	}

	for _, c := range []struct {
		fp   string
		same bool
	}{{"fp", true}, {"other", false}} {
		older, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got bool
		if err := older.QueryRow(ctx, v010Lock, v010Args(c.fp)...).Scan(&got); err != nil || !got {
			older.Rollback(ctx)
			t.Fatalf("v0.1.0's lock: %v, %v", got, err)
		}
		conn, tk, err := heldTx(t, d, table, key, "new", 1)
		if !errors.Is(err, errNotOurs) || tk.res.Claimed || !tk.res.Busy || tk.res.BusySame != c.same {
			t.Errorf("a claim while v0.1.0 holds the key with payload %q: %v, claim %+v; want busy, BusySame %v", c.fp, err, tk.res, c.same)
		}
		conn.Close()
		if err := older.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// This one holds the key.
	held, tk, err := heldTx(t, d, table, key, "new", 1)
	if err != nil || !tk.res.Claimed {
		t.Fatalf("a claim once v0.1.0 let go: %v, claim %+v; want it claimed", err, tk.res)
	}
	defer held.Close()
	older, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got bool
	if err := older.QueryRow(ctx, v010Lock, v010Args("fp")...).Scan(&got); err != nil || got {
		t.Errorf("v0.1.0's lock statement while this one holds the key: %v, %v; want false", got, err)
	}
	older.Rollback(ctx)
	parts := func(k int64) (int64, int64) { return int64(uint32(uint64(k) >> 32)), int64(uint32(uint64(k))) }
	schema := pgx.Identifier{d.Schema()}.Sanitize()
	for _, c := range []struct {
		fp   string
		want int16
	}{{"fp", 1}, {"other", 2}} {
		k1, k2 := parts(postgres.LockKey(d, key))
		r1, r2 := parts(postgres.RequestLockKey(d, key, c.fp))
		l1, l2 := parts(postgres.LegacyLockKey(key))
		q1, q2 := parts(postgres.LegacyRequestLockKey(key, c.fp))
		var holder int16
		if err := d.Pool().QueryRow(ctx, `SELECT greatest(`+schema+`.oke_lock_holder($1, $2, $3, $4), `+schema+`.oke_lock_holder($5, $6, $7, $8))`,
			k1, k2, r1, r2, l1, l2, q1, q2).Scan(&holder); err != nil || holder != c.want {
			t.Errorf("v0.1.0 asks who holds the key, for payload %q: %d, %v; want %d", c.fp, holder, err, c.want)
		}
	}
}

// Two apps on two schemas of one database, each with its flow's claim held
// in its transaction: while app A runs a request with a key, a request to
// app B with the same key is its own (201), and a second request to A with
// it is 409. Before, B answered 409 too: the key's lock was the database's.
func TestHeldClaimAppsOnTwoSchemasDoNotShareKeys(t *testing.T) {
	t.Parallel()
	pgtest.Need(t, 2*pgtest.DriverConns(heldPool))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	appA, _ := heldApp(t, func(int) <-chan struct{} {
		once.Do(func() { close(entered) })
		return release
	})
	appB, _ := heldApp(t, nil)
	const key = "two-schemas-key-00000001"
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- postCharge(t, appA, key, 1, 100) }()
	select {
	case <-entered: // A holds the key, its flow waits
	case w := <-first:
		t.Fatalf("app A's first request: %d %s before its flow waited", w.Code, w.Body)
	}
	if w := postCharge(t, appB, key, 1, 100); w.Code != http.StatusCreated {
		t.Errorf("app B, same key, while app A holds it on its schema: %d %s; want 201", w.Code, w.Body)
	}
	if w := postCharge(t, appA, key, 1, 100); w.Code != http.StatusConflict {
		t.Errorf("app A, same key, while its first request runs: %d %s; want 409", w.Code, w.Body)
	}
	close(release)
	if w := <-first; w.Code != http.StatusCreated {
		t.Errorf("app A's first request: %d %s; want 201", w.Code, w.Body)
	}
}
