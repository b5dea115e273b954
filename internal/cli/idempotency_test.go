package cli_test

import (
	"encoding/json"
	"fmt"
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

// TestIdempotencyLsPages: DESIGN.md §11 — idempotency ls never truncates
// silently: a page cut by -limit says on stderr the command that lists the
// next one (-after CURSOR), a page that holds the last row says nothing;
// walking the pages lists every row once, in key order; the same on -addr
// and -data. -json carries the cursor as "next".
func TestIdempotencyLsPages(t *testing.T) {
	dir := t.TempDir()
	d := openDemo(t, dir)
	var want []string
	for i := range 5 {
		key := fmt.Sprintf("cli-test-key-page-%04d", i)
		if code := d.post("/charges", `{"amount":100,"currency":"usd"}`, "Idempotency-Key", key); code != 201 {
			t.Fatalf("POST /charges: %d", code)
		}
		want = append(want, "default/anon/"+key)
	}
	check := func(t *testing.T, where ...string) {
		for _, limit := range []string{"1", "2", "4"} {
			got := pages(t, "rows", append([]string{"idempotency", "ls", "-limit", limit}, where...), rowKeys(t))
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("pages of %s rows: %v, want %v", limit, got, want)
			}
		}
		stdout, stderr := mustRun(t, append([]string{"idempotency", "ls", "-limit", "5"}, where...)...)
		if rows := table(t, stdout); len(rows) != 5 || stderr != "" {
			t.Errorf("a page that holds the last row: %d rows, stderr %q (want no next page)", len(rows), stderr)
		}
		stdout, stderr = mustRun(t, append([]string{"idempotency", "ls", "-limit", "2", "-json"}, where...)...)
		var page struct {
			Rows []admin.RowView
			Next string
		}
		if err := json.Unmarshal([]byte(stdout), &page); err != nil || len(page.Rows) != 2 || page.Next == "" || !strings.Contains(stderr, "-after "+page.Next) {
			t.Errorf("ls -json -limit 2: %v, %+v, stderr %q", err, page, stderr)
		}
		if code, _, stderr := run(append([]string{"idempotency", "ls", "-after", "nope!"}, where...)...); code != 2 || !strings.Contains(stderr, "-after takes the cursor") {
			t.Errorf("a bad cursor: exit %d, stderr %q", code, stderr)
		}
	}
	t.Run("addr", func(t *testing.T) { check(t, "-addr", d.url) })
	d.stop()
	t.Run("data", func(t *testing.T) { check(t, "-data", dir) })
}

// TestRunsLsPages: runs ls pages the same way, oldest first and newest
// first (-newest -before), on -addr and -data.
func TestRunsLsPages(t *testing.T) {
	dir := t.TempDir()
	d := openDemo(t, dir)
	for i := range 3 {
		if code := d.post("/pipeline", fmt.Sprintf(`{"tag":"page%d","steps":1,"stepMs":0}`, i), "Idempotency-Key", fmt.Sprintf("cli-test-key-runs-%04d", i)); code != 201 {
			t.Fatalf("POST /pipeline: %d", code)
		}
	}
	ids := func(out string) []string {
		var ids []string
		for _, r := range table(t, out) {
			ids = append(ids, r["ID"])
		}
		return ids
	}
	check := func(t *testing.T, where ...string) {
		all := ids(func() string { out, _ := mustRun(t, append([]string{"runs", "ls"}, where...)...); return out }())
		if len(all) != 3 {
			t.Fatalf("runs ls: %v", all)
		}
		if got := pages(t, "runs", append([]string{"runs", "ls", "-limit", "2"}, where...), ids); strings.Join(got, " ") != strings.Join(all, " ") {
			t.Errorf("pages oldest first: %v, want %v", got, all)
		}
		got := pages(t, "runs", append([]string{"runs", "ls", "-newest", "-limit", "1"}, where...), ids)
		if len(got) != 3 || got[0] != all[2] || got[2] != all[0] {
			t.Errorf("pages newest first: %v, want %v reversed", got, all)
		}
		if _, stderr := mustRun(t, append([]string{"runs", "ls", "-limit", "3"}, where...)...); stderr != "" {
			t.Errorf("a page that holds the last run: stderr %q, want nothing", stderr)
		}
	}
	t.Run("addr", func(t *testing.T) { check(t, "-addr", d.url) })
	d.stop()
	t.Run("data", func(t *testing.T) { check(t, "-data", dir) })
}
