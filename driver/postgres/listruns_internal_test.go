package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/driver"
)

// TestListRunsOfOneStatusUsesItsIndex: a page of failed (or dead) runs
// reads that status's partial index, not the primary key past every other
// run — also under a generic plan, which is what a prepared statement gets
// after a few executions. On a store of millions of runs with few failed
// ones, the primary key walk made the console's "failed" filter take
// seconds, past the store timeout (BENCHMARKS §27).
func TestListRunsOfOneStatusUsesItsIndex(t *testing.T) {
	d := schemaDriver(t, "listruns")
	// 21 978 completed runs and 22 failed ones, analyzed: the planner
	// knows failed runs are rare.
	if _, err := d.pool.Exec(t.Context(), d.sql(`
		INSERT INTO {s}.oke_runs (id, flow, tenant, principal, status, created_at, updated_at)
		SELECT 'run_' || lpad(g::text, 8, '0'), 'f',
			CASE WHEN g % 1000 = 0 THEN 'acme' ELSE 'default' END, 'anon',
			CASE WHEN g % 1000 = 0 THEN 4 ELSE 3 END, now(), now()
		FROM generate_series(1, 22000) g;
		ANALYZE {s}.oke_runs`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		status driver.RunStatus
		index  string
	}{
		{"failed", driver.RunFailed, "oke_runs_failed "},
		{"dead", driver.RunDead, "oke_runs_dead "},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, args := listRunsSQL(driver.RunFilter{Status: []driver.RunStatus{c.status}, Desc: true}, 25)
			conn, err := d.pool.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			// The statement as a prepared one, planned generically: what
			// a statement pgx prepares gets after its fifth execution.
			if _, err := conn.Exec(t.Context(), "PREPARE listruns AS "+d.sql(q)); err != nil {
				t.Fatal(err)
			}
			defer conn.Exec(context.Background(), "DEALLOCATE listruns")
			if _, err := conn.Exec(t.Context(), "SET plan_cache_mode = force_generic_plan"); err != nil {
				t.Fatal(err)
			}
			defer conn.Exec(context.Background(), "RESET plan_cache_mode")
			params := make([]string, len(args))
			for i, a := range args {
				params[i] = fmt.Sprintf("'%v'", a)
			}
			rows, err := conn.Query(t.Context(), "EXPLAIN EXECUTE listruns("+strings.Join(params, ", ")+")", pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if text := strings.Join(plan, "\n"); !strings.Contains(text, c.index) {
				t.Errorf("a page of %s runs under a generic plan does not read %s:\n%s", c.name, c.index, text)
			}
		})
	}
}
