package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
)

// testAdminToken is the admin token of every demo these tests open
// (newConfig); env.do sends it to the admin API.
const testAdminToken = "test-admin-token-0123456789abcdef"

// env is one demo app served by httptest, with its data in a temp folder.
type env struct {
	t   *testing.T
	srv *app.Server
	url string
	dir string
}

// setup opens the demo on the file driver in a temp -data folder (under
// TestPostgres: with -postgres on a fresh database) and serves it. edit, if
// given, changes the configuration first.
func setup(t *testing.T, edit ...func(*app.Config)) *env {
	t.Helper()
	e, _ := openEnv(t, newConfig(t, edit...))
	return e
}

// newConfig is the configuration setup opens: a temp -data folder (under
// TestPostgres: -postgres on a fresh database), warnings logged to the test.
func newConfig(t *testing.T, edit ...func(*app.Config)) app.Config {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.DataDir = t.TempDir()
	if onPostgres(t) {
		cfg.Postgres, _ = demoDSN(t, newDatabase(t, demoConns))
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.AdminToken = testAdminToken
	for _, f := range edit {
		f(&cfg)
	}
	return cfg
}

// openEnv opens the demo with cfg and serves it. close shuts it down (it
// also runs when the test ends), so that the test may open cfg's data
// again.
func openEnv(t *testing.T, cfg app.Config) (e *env, close func()) {
	t.Helper()
	s := openDemo(t, cfg)
	hs := serve(s)
	var once sync.Once
	close = func() {
		once.Do(func() {
			s.Shutdown()
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Errorf("close the demo: %v", err)
			}
		})
	}
	t.Cleanup(close)
	return &env{t: t, srv: s, url: hs.URL, dir: cfg.DataDir}, close
}

// serve serves s with httptest, on the http.Server and listener Run would
// use (its connection bounds and cap; closing it ends s's live feeds).
func serve(s *app.Server) *httptest.Server {
	hs := httptest.NewUnstartedServer(nil)
	hs.Listener = s.Listener(hs.Listener)
	hs.Config = s.HTTPServer()
	hs.Start()
	return hs
}

// reply is an HTTP answer, read whole.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends a request. hdr holds header name/value pairs. A request to the
// admin API (/_oke/…) carries the demo's admin token unless hdr sets
// Authorization itself.
func (e *env) do(method, path, body string, hdr ...string) reply {
	e.t.Helper()
	if strings.HasPrefix(path, app.AdminPrefix+"/") && !hasHeader(hdr, "Authorization") {
		hdr = append([]string{"Authorization", "Bearer " + testAdminToken}, hdr...)
	}
	return do(e.t, e.url, method, path, body, hdr...)
}

// hasHeader reports whether the name/value pairs hdr set name.
func hasHeader(hdr []string, name string) bool {
	for i := 0; i+1 < len(hdr); i += 2 {
		if http.CanonicalHeaderKey(hdr[i]) == http.CanonicalHeaderKey(name) {
			return true
		}
	}
	return false
}

func do(t *testing.T, base, method, path, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(hdr)%2 != 0 {
		t.Fatalf("headers must come in name/value pairs: %q", hdr)
	}
	for i := 0; i < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// decode decodes the JSON body into v.
func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode body %q: %v", r.Body, err)
	}
}

// envelope is the JSON error envelope.
type envelope struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorCode returns the code of an error envelope, failing on anything
// else.
func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error answer Content-Type = %q, want application/json (body %q)", ct, r.Body)
	}
	var env envelope
	r.decode(t, &env)
	if env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("body %q is not an error envelope {\"error\":{\"code\":…,\"message\":…}}", r.Body)
	}
	return env.Error.Code
}

// want fails unless the answer has status and, when code is set, is an
// error envelope with that code.
func (r reply) want(t *testing.T, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.Status, status, r.Body)
	}
	if code != "" {
		if got := r.errorCode(t); got != code {
			t.Fatalf("error code = %q, want %q (body %s)", got, code, r.Body)
		}
	}
}

// replayed reports whether the answer carries Idempotent-Replayed: true.
func (r reply) replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

var keySeq atomic.Int64

// newKey returns a fresh valid Idempotency-Key.
func newKey() string { return fmt.Sprintf("test-key-%016d", keySeq.Add(1)) }

// metrics scrapes GET /metrics into series → value, the series written as
// Prometheus does: name{label="value",…}.
func (e *env) metrics() map[string]float64 {
	e.t.Helper()
	r := e.do("GET", "/metrics", "")
	r.want(e.t, 200, "")
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(r.Body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			e.t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// executions is oke_flow_executions_total of flow.
func (e *env) executions(flow string) float64 {
	e.t.Helper()
	return e.metrics()[fmt.Sprintf("oke_flow_executions_total{flow=%q}", flow)]
}

// outcome is oke_idempotency_outcomes_total of flow and outcome.
func outcome(m map[string]float64, flow, outcome string) float64 {
	return m[fmt.Sprintf("oke_idempotency_outcomes_total{flow=%q,outcome=%q}", flow, outcome)]
}

// count returns SELECT count(*) FROM table.
func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.srv.DB().QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		e.t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// charge creates a charge and returns it.
func (e *env) charge(amount int64, hdr ...string) app.Charge {
	e.t.Helper()
	r := e.do("POST", "/charges", fmt.Sprintf(`{"amount":%d,"currency":"usd"}`, amount),
		append([]string{"Idempotency-Key", newKey()}, hdr...)...)
	r.want(e.t, 201, "")
	var c app.Charge
	r.decode(e.t, &c)
	return c
}
