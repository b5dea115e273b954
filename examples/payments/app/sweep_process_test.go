package app_test

import (
	"encoding/json"
	"sort"
	"syscall"
	"testing"
	"time"
)

// TestSweepScheduleAcrossSIGKILL: the demo as a process runs demo.sweep
// every second; SIGKILL stops it; while no process runs, ticks pass; the
// restarted process catches up by the default policy (CatchUpLatest): of
// the ticks missed while it was down only the newest can have a run (its
// start is at least three ticks after the kill), and the schedule goes on;
// no tick ever has two runs.
func TestSweepScheduleAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo binary")
	}
	bin := buildDemo(t)
	data := t.TempDir()
	args := []string{"-addr", "127.0.0.1:0", "-data", data, "-sweep-cron", "@every 1s", "-admin-token", testAdminToken, "-poll", "20ms"}
	// ticks lists the ticks of demo.sweep's runs (each must be once) and
	// whether each completed.
	ticks := func(url string) map[int64]bool {
		t.Helper()
		r := do(t, url, "GET", "/_oke/runs?flow=demo.sweep&limit=1000", "", "Authorization", "Bearer "+testAdminToken)
		r.want(t, 200, "")
		var page struct {
			Runs []struct {
				Status string
				Input  json.RawMessage
			}
		}
		r.decode(t, &page)
		out := map[int64]bool{}
		for _, run := range page.Runs {
			var in struct{ At time.Time }
			if err := json.Unmarshal(run.Input, &in); err != nil {
				t.Fatalf("input %s: %v", run.Input, err)
			}
			if _, dup := out[in.At.Unix()]; dup {
				t.Fatalf("two runs of the tick %v", in.At)
			}
			out[in.At.Unix()] = run.Status == "completed"
		}
		return out
	}
	completedAfter := func(m map[int64]bool, after int64) int {
		n := 0
		for tick, done := range m {
			if done && tick > after {
				n++
			}
		}
		return n
	}

	a := startProc(t, bin, args...)
	a.url = waitListening(t, a.stderr, a.done)
	waitFor(t, func() bool { return completedAfter(ticks(a.url), 0) >= 2 })
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.wait(t)
	killed := time.Now().Unix() // every run the first process made is of a tick at or before it
	// Let three ticks pass with no process up.
	for time.Now().Unix() < killed+3 {
		time.Sleep(50 * time.Millisecond)
	}

	b := startProc(t, bin, args...)
	b.url = waitListening(t, b.stderr, b.done)
	waitFor(t, func() bool { return completedAfter(ticks(b.url), killed+3) >= 3 })
	got := ticks(b.url)
	var after []int64
	for tick := range got {
		if tick > killed {
			after = append(after, tick)
		}
	}
	sort.Slice(after, func(i, j int) bool { return after[i] < after[j] })
	if len(after) == 0 || after[0] < killed+3 {
		t.Fatalf("ticks after the kill at %d: %v; the missed ticks %d–%d must have no run but the newest missed one", killed, after, killed+1, killed+2)
	}
	// (Whether every later tick has a run depends on the machine keeping
	// up with a one-second schedule, so it is not asserted; each tick has
	// at most one run, which ticks checks.)
	t.Logf("killed at %d; ticks after: %v", killed, after)
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.wait(t)
}
