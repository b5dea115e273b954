package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/okengine/oke/admin"
)

// rowsJSON runs an idempotency command with -json and decodes its rows.
func rowsJSON(t *testing.T, args ...string) []admin.RowView {
	t.Helper()
	stdout, _ := mustRun(t, append(args, "-json")...)
	var out struct{ Rows []admin.RowView }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v -json: %v\n%s", args, err, stdout)
	}
	return out.Rows
}

// TestIdempotencyShowAndDelete: oke idempotency show finds a key in every
// scope unless narrowed, hides stored bodies unless -reveal (of one row);
// delete wants one scope or -all; the same on -addr and on -data.
func TestIdempotencyShowAndDelete(t *testing.T) {
	dir := t.TempDir()
	d := openDemo(t, dir)
	const key = "cli-test-key-show-0001"
	for _, user := range []string{"user:1", "user:2", "user:3"} {
		if code := d.post("/charges", `{"amount":700,"currency":"usd"}`, "Idempotency-Key", key, "Authorization", "Bearer "+user); code != 201 {
			t.Fatalf("POST /charges as %s: %d", user, code)
		}
	}
	addr := []string{"-addr", d.url}

	rows := rowsJSON(t, append([]string{"idempotency", "show", key}, addr...)...)
	if len(rows) != 3 || rows[0].Principal != "user:1" || !rows[0].BodyHidden || rows[0].Response.Body != nil || rows[0].TTLLeftMs <= 0 {
		t.Fatalf("show across scopes: %+v", rows)
	}
	out, _ := mustRun(t, append([]string{"idempotency", "show", key, "-principal", "user:2"}, addr...)...)
	if !strings.Contains(out, `principal "user:2"`) || !strings.Contains(out, "hidden (") || strings.Contains(out, "700") || strings.Contains(out, "user:1") {
		t.Fatalf("show narrowed to user:2:\n%s", out)
	}
	out, _ = mustRun(t, append([]string{"idempotency", "show", key, "-principal", "user:2", "-reveal"}, addr...)...)
	if !strings.Contains(out, `"amount":700`) {
		t.Fatalf("show -reveal:\n%s", out)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"-reveal of several rows", []string{"idempotency", "show", key, "-reveal"}, 2, "narrow it with -tenant, -principal and -flow"},
		{"delete of several rows", []string{"idempotency", "delete", key}, 2, "or pass -all"},
		{"a key no row has", []string{"idempotency", "show", "cli-test-key-none-0001"}, 1, "no such idempotency row"},
		{"show needs a key", []string{"idempotency", "show"}, 2, "want 1 Idempotency-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(append(tc.args, addr...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, want %d; stderr %q does not hold %q (stdout %q)", code, tc.code, stderr, tc.stderr, stdout)
			}
		})
	}
	out, _ = mustRun(t, append([]string{"idempotency", "delete", key, "-principal", "user:1"}, addr...)...)
	if !strings.Contains(out, `principal "user:1"`) {
		t.Fatalf("delete -principal user:1: %s", out)
	}
	if rows := rowsJSON(t, append([]string{"idempotency", "show", key}, addr...)...); len(rows) != 2 {
		t.Fatalf("after deleting one scope: %d rows, want 2", len(rows))
	}
	// The deleted scope's key runs as new: a new charge.
	if code := d.post("/charges", `{"amount":700,"currency":"usd"}`, "Idempotency-Key", key, "Authorization", "Bearer user:1"); code != 201 {
		t.Fatalf("POST /charges after the delete: %d", code)
	}

	// -data, once the app is gone.
	d.stop()
	data := []string{"-data", dir}
	if rows := rowsJSON(t, append([]string{"idempotency", "show", key, "-tenant", "default"}, data...)...); len(rows) != 3 {
		t.Fatalf("show -data: %d rows, want 3", len(rows))
	}
	stdout, _ := mustRun(t, append([]string{"idempotency", "delete", key, "-all", "-json"}, data...)...)
	var del struct{ Deleted []admin.RowView }
	if err := json.Unmarshal([]byte(stdout), &del); err != nil || len(del.Deleted) != 3 {
		t.Fatalf("delete -all -json: %v %s", err, stdout)
	}
	if code, _, stderr := run(append([]string{"idempotency", "show", key}, data...)...); code != 1 || !strings.Contains(stderr, "no such idempotency row") {
		t.Fatalf("show after delete -all: exit %d %s", code, stderr)
	}
}
