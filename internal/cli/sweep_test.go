package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
)

// TestSweep100000ExpiredRows: oke idempotency sweep -data deletes 100 000
// expired rows, in batches (one driver Sweep call of at most -batch rows
// each: 101 of 1000, the last finding none), and prints the count.
func TestSweep100000ExpiredRows(t *testing.T) {
	const rows = 100_000
	dir := t.TempDir()
	d, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Claims whose lease and TTL end at once: expired as soon as they are
	// made, so no wait is needed. (A claim without a run is not fsynced on
	// its own, so this takes a second or two.)
	for i := range rows {
		req := driver.ClaimRequest{Key: driver.Key{Tenant: "t", Principal: "anon", Flow: "f", Key: fmt.Sprintf("sweep-key-%010d", i)},
			Fingerprint: "fp", Owner: "o", Lease: time.Nanosecond, TTL: time.Nanosecond}
		if _, err := d.Claim(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	live := driver.ClaimRequest{Key: driver.Key{Tenant: "t", Principal: "anon", Flow: "f", Key: "sweep-key-live-0000"},
		Fingerprint: "fp", Owner: "o", Lease: time.Hour, TTL: time.Hour}
	if _, err := d.Claim(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := mustRun(t, "idempotency", "sweep", "-data", dir, "-json")
	var got struct{ Deleted, Batches int }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("sweep -json: %v\n%s", err, stdout)
	}
	if got.Deleted != rows || got.Batches != rows/1000+1 {
		t.Fatalf("sweep: %+v, want %d rows in %d batches of 1000", got, rows, rows/1000+1)
	}
	if strings.Contains(stderr, "sweeping:") {
		t.Errorf("a progress line on a stderr that is not a terminal: %q", stderr)
	}
	// What is left: the live row only.
	stdout, _ = mustRun(t, "idempotency", "ls", "-data", dir, "-json")
	var left struct{ Rows []struct{ Key string } }
	if err := json.Unmarshal([]byte(stdout), &left); err != nil || len(left.Rows) != 1 || left.Rows[0].Key != live.Key.Key {
		t.Fatalf("after the sweep: %v %s", err, stdout)
	}
	// Without -json: the count, said plainly.
	stdout, _ = mustRun(t, "idempotency", "sweep", "-data", dir, "-batch", "10")
	if strings.TrimSpace(stdout) != "deleted 0 expired rows in 1 batch of at most 10 rows" {
		t.Errorf("a second sweep: %q", stdout)
	}
}

// TestSweepAddr: oke idempotency sweep -addr sweeps a running app's expired
// rows one batch per request, and shows them as expired before.
func TestSweepAddr(t *testing.T) {
	d := openDemo(t, t.TempDir())
	for i := range 3 {
		if code := d.post("/notes", `{"text":"n"}`, "Idempotency-Key", fmt.Sprintf("cli-test-note-%08d", i)); code != 201 {
			t.Fatalf("POST /notes: %d", code)
		}
	}
	addr := []string{"-addr", d.url}
	// demo.note keeps its answers 2s.
	waitFor(t, "the notes' rows to expire", func() bool {
		rows := rowsJSON(t, append([]string{"idempotency", "ls"}, addr...)...)
		n := 0
		for _, r := range rows {
			if r.Flow == "demo.note" && r.Expired {
				n++
			}
		}
		return n == 3
	})
	out, _ := mustRun(t, append([]string{"idempotency", "ls"}, addr...)...)
	if strings.Count(out, "expired") != 3 {
		t.Fatalf("ls does not show the 3 rows as expired:\n%s", out)
	}
	stdout, _ := mustRun(t, append([]string{"idempotency", "sweep", "-batch", "2", "-json"}, addr...)...)
	var got struct{ Deleted, Batches int }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.Deleted != 3 || got.Batches != 2 {
		t.Fatalf("sweep -addr -batch 2: %+v %v (%s), want 3 rows in 2 batches", got, err, stdout)
	}
}
