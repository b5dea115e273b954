package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/console"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// clock is a memory driver's clock that a test moves forward: the real
// time plus an offset.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// apiEnv is an app with durable and keyed flows, its admin handler at
// /_oke/ with the token, on a memory driver.
type apiEnv struct {
	t     *testing.T
	app   *oke.App
	d     *memory.Driver
	srv   *httptest.Server
	clock *clock
	gate  chan struct{} // adm.steps' second step waits on it when not nil
}

func setupAPI(t *testing.T) *apiEnv {
	t.Helper()
	e := &apiEnv{t: t, clock: &clock{}}
	e.d = memory.New(memory.WithClock(e.clock.now))
	app := oke.New(oke.Config{Driver: e.d, SweepInterval: -1, Logger: quiet(), PollInterval: 5 * time.Millisecond})
	app.Handle(oke.POST("/steps"), oke.NewFlow("adm.steps", oke.Options{Durable: true},
		func(ctx context.Context, in struct{ N int }, fx *oke.Fx) (oke.Response[int], error) {
			sum := 0
			for i := 1; i <= in.N; i++ {
				v, err := oke.Step(ctx, "step "+string(rune('0'+i)), func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return oke.Response[int]{}, err
				}
				sum += v
			}
			return oke.OK(sum), nil
		}))
	app.Handle(oke.POST("/nap"), oke.NewFlow("adm.nap", oke.Options{Durable: true},
		func(ctx context.Context, in struct{ Who string }, fx *oke.Fx) (oke.Response[string], error) {
			if err := oke.Sleep(ctx, "nap", time.Hour); err != nil {
				return oke.Response[string]{}, err
			}
			return oke.OK("woke"), nil
		}))
	app.Handle(oke.POST("/brief"), oke.NewFlow("adm.brief", oke.Options{Effects: []oke.Effect{oke.EffectWrite}, Idempotency: oke.Idempotency{TTL: "50ms"}},
		func(ctx context.Context, in struct{ Text string }, fx *oke.Fx) (oke.Response[string], error) {
			return oke.Created(in.Text, "/brief/1"), nil
		}))
	app.Handle(oke.POST("/secret"), oke.NewFlow("adm.secret", oke.Options{Effects: []oke.Effect{oke.EffectWrite}},
		func(ctx context.Context, in struct{ Text string }, fx *oke.Fx) (oke.Response[map[string]string], error) {
			return oke.Created(map[string]string{"secret": in.Text}, "/secret/1"), nil
		}))
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok))))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.app = app
	e.srv = httptest.NewServer(app)
	t.Cleanup(func() {
		e.srv.Close()
		app.Close(context.Background())
	})
	return e
}

// call sends a request with the admin token and returns the status and
// body.
func (e *apiEnv) call(method, path, body string, hdr ...string) (int, string) {
	e.t.Helper()
	h := append([]string{"Authorization", "Bearer " + adminTok}, hdr...)
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	resp, b := adminReq{method, path, h, body}.send(e.t, e.srv.Client(), e.srv.URL)
	return resp.StatusCode, b
}

func (e *apiEnv) decode(method, path, body string, want int, v any) {
	e.t.Helper()
	status, b := e.call(method, path, body)
	if status != want {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(b), v); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

func (e *apiEnv) wantError(method, path, body string, status int, code string) string {
	e.t.Helper()
	got, b := e.call(method, path, body)
	if got != status || envelopeCode(e.t, b) != code {
		e.t.Fatalf("%s %s: %d %s, want %d %s", method, path, got, b, status, code)
	}
	return b
}

func (e *apiEnv) post(path, body string, hdr ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	e.app.ServeHTTP(w, r)
	return w
}

func (e *apiEnv) runs(query string) admin.RunsPage {
	e.t.Helper()
	var p admin.RunsPage
	e.decode("GET", "/_oke/runs"+query, "", 200, &p)
	return p
}

func (e *apiEnv) run(id string) admin.RunView {
	e.t.Helper()
	var v admin.RunView
	e.decode("GET", "/_oke/runs/"+url.PathEscape(id), "", 200, &v)
	return v
}

func (e *apiEnv) waitStatus(id, status string) admin.RunView {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		v := e.run(id)
		if v.Status == status {
			return v
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s, want %s", id, v.Status, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ids(runs []admin.RunView) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// TestAdminRunsListing: filters (flow, status, tenant, time range) and
// keyset pages, newest first, with the next cursor; bad filters are 400
// envelopes that say what is expected.
func TestAdminRunsListing(t *testing.T) {
	e := setupAPI(t)
	for i, tenant := range []string{"acme", "globex", "acme", "acme", "globex"} {
		r := driver.Run{ID: "run_" + string(rune('a'+i)), Flow: "adm.nap", Tenant: tenant, Input: []byte(`{}`), Status: driver.RunSleeping,
			WakeAt: time.Now().Add(time.Hour)}
		if _, err := e.d.CreateRun(t.Context(), r, 0); err != nil {
			t.Fatal(err)
		}
		e.clock.add(time.Second)
	}
	p := e.runs("?tenant=acme&order=desc&limit=2")
	if got := ids(p.Runs); strings.Join(got, ",") != "run_d,run_c" || p.Next != "run_c" {
		t.Fatalf("first page: %v next %q", got, p.Next)
	}
	p = e.runs("?tenant=acme&order=desc&limit=2&before=" + p.Next)
	if got := ids(p.Runs); strings.Join(got, ",") != "run_a" || p.Next != "" {
		t.Fatalf("second page: %v next %q", got, p.Next)
	}
	p = e.runs("?after=run_b&limit=2")
	if got := ids(p.Runs); strings.Join(got, ",") != "run_c,run_d" {
		t.Fatalf("ascending after run_b: %v", got)
	}
	run, _, _ := e.d.GetRun(t.Context(), "run_c")
	q := url.Values{"createdAfter": {run.CreatedAt.Format(time.RFC3339Nano)}, "createdBefore": {run.CreatedAt.Add(2 * time.Second).Format(time.RFC3339Nano)}}
	if got := ids(e.runs("?" + q.Encode()).Runs); strings.Join(got, ",") != "run_c,run_d" {
		t.Fatalf("created in [run_c, run_c+2s): %v", got)
	}
	if got := ids(e.runs("?status=sleeping,running&flow=adm.nap&tenant=globex").Runs); strings.Join(got, ",") != "run_b,run_e" {
		t.Fatalf("statuses and flow: %v", got)
	}
	for _, bad := range []string{"?status=asleep", "?createdAfter=yesterday", "?order=sideways", "?limit=0", "?limit=5000"} {
		e.wantError("GET", "/_oke/runs"+bad, "", 400, oke.CodeInvalidInput)
	}
}

// TestAdminRunReplayAndLinks: a run's view has its steps (numbered from 1),
// timing and replays; a replay answers the new run's id, which records
// replayOf; replay from step N reuses steps 1..N-1; a bad step is 400.
func TestAdminRunReplayAndLinks(t *testing.T) {
	e := setupAPI(t)
	if w := e.post("/steps", `{"N":3}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != "6" {
		t.Fatalf("POST /steps: %d %s", w.Code, w.Body)
	}
	orig := e.runs("?flow=adm.steps").Runs[0]
	v := e.run(orig.ID)
	if len(v.Steps) != 3 || v.Steps[0].Seq != 1 || v.Steps[2].Name != "step 3" || v.Timing == nil || v.Timing.RunMs <= 0 {
		t.Fatalf("run view: %+v", v)
	}
	var rep struct {
		ID, ReplayOf string
		FromStep     int
	}
	e.decode("POST", "/_oke/runs/"+orig.ID+"/replay", "", 202, &rep)
	if rep.ReplayOf != orig.ID || rep.ID == "" || rep.FromStep != 1 {
		t.Fatalf("replay answer %+v", rep)
	}
	if got := e.waitStatus(rep.ID, "completed"); got.ReplayOf != orig.ID || len(got.Steps) != 3 || got.Steps[0].Copied {
		t.Fatalf("replay: %+v", got)
	}
	e.decode("POST", "/_oke/runs/"+orig.ID+"/replay?fromStep=3", "", 202, &rep)
	from3 := e.waitStatus(rep.ID, "completed")
	if !from3.Steps[0].Copied || !from3.Steps[1].Copied || from3.Steps[2].Copied || from3.Steps[2].Attempts < 1 {
		t.Fatalf("replay from step 3: steps %+v, want 1 and 2 copied, 3 run", from3.Steps)
	}
	if got := e.run(orig.ID).Replays; len(got) != 2 {
		t.Fatalf("the original lists replays %v, want both", got)
	}
	e.wantError("POST", "/_oke/runs/"+orig.ID+"/replay?fromStep=9", "", 400, "BadStep")
	e.wantError("POST", "/_oke/runs/"+orig.ID+"/replay?fromStep=x", "", 400, oke.CodeInvalidInput)
	e.wantError("POST", "/_oke/runs/run_missing/replay", "", 404, "NotFound")
}

// TestAdminCancel: a sleeping run is cancelled (failed, 409 RunCancelled);
// a finished one is 409 RunFinished; a missing one 404; batches report
// what they did to each run.
func TestAdminCancel(t *testing.T) {
	e := setupAPI(t)
	for _, who := range []string{"a", "b", "c"} {
		if w := e.post("/nap", `{"Who":"`+who+`"}`); w.Code != 204 {
			t.Fatalf("POST /nap: %d %s", w.Code, w.Body)
		}
	}
	runs := e.runs("?flow=adm.nap").Runs
	var got admin.RunView
	e.decode("POST", "/_oke/runs/"+runs[0].ID+"/cancel", "", 200, &got)
	if got.Status != "failed" || got.Result == nil || got.Result.Status != 409 || !strings.Contains(string(mustJSON(got.Result.Body)), "RunCancelled") {
		t.Fatalf("cancelled: %+v", got)
	}
	e.wantError("POST", "/_oke/runs/"+runs[0].ID+"/cancel", "", 409, "RunFinished")
	e.wantError("POST", "/_oke/runs/run_missing/cancel", "", 404, "NotFound")

	// A batch: the filter selects the two still sleeping.
	var res admin.BatchResult
	e.decode("POST", "/_oke/runs/cancel?flow=adm.nap&status=sleeping", "", 200, &res)
	if res.Selected != 2 || res.Done != 2 || res.Failed != 0 {
		t.Fatalf("batch cancel: %+v", res)
	}
	// By ids: all three are finished now; a replay of each works.
	body := `{"ids":["` + strings.Join(ids(runs), `","`) + `","run_missing"]}`
	e.decode("POST", "/_oke/runs/cancel", body, 200, &res)
	if res.Selected != 4 || res.Done != 0 || res.Failed != 4 || res.Results[3].Code != "NotFound" || res.Results[0].Code != "RunFinished" {
		t.Fatalf("batch cancel of finished runs: %+v", res)
	}
	e.decode("POST", "/_oke/runs/replay", body, 200, &res)
	if res.Done != 3 || res.Failed != 1 || res.Results[0].NewID == "" {
		t.Fatalf("batch replay: %+v", res)
	}
	e.wantError("POST", "/_oke/runs/replay", `{"ids":`, 400, oke.CodeInvalidInput)
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestAdminRowsHideBodiesUntilRevealed: listings and look-ups carry no
// stored body (bodyHidden, bodyBytes); one row with reveal=1 does; a key is
// found in every scope; an expired row not yet swept shows as expired with
// no time left; delete removes a row; sweep deletes expired rows in
// batches and counts them.
func TestAdminRowsHideBodiesUntilRevealed(t *testing.T) {
	e := setupAPI(t)
	const key = "admin-test-key-0000001"
	for _, user := range []string{"user:1", "user:2"} {
		w := e.post("/secret", `{"Text":"<script>alert(1)</script> card 4242"}`, "Idempotency-Key", key, "Authorization", "Bearer "+user)
		if w.Code != 201 {
			t.Fatalf("POST /secret: %d %s", w.Code, w.Body)
		}
	}
	for _, path := range []string{"/_oke/idempotency", "/_oke/idempotency?key=" + key, "/_oke/idempotency/row?tenant=default&principal=anon&flow=adm.secret&key=" + key} {
		_, b := e.call("GET", path, "")
		if strings.Contains(b, "4242") || !strings.Contains(b, `"bodyHidden":true`) {
			t.Errorf("GET %s shows a stored body or does not say it is hidden: %s", path, b)
		}
	}
	var found admin.RowsPage
	e.decode("GET", "/_oke/idempotency?key="+key, "", 200, &found)
	if len(found.Rows) != 1 || found.Rows[0].Principal != "anon" || found.Rows[0].TTLLeftMs <= 0 || found.Rows[0].Expired {
		// The demo gate is not there: every request is anon, so both
		// posts share one row.
		t.Fatalf("look-up: %+v", found.Rows)
	}
	var one struct{ Row admin.RowView }
	e.decode("GET", "/_oke/idempotency/row?tenant=default&principal=anon&flow=adm.secret&key="+key+"&reveal=1", "", 200, &one)
	if b := string(mustJSON(one.Row.Response.Body)); !strings.Contains(b, "4242") || one.Row.BodyHidden {
		t.Fatalf("revealed row: %+v", one.Row)
	}
	e.wantError("GET", "/_oke/idempotency/row?key="+key, "", 400, oke.CodeInvalidInput)

	// Past its TTL (the server's clock): shown as expired, then swept.
	if w := e.post("/brief", `{"Text":"soon gone"}`, "Idempotency-Key", key); w.Code != 201 {
		t.Fatalf("POST /brief: %d %s", w.Code, w.Body)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		e.decode("GET", "/_oke/idempotency?key="+key+"&flow=adm.brief", "", 200, &found)
		if len(found.Rows) == 1 && found.Rows[0].Expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adm.brief row (TTL 50ms) is not shown as expired: %+v", found.Rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if found.Rows[0].TTLLeftMs != 0 || found.Rows[0].State != "completed" {
		t.Fatalf("expired row: %+v", found.Rows[0])
	}
	var swept struct{ Deleted, Batches int }
	e.decode("POST", "/_oke/idempotency/sweep?batch=1", "", 200, &swept)
	if swept.Deleted != 1 || swept.Batches != 2 {
		t.Fatalf("sweep: %+v, want 1 row in 2 batches of 1 (the second finds none)", swept)
	}

	// Delete.
	e.decode("DELETE", "/_oke/idempotency/row?tenant=default&principal=anon&flow=adm.secret&key="+key, "", 200, nil)
	e.wantError("DELETE", "/_oke/idempotency/row?tenant=default&principal=anon&flow=adm.secret&key="+key, "", 404, "NotFound")
	if status, b := e.call("DELETE", "/_oke/idempotency/row?tenant=default&principal=anon&flow=adm.secret&key="+key, "", "Origin", "http://evil.example"); status != 403 || envelopeCode(t, b) != "Forbidden" {
		t.Fatalf("a cross-site delete: %d %s", status, b)
	}
}

// TestAdminConsoleIsLockedDown: the console's page and files carry a
// Content-Security-Policy with no inline script, X-Frame-Options DENY and
// nosniff; the script never uses innerHTML (it builds the DOM with
// textContent and setAttribute); the API answers 401 with the envelope.
func TestAdminConsoleIsLockedDown(t *testing.T) {
	e := setupAPI(t)
	for _, path := range []string{"/_oke/", "/_oke/ui/app.js", "/_oke/ui/app.css"} {
		resp, body := adminReq{"GET", path, []string{"Authorization", "Bearer " + adminTok, "Accept", "text/html"}, ""}.send(t, e.srv.Client(), e.srv.URL)
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, CSP %q, XFO %q, XCTO %q", path, resp.StatusCode, csp, resp.Header.Get("X-Frame-Options"), resp.Header.Get("X-Content-Type-Options"))
		}
		if path == "/_oke/" && (!strings.Contains(body, `<script src="ui/app.js"`) || strings.Contains(body, "<script>")) {
			t.Errorf("the console page has an inline script, or no script file: %s", body)
		}
	}
	js, err := readAsset("app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(js, bad) {
			t.Errorf("console/assets/ui/app.js uses %s: build elements with textContent and setAttribute", bad)
		}
	}
	resp, body := adminReq{"GET", "/_oke/ui/app.js", nil, ""}.send(t, e.srv.Client(), e.srv.URL)
	if resp.StatusCode != 401 || envelopeCode(t, body) != "Unauthorized" {
		t.Errorf("the console's script without a session: %d %s", resp.StatusCode, body)
	}
}

func readAsset(name string) (string, error) {
	f, err := console.Assets.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	_, err = bufio.NewReader(f).WriteTo(&b)
	return b.String(), err
}

// TestAdminLiveRuns: GET /runs/events sends the page at once and again when
// a run changes.
func TestAdminLiveRuns(t *testing.T) {
	e := setupAPI(t)
	req, _ := http.NewRequest("GET", e.srv.URL+"/_oke/runs/events?order=desc&limit=5", nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := e.srv.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan admin.RunsPage, 4)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "runs":
				var p admin.RunsPage
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p) == nil {
					events <- p
				}
			}
		}
	}()
	next := func(what string) admin.RunsPage {
		t.Helper()
		select {
		case p, ok := <-events:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
			return p
		case <-ctx.Done():
			t.Fatalf("%s: no event", what)
		}
		return admin.RunsPage{}
	}
	if p := next("the first event"); len(p.Runs) != 0 {
		t.Fatalf("first event: %+v, want no runs", p)
	}
	if w := e.post("/nap", `{"Who":"live"}`); w.Code != 204 {
		t.Fatalf("POST /nap: %d", w.Code)
	}
	for {
		p := next("the event after a run started")
		if len(p.Runs) == 1 && p.Runs[0].Status == "sleeping" {
			break
		}
	}
}
