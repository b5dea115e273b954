package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
)

// deadRun makes a dead-lettered run of adm.steps (input N) in e's journal,
// as the engine leaves one: held, then finished RunDead with its strikes
// and why.
func (e *apiEnv) deadRun(id string, n int) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.d.CreateRun(ctx, driver.Run{ID: id, Flow: "adm.steps", Input: []byte(`{"N":` + string(rune('0'+n)) + `}`),
		Tenant: "default", Principal: "anon", Owner: "w-dead"}, time.Minute); err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.FinishRun(ctx, id, "w-dead", driver.Finish{Status: driver.RunDead, Strikes: 10,
		Error: "dead-lettered after 10 failed pick-ups in a row"}); err != nil {
		e.t.Fatal(err)
	}
}

// TestAdminResumeDeadRuns: dead runs are listed by status=dead with their
// strikes and error; POST /runs/{id}/resume makes one due again (the
// scheduler finishes it), a second resume is 409 RunNotDead, a missing run
// 404; a batch resume takes the filter's selection.
func TestAdminResumeDeadRuns(t *testing.T) {
	e := setupAPI(t)
	e.deadRun("run_dead_1", 2)
	e.deadRun("run_dead_2", 1)
	page := e.runs("?status=dead")
	if len(page.Runs) != 2 || !page.Runs[0].Dead || page.Runs[0].Strikes != 10 || !strings.Contains(page.Runs[0].Error, "dead-lettered") {
		t.Fatalf("GET /runs?status=dead: %+v", page.Runs)
	}
	var got admin.RunView
	e.decode("POST", "/_oke/runs/run_dead_1/resume", "", 200, &got)
	if got.Status != "running" || got.Strikes != 0 || got.Dead || got.Next == nil || got.Next.Attempts != 0 {
		t.Fatalf("resumed: %+v", got)
	}
	done := e.waitStatus("run_dead_1", "completed")
	if len(done.Steps) != 2 || done.Steps[0].Attempts != 1 {
		t.Fatalf("resumed run after it completed: %+v", done)
	}
	e.wantError("POST", "/_oke/runs/run_dead_1/resume", "", 409, "RunNotDead")
	e.wantError("POST", "/_oke/runs/run_missing/resume", "", 404, "NotFound")

	var res admin.BatchResult
	e.decode("POST", "/_oke/runs/resume?status=dead", "", 200, &res)
	if res.Action != "resume" || res.Selected != 1 || res.Done != 1 || res.Results[0].ID != "run_dead_2" {
		t.Fatalf("batch resume: %+v", res)
	}
	e.waitStatus("run_dead_2", "completed")
}
