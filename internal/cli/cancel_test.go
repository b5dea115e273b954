package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRunsCancelAndReplayFromStep: oke runs cancel fails a sleeping run
// (and refuses a finished one); oke runs replay -from-step N reuses steps
// 1..N-1 (the pipeline's execution counts prove it over -addr; over -data
// the new run holds the copies, waiting for an app); runs ls filters by
// tenant, newest first.
func TestRunsCancelAndReplayFromStep(t *testing.T) {
	dir := t.TempDir()
	d := openDemo(t, dir)
	if code := d.post("/reminders", `{"to":"later@example.com","delay":"1h"}`); code != 204 {
		t.Fatalf("POST /reminders: %d", code)
	}
	if code := d.post("/pipeline", `{"tag":"from","steps":3,"stepMs":0}`, "Idempotency-Key", "cli-test-key-from-0001"); code != 201 {
		t.Fatalf("POST /pipeline: %d", code)
	}
	addr := []string{"-addr", d.url}
	idOf := func(flow string) string {
		t.Helper()
		stdout, _ := mustRun(t, append([]string{"runs", "ls", "-flow", flow, "-json"}, addr...)...)
		var out struct{ Runs []struct{ ID string } }
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.Runs) != 1 {
			t.Fatalf("runs ls -flow %s: %v %s", flow, err, stdout)
		}
		return out.Runs[0].ID
	}
	remind, pipe := idOf("demo.remind"), idOf("demo.pipeline")

	out, _ := mustRun(t, append([]string{"runs", "cancel", remind}, addr...)...)
	if !strings.Contains(out, "cancelled "+remind) || showJSON(t, remind, addr...).Status != "failed" {
		t.Fatalf("runs cancel: %s", out)
	}
	if code, _, stderr := run(append([]string{"runs", "cancel", remind}, addr...)...); code != 1 || !strings.Contains(stderr, "RunFinished") {
		t.Fatalf("cancel of a cancelled run: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(append([]string{"runs", "cancel", "run_nope"}, addr...)...); code != 1 || !strings.Contains(stderr, "no such run") {
		t.Fatalf("cancel of a missing run: exit %d %s", code, stderr)
	}

	stdout, _ := mustRun(t, append([]string{"runs", "replay", "-from-step", "3", "-json", pipe}, addr...)...)
	var rep struct {
		ID       string
		ReplayOf string
		FromStep int
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.ReplayOf != pipe || rep.FromStep != 3 {
		t.Fatalf("replay -from-step 3 -json: %v %s", err, stdout)
	}
	waitFor(t, "the replay to complete", func() bool { return showJSON(t, rep.ID, addr...).Status == "completed" })
	if got := d.get("/pipeline/from"); got != `{"tag":"from","steps":[{"step":1,"executions":1},{"step":2,"executions":1},{"step":3,"executions":2}]}` {
		t.Fatalf("after replay -from-step 3: %s (steps 1 and 2 must be reused)", got)
	}
	if code, _, stderr := run(append([]string{"runs", "replay", "-from-step", "9", pipe}, addr...)...); code != 1 || !strings.Contains(stderr, "from step 1 to 4") {
		t.Fatalf("replay -from-step 9: exit %d %s", code, stderr)
	}
	stdout, _ = mustRun(t, append([]string{"runs", "ls", "-tenant", "default", "-newest", "-limit", "1", "-json"}, addr...)...)
	if !strings.Contains(stdout, rep.ID) {
		t.Fatalf("runs ls -newest -limit 1: %s, want the replay (the newest run)", stdout)
	}

	// -data: the copies are made, the new run waits for an app.
	d.stop()
	data := []string{"-data", dir}
	id, _ := mustRun(t, append([]string{"runs", "replay", "-from-step", "2", pipe}, data...)...)
	v := showJSON(t, strings.TrimSpace(id), data...)
	if v.Status != "running" || v.ReplayOf != pipe || len(v.Steps) != 1 || !v.Steps[0].Copied {
		t.Fatalf("replay -from-step 2 -data: %+v", v)
	}
	if code, _, stderr := run(append([]string{"runs", "replay", "-from-step", "9", pipe}, data...)...); code != 2 || !strings.Contains(stderr, "from step 1 to 4") {
		t.Fatalf("replay -from-step 9 -data: exit %d %s", code, stderr)
	}
	out, _ = mustRun(t, append([]string{"runs", "cancel", strings.TrimSpace(id)}, data...)...)
	if !strings.Contains(out, "failed") {
		t.Fatalf("runs cancel -data: %s", out)
	}
}
