package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSchedules: oke schedules lists the demo's nightly sweep through the
// admin API, as a table and as JSON; -h explains it; a wrong token is an
// error that says so.
func TestSchedules(t *testing.T) {
	d := openDemo(t, t.TempDir())
	out, _ := mustRun(t, "schedules", "-addr", d.url)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "FLOW") || !strings.Contains(rows[0], "NEXT") {
		t.Fatalf("oke schedules:\n%s", out)
	}
	f := strings.Fields(rows[1])
	if f[0] != "demo.sweep" || strings.Join(f[1:6], " ") != "0 3 * * *" || f[6] != "UTC" || f[7] != "latest" || !strings.HasPrefix(f[10], "(in") || strings.Join(f[len(f)-3:], " ") != "- - -" {
		t.Fatalf("oke schedules row: %q", rows[1])
	}

	out, _ = mustRun(t, "schedules", "-addr", d.url, "-json")
	var page struct {
		Schedules []struct {
			Flow, Spec, Location, CatchUp, Next string
			Last                                *struct{ RunID string }
		}
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Schedules) != 1 ||
		page.Schedules[0].Flow != "demo.sweep" || page.Schedules[0].Next == "" || page.Schedules[0].Last != nil {
		t.Fatalf("oke schedules -json: %v %s", err, out)
	}

	if code, _, stderr := run("schedules", "-addr", d.url, "-token", "not-the-token-0000000"); code != 1 || !strings.Contains(stderr, "not the app's admin token") {
		t.Fatalf("a wrong token: exit %d %s", code, stderr)
	}
	if code, _, stderr := run("schedules", "-h"); code != 0 || !strings.Contains(stderr, "oke.Cron") || !strings.Contains(stderr, "-addr URL") {
		t.Fatalf("schedules -h: exit %d %s", code, stderr)
	}
	if code, _, stderr := run("schedules", "extra"); code != 2 || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Fatalf("schedules extra: exit %d %s", code, stderr)
	}
}
