package admin_test

import (
	"testing"

	"github.com/okengine/oke/admin"
)

// TestAdminFlowStatsAndRunKeys: GET /flows carries each flow's numbers from
// the app's metrics (executions, replays, errors: the console's flows
// index), and a run a keyed request started names its Idempotency-Key row
// (idemKey), in its view and in listings, while the row names the run.
func TestAdminFlowStatsAndRunKeys(t *testing.T) {
	e := setupAPI(t)
	key := "flow-stats-key-000001"
	for i := 0; i < 2; i++ {
		if w := e.post("/secret", `{"Text":"x"}`, "Idempotency-Key", key); w.Code != 201 {
			t.Fatalf("POST /secret: %d %s", w.Code, w.Body)
		}
	}
	if w := e.post("/secret", `{"Text":"x"}`, "Idempotency-Key", "short"); w.Code != 400 {
		t.Fatalf("POST /secret with an invalid key: %d %s, want 400", w.Code, w.Body)
	}
	var flows struct{ Flows []admin.FlowView }
	e.decode("GET", "/_oke/flows", "", 200, &flows)
	stats := map[string]admin.FlowStats{}
	for _, f := range flows.Flows {
		stats[f.Name] = f.Stats
	}
	s := stats["adm.secret"]
	if s.Executions != 1 || s.Replays != 1 || s.Errors != 1 || s.ClaimCount != 2 || s.Outcomes["live"] != 1 || s.Outcomes["invalid"] != 1 {
		t.Errorf("adm.secret stats %+v, want 1 execution, 1 replay, 1 error (the invalid key), 2 claims", s)
	}
	if s := stats["adm.steps"]; s.Executions != 0 || s.Replays != 0 || s.Errors != 0 {
		t.Errorf("adm.steps, never called, has stats %+v", s)
	}

	stepsKey := "flow-stats-key-000002"
	if w := e.post("/steps", `{"N":1}`, "Idempotency-Key", stepsKey); w.Code != 200 {
		t.Fatalf("POST /steps: %d %s", w.Code, w.Body)
	}
	page := e.runs("?flow=adm.steps")
	if len(page.Runs) != 1 || page.Runs[0].IdemKey == nil || page.Runs[0].IdemKey.Key != stepsKey || page.Runs[0].IdemKey.Flow != "adm.steps" {
		t.Fatalf("the keyed run's listing: %+v, want idemKey %s", page.Runs, stepsKey)
	}
	id := page.Runs[0].ID
	if v := e.run(id); v.IdemKey == nil || v.IdemKey.Key != stepsKey {
		t.Errorf("GET /runs/%s: idemKey %+v, want %s", id, v.IdemKey, stepsKey)
	}
	var rows admin.RowsPage
	e.decode("GET", "/_oke/idempotency?key="+stepsKey, "", 200, &rows)
	if len(rows.Rows) != 1 || rows.Rows[0].RunID != id {
		t.Errorf("the key's row: %+v, want runId %s", rows.Rows, id)
	}
	// An unkeyed run names no row.
	if w := e.post("/steps", `{"N":1}`); w.Code != 200 {
		t.Fatalf("POST /steps: %d %s", w.Code, w.Body)
	}
	for _, r := range e.runs("?flow=adm.steps").Runs {
		if r.ID != id && r.IdemKey != nil {
			t.Errorf("the unkeyed run %s has idemKey %+v", r.ID, r.IdemKey)
		}
	}
}
