package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
)

// TestIdempotencyDeleteRefusesARowInFlight: issue 21 defect 10 — oke
// idempotency delete refuses a row still in flight (running, its lease not
// over), exit 1 and a line that names -force, and deletes it with -force; a
// completed row is deleted as before, even beside a refused one with -all.
func TestIdempotencyDeleteRefusesARowInFlight(t *testing.T) {
	dir := t.TempDir()
	const key = "cli-in-flight-key-0001"
	d, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held := driver.Key{Tenant: "default", Principal: "user:1", Flow: "payments.charge", Key: key}
	done := driver.Key{Tenant: "default", Principal: "user:2", Flow: "payments.charge", Key: key}
	for _, k := range []driver.Key{held, done} {
		if res, err := d.Claim(ctx, driver.ClaimRequest{Key: k, Fingerprint: "fp", Owner: k.Principal, Lease: time.Hour, TTL: 24 * time.Hour}); err != nil || !res.Claimed {
			t.Fatalf("claim %v: %+v %v", k, res, err)
		}
	}
	if err := d.Complete(ctx, done, done.Principal, driver.Response{Status: 201}, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	data := []string{"-data", dir}

	code, stdout, stderr := run(append([]string{"idempotency", "delete", key, "-all"}, data...)...)
	if code != 1 || !strings.Contains(stderr, "still running") || !strings.Contains(stderr, "-force") ||
		!strings.Contains(stdout, `principal "user:2"`) || strings.Contains(stdout, `principal "user:1"`) {
		t.Fatalf("delete -all with a row in flight: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if rows := rowsJSON(t, append([]string{"idempotency", "show", key}, data...)...); len(rows) != 1 || rows[0].Principal != "user:1" || rows[0].State != "running" {
		t.Fatalf("after the refused delete: %+v, want the running row of user:1 only", rows)
	}
	out, _ := mustRun(t, append([]string{"idempotency", "delete", key, "-force"}, data...)...)
	if !strings.Contains(out, `principal "user:1"`) {
		t.Fatalf("delete -force: %s", out)
	}
	if code, _, stderr := run(append([]string{"idempotency", "show", key}, data...)...); code != 1 || !strings.Contains(stderr, "no such idempotency row") {
		t.Fatalf("show after delete -force: exit %d %s", code, stderr)
	}
}
