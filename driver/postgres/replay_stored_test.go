package postgres_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// A key this process replayed once through a claim held in the flow's
// transaction (ClaimInTx) is replayed next from its row, read on its own:
// one statement, the flow not started, no transaction, no lock. Another
// payload under it is refused as before (422, the flow started and stopped
// at its first statement, one round trip), and a key whose row is gone
// runs again.
func TestReplayOfAReplayedKeyReadsTheRow(t *testing.T) {
	t.Parallel()
	a := newDeferredApp(t)
	a.post("/charges", "warm-up-key-000000000001", 1000)
	a.post("/charges", "warm-up-key-000000000001", 1000)
	a.post("/charges", "warm-up-key-000000000001", 1000)
	key := driver.Key{Tenant: "default", Principal: "anon", Flow: "deferred.charge", Key: "stored-key-0000000000001"}
	for _, tc := range []struct {
		name             string
		amount           int64
		status           int
		replayed         bool
		trips, traced    int64 // traced: statements pgx traces (not those sent in the claim's pipeline)
		started, stopped int64
		newRows          int
		before           func()
	}{
		{"live", 1000, 201, false, 2, 2, 1, 0, 1, nil},
		{"first replay: the held claim refuses the INSERT", 1000, 201, true, 1, 0, 1, 1, 0, nil},
		{"second replay: the row read on its own", 1000, 201, true, 1, 1, 0, 0, 0, nil},
		{"and again", 1000, 201, true, 1, 1, 0, 0, 0, nil},
		{"another payload: 422 from the read, the flow stopped at its INSERT", 2000, 422, false, 1, 1, 1, 1, 0, nil},
		{"the row deleted: the read finds none, and the request runs", 1000, 201, false, 3, 3, 1, 0, 1, func() {
			if err := a.d.Delete(t.Context(), key); err != nil {
				t.Fatal(err)
			}
		}},
		{"its replay: the held claim again", 1000, 201, true, 1, 0, 1, 1, 0, nil},
	} {
		if tc.before != nil {
			tc.before()
		}
		rows, started, stopped := a.rows(), a.started.Load(), a.stopped.Load()
		a.rt.take()
		r := httptest.NewRequestWithContext(mark(t.Context()), http.MethodPost, "/charges", strings.NewReader(fmt.Sprintf(`{"Amount":%d}`, tc.amount)))
		r.Header.Set("Idempotency-Key", key.Key)
		w := httptest.NewRecorder()
		a.app.ServeHTTP(w, r)
		trips, stmts, sqls := a.rt.take()
		if w.Code != tc.status || (w.Header().Get("Idempotent-Replayed") == "true") != tc.replayed {
			t.Errorf("%s: %d %s (Idempotent-Replayed %q), want %d, replayed %v", tc.name, w.Code, w.Body,
				w.Header().Get("Idempotent-Replayed"), tc.status, tc.replayed)
		}
		if trips != tc.trips || stmts != tc.traced {
			t.Errorf("%s: %d round trips, %d traced statements %q; want %d, %d", tc.name, trips, stmts, sqls, tc.trips, tc.traced)
		}
		if got := a.started.Load() - started; got != tc.started {
			t.Errorf("%s: the function started %d times, want %d", tc.name, got, tc.started)
		}
		if got := a.stopped.Load() - stopped; got != tc.stopped {
			t.Errorf("%s: %d effects refused with ErrKeyNotClaimed, want %d", tc.name, got, tc.stopped)
		}
		if got := a.rows() - rows; got != tc.newRows {
			t.Errorf("%s: %d rows inserted, want %d", tc.name, got, tc.newRows)
		}
	}
}

// Concurrent replays of a completed key all replay (issue 12: the held
// claim's lock answered some of them 409) once the key was replayed here.
func TestConcurrentReplaysOfAReplayedKeyAllReplay(t *testing.T) {
	t.Parallel()
	d := newDriver(t)
	table := chargesTable(t, d)
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1})
	app.Handle(oke.POST("/charges"), oke.NewFlow("stored.charge",
		oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimInTx}},
		func(ctx context.Context, in struct{ Amount int64 }, fx *oke.Fx) (oke.Response[map[string]int64], error) {
			id, err := txCharge(ctx, fx, table, in.Amount)
			if err != nil {
				return oke.Response[map[string]int64]{}, err
			}
			return oke.Created(map[string]int64{"id": id}, fmt.Sprint("/charges/", id)), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/charges", strings.NewReader(`{"Amount":1000}`))
		r.Header.Set("Idempotency-Key", "concurrent-replay-key-01")
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	if w := post(); w.Code != 201 {
		t.Fatalf("live: %d %s", w.Code, w.Body)
	}
	if w := post(); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first replay: %d %s", w.Code, w.Body)
	}
	for round := range 3 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		count := map[string]int{}
		for range 200 {
			wg.Go(func() {
				w := post()
				mu.Lock()
				count[fmt.Sprint(w.Code, " replayed=", w.Header().Get("Idempotent-Replayed"))]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if count["201 replayed=true"] != 200 {
			t.Errorf("round %d: %v, want 200 replays", round, count)
		}
	}
}
