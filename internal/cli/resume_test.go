package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
)

// TestRunsResumeDeadRun: a dead-lettered run is listed by -status dead and
// shown with its failed pick-ups, its error and how to resume it; oke runs
// resume makes it running and due (the next app to open the folder picks
// it up), and refuses a run that is not dead.
func TestRunsResumeDeadRun(t *testing.T) {
	dir := t.TempDir()
	d, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id = "run_dead_cli"
	if _, err := d.CreateRun(ctx, driver.Run{ID: id, Flow: "demo.pipeline", Input: []byte(`{"tag":"dead","steps":1}`),
		Tenant: "default", Principal: "anon", Owner: "w"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.FinishRun(ctx, id, "w", driver.Finish{Status: driver.RunDead, Strikes: 10,
		Error: "dead-lettered after 10 failed pick-ups in a row"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	data := []string{"-data", dir}

	out, _ := mustRun(t, append([]string{"runs", "ls", "-status", "dead"}, data...)...)
	if !strings.Contains(out, id) || !strings.Contains(out, "dead") {
		t.Fatalf("runs ls -status dead:\n%s", out)
	}
	out, _ = mustRun(t, append([]string{"runs", "show", id}, data...)...)
	for _, want := range []string{"failed pick-ups  10 in a row", "dead-lettered after 10", "oke runs resume " + id} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show of a dead run: no %q in\n%s", want, out)
		}
	}
	out, _ = mustRun(t, append([]string{"runs", "resume", id}, data...)...)
	if !strings.Contains(out, "resumed "+id+": it is running") {
		t.Fatalf("runs resume: %s", out)
	}
	v := showJSON(t, id, data...)
	if v.Status != "running" || v.Strikes != 0 || v.Dead || v.Next == nil || v.Next.Attempts != 0 {
		t.Fatalf("resumed run: %+v", v)
	}
	if code, _, stderr := run(append([]string{"runs", "resume", id}, data...)...); code != 1 || !strings.Contains(stderr, "not dead-lettered") {
		t.Fatalf("resume of a running run: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(append([]string{"runs", "ls", "-status", "zombie"}, data...)...); code != 2 || !strings.Contains(stderr, "failed or dead") {
		t.Fatalf("runs ls -status zombie: exit %d %s", code, stderr)
	}
}
