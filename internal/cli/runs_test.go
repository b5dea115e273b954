package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/examples/payments/app"
)

// cliAdminToken is the demo's admin token in these tests.
const cliAdminToken = "cli-test-admin-token-0123456789"

// demo is the payments demo on a data folder, served by httptest.
type demo struct {
	t    *testing.T
	srv  *app.Server
	url  string
	stop func()
}

// openDemo opens the demo on dir and serves it until stop (or the test's
// end).
func openDemo(t *testing.T, dir string) *demo {
	t.Helper()
	return openDemoWith(t, func(cfg *app.Config) { cfg.DataDir = dir })
}

// openDemoWith opens the demo with the config set changes, and serves it
// until stop (or the test's end).
func openDemoWith(t *testing.T, set func(*app.Config)) *demo {
	t.Helper()
	cfg := app.DefaultConfig()
	set(&cfg)
	cfg.PollInterval = 10 * time.Millisecond
	cfg.AdminToken = cliAdminToken
	t.Setenv("OKE_ADMIN_TOKEN", cliAdminToken) // what the commands send
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := app.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open the demo: %v", err)
	}
	if cfg.Postgres != "" {
		s.DB().SetMaxOpenConns(demoBusinessConns)
	}
	hs := httptest.NewServer(s)
	d := &demo{t: t, srv: s, url: hs.URL}
	stopped := false
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close the demo: %v", err)
		}
	}
	t.Cleanup(d.stop)
	return d
}

// post sends a POST and returns the status.
func (d *demo) post(path, body string, hdr ...string) int {
	d.t.Helper()
	req, _ := http.NewRequest("POST", d.url+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// get returns the body of a GET.
func (d *demo) get(path string) string {
	d.t.Helper()
	resp, err := http.Get(d.url + path)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mustRun runs the tool and fails unless it exits 0.
func mustRun(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := run(args...)
	if code != 0 {
		t.Fatalf("oke %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

// table parses a table the tool printed: the header's columns → each row's
// fields (a CREATED or EXPIRES column holds a date and a time).
func table(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	head := strings.Fields(lines[0])
	var rows []map[string]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(head)+1 {
			t.Fatalf("row %q does not match the header %q", l, lines[0])
		}
		row := map[string]string{}
		j := 0
		for _, h := range head {
			row[h] = f[j]
			if h == "CREATED" || h == "EXPIRES" {
				j++
				row[h] += " " + f[j]
			}
			j++
		}
		rows = append(rows, row)
	}
	return rows
}

// showJSON is `oke runs show -json`.
func showJSON(t *testing.T, id string, where ...string) admin.RunView {
	t.Helper()
	stdout, _ := mustRun(t, append(append([]string{"runs", "show"}, where...), id, "-json")...)
	var v admin.RunView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("show -json: %v\n%s", err, stdout)
	}
	return v
}

// oke runs … -addr: the runs of a running app, through its admin API.
func TestRunsAddr(t *testing.T) {
	d := openDemo(t, t.TempDir())
	key := "cli-test-key-0000000001"
	if code := d.post("/pipeline", `{"tag":"cli","steps":2,"stepMs":0}`, "Idempotency-Key", key); code != 201 {
		t.Fatalf("POST /pipeline: %d", code)
	}
	if code := d.post("/reminders", `{"to":"later@example.com","delay":"1h"}`); code != 204 {
		t.Fatalf("POST /reminders: %d", code)
	}
	addr := []string{"-addr", d.url}

	stdout, _ := mustRun(t, append([]string{"runs", "ls"}, addr...)...)
	rows := table(t, stdout)
	if len(rows) != 2 {
		t.Fatalf("runs ls: %d rows\n%s", len(rows), stdout)
	}
	pipe, remind := rows[0], rows[1]
	if pipe["FLOW"] != "demo.pipeline" || pipe["STATUS"] != "completed" || pipe["ATTEMPTS"] != "1" || pipe["STEPS"] != "2" ||
		!strings.HasPrefix(pipe["ID"], "run_") || pipe["CREATED"] == "" {
		t.Fatalf("pipeline row %v", pipe)
	}
	if remind["FLOW"] != "demo.remind" || remind["STATUS"] != "sleeping" || remind["STEPS"] != "2" {
		t.Fatalf("reminder row %v", remind)
	}
	id := pipe["ID"]

	t.Run("ls filters, and prints JSON", func(t *testing.T) {
		stdout, _ := mustRun(t, "runs", "ls", "-addr", d.url, "-status", "sleeping", "-flow", "demo.remind")
		if rows := table(t, stdout); len(rows) != 1 || rows[0]["ID"] != remind["ID"] {
			t.Fatalf("ls -status sleeping:\n%s", stdout)
		}
		stdout, _ = mustRun(t, "runs", "ls", "-addr", d.url, "-flow", "payments.refund")
		if strings.TrimSpace(stdout) != "no runs" {
			t.Fatalf("ls of a flow without runs: %q", stdout)
		}
		stdout, _ = mustRun(t, "runs", "ls", "-json", "-addr", d.url+"/_oke/")
		var out struct{ Runs []admin.RunView }
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.Runs) != 2 || out.Runs[0].ID != id {
			t.Fatalf("ls -json: %v\n%s", err, stdout)
		}
		_, stderr := mustRun(t, "runs", "ls", "-addr", d.url, "-limit", "1")
		if !strings.Contains(stderr, "-after "+id) {
			t.Fatalf("a full page does not say how to get the next one: %q", stderr)
		}
	})

	t.Run("show prints the steps with attempts, results and timings", func(t *testing.T) {
		stdout, _ := mustRun(t, "runs", "show", id, "-addr", d.url)
		for _, want := range []string{"run       " + id, "flow      demo.pipeline", "status    completed",
			`input     {"stepMs":0,"steps":2,"tag":"cli"}`, `result    201, Location /pipeline/cli: {"steps":2,"tag":"cli"}`} {
			if !strings.Contains(stdout, want) {
				t.Fatalf("show does not hold %q:\n%s", want, stdout)
			}
		}
		for _, want := range []string{"SEQ  STEP    ATTEMPTS  STARTED", "1    step 1  1", "2    step 2  1"} {
			if !strings.Contains(stdout, want) {
				t.Fatalf("show does not hold %q:\n%s", want, stdout)
			}
		}
		v := showJSON(t, id, addr...)
		if v.ID != id || len(v.Steps) != 2 || v.Steps[1].Name != "step 2" || v.Steps[1].Attempts != 1 || v.Next != nil {
			t.Fatalf("show -json: %+v (a finished run has no next step)", v)
		}
		// The sleeping run takes step 3 next; the execution that wakes it
		// is its first attempt.
		stdout, _ = mustRun(t, "runs", "show", remind["ID"], "-addr", d.url)
		if !strings.Contains(stdout, "next step  3, attempts 1") {
			t.Fatalf("show of the sleeping run does not hold its next step:\n%s", stdout)
		}
		if v := showJSON(t, remind["ID"], addr...); v.Next == nil || *v.Next != (admin.NextView{Seq: 3, Attempts: 1}) {
			t.Fatalf("show -json of the sleeping run: next %+v, want step 3, 1 attempt", v.Next)
		}
	})

	t.Run("replay prints the new run, which the app runs at once", func(t *testing.T) {
		stdout, stderr := mustRun(t, "runs", "replay", "-addr", d.url, id)
		nid := strings.TrimSpace(stdout)
		if !strings.HasPrefix(nid, "run_") || nid == id || !strings.Contains(stderr, "the app runs it now") {
			t.Fatalf("replay: stdout %q stderr %q", stdout, stderr)
		}
		waitFor(t, "the replay to complete", func() bool { return showJSON(t, nid, addr...).Status == "completed" })
		if v := showJSON(t, nid, addr...); v.ReplayOf != id {
			t.Fatalf("replay of %q", v.ReplayOf)
		}
		if got := d.get("/pipeline/cli"); got != `{"tag":"cli","steps":[{"step":1,"executions":2},{"step":2,"executions":2}]}` {
			t.Fatalf("after the replay: %s", got)
		}
	})

	t.Run("idempotency ls lists the rows", func(t *testing.T) {
		stdout, _ := mustRun(t, "idempotency", "ls", "-addr", d.url)
		rows := table(t, stdout)
		if len(rows) != 1 {
			t.Fatalf("idempotency ls:\n%s", stdout)
		}
		r := rows[0]
		if r["KEY"] != key || r["FLOW"] != "demo.pipeline" || r["STATE"] != "completed" || r["STATUS"] != "201" || r["RUN"] != id || r["PRINCIPAL"] != "anon" {
			t.Fatalf("row %v", r)
		}
		stdout, _ = mustRun(t, "idempotency", "ls", "-json", "-addr", d.url)
		var out struct{ Rows []admin.RowView }
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.Rows) != 1 || out.Rows[0].Key != key {
			t.Fatalf("idempotency ls -json: %v\n%s", err, stdout)
		}
	})

	t.Run("mistakes", func(t *testing.T) {
		cases := []struct {
			name   string
			args   []string
			code   int
			stderr string
		}{
			{"an unknown run is exit 1", []string{"runs", "show", "-addr", d.url, "run_nope"}, 1, "no such run"},
			{"replay of an unknown run is exit 1", []string{"runs", "replay", "-addr", d.url, "run_nope"}, 1, "no such run"},
			{"a bad status is a usage error", []string{"runs", "ls", "-addr", d.url, "-status", "nope"}, 2, "-status must be"},
			{"a bad limit is a usage error", []string{"runs", "ls", "-addr", d.url, "-limit", "0"}, 2, "-limit must be"},
			{"-addr and -data together", []string{"runs", "ls", "-addr", d.url, "-data", t.TempDir()}, 2, "give one of -addr, -data and -postgres, not several (got -addr and -data)"},
			{"show needs an id", []string{"runs", "show", "-addr", d.url}, 2, "want 1 run id"},
			{"show takes one id", []string{"runs", "show", "-addr", d.url, "a", "b"}, 2, "want 1 run id"},
			{"runs needs a command", []string{"runs"}, 2, "oke runs ls"},
			{"an unknown runs command", []string{"runs", "rm"}, 2, `unknown command "rm"`},
			{"an unknown idempotency command", []string{"idempotency", "frob"}, 2, `unknown command "frob"`},
			{"a bad -addr", []string{"runs", "ls", "-addr", "ftp://x"}, 2, "-addr must be an http(s) URL"},
			{"nobody listening", []string{"runs", "ls", "-addr", "127.0.0.1:1"}, 1, "is the app running there?"},
			{"no admin API at the path", []string{"runs", "ls", "-addr", d.url + "/nope"}, 1, "NotFound"},
			{"a wrong -token", []string{"runs", "ls", "-addr", d.url, "-token", "wrong"}, 1, "is not the app's admin token"},
			{"no token at all names the fix", []string{"runs", "ls", "-addr", d.url, "-token", ""}, 1, "pass the app's admin token with -token or $OKE_ADMIN_TOKEN"},
			{"an idempotency listing needs the token too", []string{"idempotency", "ls", "-addr", d.url, "-token", ""}, 1, "Unauthorized"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				code, stdout, stderr := run(tc.args...)
				if code != tc.code || !strings.Contains(stderr, tc.stderr) {
					t.Fatalf("exit %d, want %d; stderr %q does not hold %q (stdout %q)", code, tc.code, stderr, tc.stderr, stdout)
				}
			})
		}
	})
}

// oke runs … -data: the data folder itself, while no app holds it.
func TestRunsData(t *testing.T) {
	dir := t.TempDir()
	d := openDemo(t, dir)
	key := "cli-test-key-0000000002"
	if code := d.post("/pipeline", `{"tag":"data","steps":3,"stepMs":0}`, "Idempotency-Key", key); code != 201 {
		t.Fatalf("POST /pipeline: %d", code)
	}
	data := []string{"-data", dir}

	t.Run("a folder an app holds is refused, pointing at -addr", func(t *testing.T) {
		code, _, stderr := run("runs", "ls", "-data", dir)
		if code != 1 || !strings.Contains(stderr, "in use") || !strings.Contains(stderr, "-addr") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
	d.stop()

	stdout, _ := mustRun(t, append([]string{"runs", "ls"}, data...)...)
	rows := table(t, stdout)
	if len(rows) != 1 || rows[0]["FLOW"] != "demo.pipeline" || rows[0]["STATUS"] != "completed" || rows[0]["STEPS"] != "3" {
		t.Fatalf("runs ls -data:\n%s", stdout)
	}
	id := rows[0]["ID"]
	if v := showJSON(t, id, data...); len(v.Steps) != 3 || v.Steps[2].Name != "step 3" || v.Result == nil || v.Result.Status != 201 {
		t.Fatalf("show -data: %+v", v)
	}
	stdout, _ = mustRun(t, "idempotency", "ls", "-data", dir)
	if rows := table(t, stdout); len(rows) != 1 || rows[0]["KEY"] != key || rows[0]["RUN"] != id {
		t.Fatalf("idempotency ls -data:\n%s", stdout)
	}

	stdout, stderr := mustRun(t, "runs", "replay", id, "-data", dir)
	nid := strings.TrimSpace(stdout)
	if !strings.HasPrefix(nid, "run_") || !strings.Contains(stderr, "picked up when an app next opens the folder") {
		t.Fatalf("replay -data: stdout %q stderr %q", stdout, stderr)
	}
	if v := showJSON(t, nid, data...); v.Status != "running" || v.ReplayOf != id || len(v.Steps) != 0 {
		t.Fatalf("the replay before an app opens the folder: %+v", v)
	}

	// The next app on the folder runs it.
	d2 := openDemo(t, dir)
	waitFor(t, "the replay to complete", func() bool { return showJSON(t, nid, "-addr", d2.url).Status == "completed" })
	if got := d2.get("/pipeline/data"); got != `{"tag":"data","steps":[{"step":1,"executions":2},{"step":2,"executions":2},{"step":3,"executions":2}]}` {
		t.Fatalf("after the replay: %s", got)
	}

	code, _, stderr := run("runs", "ls", "-data", dir+"/nope")
	if code != 1 || !strings.Contains(stderr, "no oke data in "+dir+"/nope") {
		t.Fatalf("a missing folder: exit %d, stderr %q", code, stderr)
	}
}

// TestReadOnlyCommandsCreateNothing: DESIGN.md 6.1 / issue 11 — a command
// that only reads never creates files in the folder it is pointed at; a
// folder with no oke data is an error naming it.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	for _, args := range [][]string{
		{"runs", "ls"}, {"runs", "show", "run_x"}, {"idempotency", "ls"},
	} {
		dir := t.TempDir()
		code, _, stderr := run(append(args, "-data", dir)...)
		if code != 1 || !strings.Contains(stderr, "no oke data in "+dir) {
			t.Fatalf("%v on an empty folder: exit %d, stderr %q", args, code, stderr)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Fatalf("%v created %v (%v) in a folder with no oke data", args, ents, err)
		}
	}
}

func TestRunsHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "runs"}, {"runs", "-h"}} {
		code, stdout, stderr := run(args...)
		if code != 0 || !strings.Contains(stdout+stderr, "oke runs replay [-addr URL | -data DIR | -postgres DSN [-schema NAME]] [-from-step N] [-json] ID") || !strings.Contains(stdout+stderr, "-data DIR") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	code, stdout, _ := run("help", "idempotency")
	if code != 0 || !strings.Contains(stdout, "oke idempotency ls") {
		t.Fatalf("help idempotency: exit %d\n%s", code, stdout)
	}
	code, _, stderr := run("runs", "show", "-h")
	if code != 0 || !strings.Contains(stderr, "Usage: oke runs show") {
		t.Fatalf("runs show -h: exit %d\n%s", code, stderr)
	}
}
