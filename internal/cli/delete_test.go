package cli_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
	"github.com/okengine/oke/driver/memory"
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

// TestIdempotencyDeleteRefusesARowInFlightOverHTTP: the same through an
// app's admin API (-addr): the 409 RowInProgress becomes the refusal line,
// exit 1; -force sends force=1.
func TestIdempotencyDeleteRefusesARowInFlightOverHTTP(t *testing.T) {
	const tok = "cli-delete-token-0123456789abcdef"
	d := memory.New()
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(tok))))
	srv := httptest.NewServer(app)
	t.Cleanup(func() {
		srv.Close()
		app.Close(context.Background())
	})
	const key = "cli-in-flight-key-http1"
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "payments.charge", Key: key}
	if res, err := d.Claim(context.Background(), driver.ClaimRequest{Key: k, Fingerprint: "fp", Owner: "holder", Lease: time.Hour, TTL: 24 * time.Hour}); err != nil || !res.Claimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	addr := []string{"-addr", srv.URL, "-token", tok}
	code, stdout, stderr := run(append([]string{"idempotency", "delete", key}, addr...)...)
	if code != 1 || !strings.Contains(stderr, "still running") || !strings.Contains(stderr, "-force") || stdout != "" {
		t.Fatalf("delete of a row in flight over HTTP: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if _, err := d.Get(context.Background(), k); err != nil {
		t.Fatalf("the refused delete removed the row: %v", err)
	}
	out, _ := mustRun(t, append([]string{"idempotency", "delete", key, "-force"}, addr...)...)
	if !strings.Contains(out, "deleted the row") {
		t.Fatalf("delete -force over HTTP: %s", out)
	}
	if _, err := d.Get(context.Background(), k); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("after delete -force: %v", err)
	}
}
