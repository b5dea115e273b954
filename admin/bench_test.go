package admin_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// consoleRuns is how many runs the runs-page benchmarks put in the store:
// 100 000 unless -console-runs says otherwise (e.g. -console-runs 1e7 for
// issue 23's bar, with -bench RunsPage100k/postgres: the file driver is
// written run by run).
var consoleRuns = flag.Float64("console-runs", 100_000, "how many runs BenchmarkRunsPage100k puts in the store")

// benchRunCount is *consoleRuns as an int.
func benchRunCount() int { return int(*consoleRuns) }

// BenchmarkRunsPage100k is the console's runs page — GET /runs?order=desc
// &limit=25 through the admin handler, served in process: the server's
// time, JSON included, no network — with 100 000 runs in the store
// (-console-runs), on the
// file driver and on Postgres: the first page, a next page from the middle
// (before= the 50 000th run: keyset, so as cheap as the first), and pages
// filtered by tenant (one run in ten), by status (failed: one in fifty), by
// flow, by a status no run has, and by failed runs of a tenant that has
// none. Numbers in docs/BENCHMARKS.md; nothing here asserts a time.
func BenchmarkRunsPage100k(b *testing.B) {
	cases := []struct{ name, query string }{
		{"first", "order=desc&limit=25"},
		{"next", "order=desc&limit=25&before=" + benchID(benchRunCount()/2)},
		{"tenant", "order=desc&limit=25&tenant=acme"},
		{"status-failed", "order=desc&limit=25&status=failed"},
		{"flow", "order=desc&limit=25&flow=demo.pipeline"},
		// No run sleeps: the worst case, a filter that matches nothing
		// reads every run (no index on status).
		{"status-none", "order=desc&limit=25&status=sleeping"},
		// Failed runs of a tenant that has none (every failed run is
		// acme's): the pages of a store where nothing failed.
		{"failed-none", "order=desc&limit=25&tenant=default&status=failed"},
	}
	for _, drv := range []struct {
		name string
		open func(b *testing.B) driver.Driver
	}{{"file", benchFile}, {"postgres", benchPostgres}} {
		b.Run(drv.name, func(b *testing.B) {
			d := drv.open(b)
			app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1, Logger: quiet()})
			b.Cleanup(func() { app.Close(context.Background()) })
			h := admin.Handler(app, admin.InsecureNoAuth)
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					get := func() {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/runs?"+c.query, nil))
						if w.Code != 200 {
							b.Fatalf("%d %s", w.Code, w.Body)
						}
						var p admin.RunsPage
						if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || len(p.Runs) != 25 && c.name != "status-none" && c.name != "failed-none" {
							b.Fatalf("%d runs (%v)", len(p.Runs), err)
						}
					}
					get()
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						get()
					}
				})
			}
		})
	}
}

// benchID is the ID of the i-th run (0-based); they sort by i, as oke's
// own run IDs sort by creation.
func benchID(i int) string { return fmt.Sprintf("run_%012x_bench", 1_700_000_000_000+i) }

// benchRun is the i-th run: a tenth of tenant acme, a fiftieth failed, a
// third of flow demo.pipeline.
func benchRun(i int) (driver.Run, driver.Finish) {
	r := driver.Run{ID: benchID(i), Flow: "payments.refund", Input: []byte(`{"chargeId":"ch_1"}`), Tenant: "default",
		Principal: "anon", Owner: "bench"}
	if i%3 == 0 {
		r.Flow = "demo.pipeline"
	}
	if i%10 == 0 {
		r.Tenant = "acme"
	}
	f := driver.Finish{Status: driver.RunCompleted, Result: &driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"ok":true}`)}}
	if i%50 == 0 {
		f = driver.Finish{Status: driver.RunFailed, Error: "boom", Result: &driver.Response{Status: 500, ContentType: "application/json", Body: []byte(`{"error":{}}`)}}
	}
	return r, f
}

// benchFile is a file driver holding benchRunCount finished runs, each with
// one saved step, written by 64 goroutines (group commit).
func benchFile(b *testing.B) driver.Driver {
	dir := b.TempDir()
	d, err := file.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < benchRunCount(); i += 64 {
				r, f := benchRun(i)
				if _, err := d.CreateRun(ctx, r, 0); err != nil {
					errs <- err
					return
				}
				if err := d.SaveStep(ctx, r.ID, r.Owner, driver.Step{Seq: 1, Name: "step 1", Result: []byte("1"), Attempts: 1}); err != nil {
					errs <- err
					return
				}
				if err := d.FinishRun(ctx, r.ID, r.Owner, f); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// benchPostgres is a Postgres driver (a fresh database on the test server,
// migrated) holding benchRunCount finished runs with three steps each (one
// each past 100 000 runs, to keep the load in minutes), inserted by SQL,
// then analyzed.
func benchPostgres(b *testing.B) driver.Driver {
	_, dsn := pgtest.NewDatabase(b, "oke_bench")
	c := pgtest.Charge(b, pgtest.DriverConns(2))
	ctx := context.Background()
	d, err := postgres.Open(ctx, c.DSN(pgtest.WithPoolSize(dsn, 2)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	if err := d.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	steps := 3
	if benchRunCount() > 100_000 {
		steps = 1
	}
	_, err = d.Pool().Exec(ctx, fmt.Sprintf(`
		INSERT INTO oke.oke_runs (id, flow, input, tenant, principal, status, owner, attempts, next_attempts,
			result_status, result_content_type, result_body, error, created_at, updated_at)
		SELECT 'run_' || lpad(to_hex(1700000000000 + g), 12, '0') || '_bench',
			CASE WHEN g %% 3 = 0 THEN 'demo.pipeline' ELSE 'payments.refund' END,
			'{"chargeId":"ch_1"}'::bytea,
			CASE WHEN g %% 10 = 0 THEN 'acme' ELSE 'default' END, 'anon',
			CASE WHEN g %% 50 = 0 THEN 4 ELSE 3 END, '', 1, 1,
			CASE WHEN g %% 50 = 0 THEN 500 ELSE 201 END, 'application/json', '{"ok":true}'::bytea,
			CASE WHEN g %% 50 = 0 THEN 'boom' ELSE '' END,
			now() - (%[1]d - g) * interval '1 second', now()
		FROM generate_series(0, %[1]d - 1) g;
		INSERT INTO oke.oke_steps (run_id, seq, name, result, attempts, started_at, finished_at)
		SELECT r.id, s, 'step ' || s, '1'::bytea, 1, r.created_at, r.created_at
		FROM oke.oke_runs r, generate_series(1, %[2]d) s;
		ANALYZE oke.oke_runs; ANALYZE oke.oke_steps;`, benchRunCount(), steps))
	if err != nil {
		b.Fatal(err)
	}
	return d
}
