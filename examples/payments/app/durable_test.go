package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/examples/payments/app"
)

// fastScheduler makes the scheduler look for due runs often.
func fastScheduler(c *app.Config) {
	c.PollInterval = 10 * time.Millisecond
	c.RetryDelay = 50 * time.Millisecond
}

// runsOf lists the journal runs of flow through the admin API.
func (e *env) runsOf(flow string) []admin.RunView {
	e.t.Helper()
	r := e.do("GET", "/_oke/runs?flow="+flow, "")
	r.want(e.t, 200, "")
	var out struct {
		Runs []admin.RunView `json:"runs"`
	}
	r.decode(e.t, &out)
	return out.Runs
}

// run reads one journal run, with its steps, through the admin API.
func (e *env) run(id string) admin.RunView {
	e.t.Helper()
	r := e.do("GET", "/_oke/runs/"+id, "")
	r.want(e.t, 200, "")
	var v admin.RunView
	r.decode(e.t, &v)
	return v
}

func TestPostRefunds(t *testing.T) {
	e := setup(t, fastScheduler)
	var (
		mu     sync.Mutex
		events []oke.Event
	)
	cancel := e.srv.App().Subscribe(func(ev oke.Event) {
		if ev.Name == "refund.created" {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	})
	defer cancel()
	c := e.charge(1500)

	key := newKey()
	body := fmt.Sprintf(`{"chargeId":%q}`, c.ID)
	first := e.do("POST", "/refunds", body, "Idempotency-Key", key)
	first.want(t, 201, "")
	var rf app.Refund
	first.decode(t, &rf)

	t.Run("201 with the refund and its Location", func(t *testing.T) {
		if !strings.HasPrefix(rf.ID, "re_") || len(rf.ID) != len("re_")+36 || rf.ChargeID != c.ID ||
			rf.Amount != 1500 || rf.Currency != "usd" || !strings.HasPrefix(rf.ProviderID, "pr_") || rf.CreatedAt == "" {
			t.Fatalf("refund = %+v", rf)
		}
		if loc := first.Header.Get("Location"); loc != "/refunds/"+rf.ID {
			t.Fatalf("Location = %q, want /refunds/%s", loc, rf.ID)
		}
		if first.replayed() {
			t.Fatal("the first answer says it was replayed")
		}
	})

	t.Run("a retried key replays the refund and refunds nothing more", func(t *testing.T) {
		again := e.do("POST", "/refunds", body, "Idempotency-Key", key)
		again.want(t, 201, "")
		if !again.replayed() || string(again.Body) != string(first.Body) || again.Header.Get("Location") != first.Header.Get("Location") {
			t.Fatalf("retry: replayed=%v %s, want a replay of %s", again.replayed(), again.Body, first.Body)
		}
		if n := e.count("refunds"); n != 1 {
			t.Fatalf("%d refunds, want 1", n)
		}
		if n := len(e.runsOf("payments.refund")); n != 1 {
			t.Fatalf("%d runs, want 1", n)
		}
	})

	t.Run("GET /refunds/{id} reads it back", func(t *testing.T) {
		r := e.do("GET", "/refunds/"+rf.ID, "")
		r.want(t, 200, "")
		var got app.Refund
		r.decode(t, &got)
		if got != rf {
			t.Fatalf("GET = %+v, want %+v", got, rf)
		}
		e.do("GET", "/refunds/re_nope", "").want(t, 404, "NotFound")
	})

	t.Run("the provider got the step's stable key once, and refunded once", func(t *testing.T) {
		var list app.ProviderRefundList
		e.do("GET", app.ProviderPath, "").decode(t, &list)
		runs := e.runsOf("payments.refund")
		if len(list.Refunds) != 1 || len(runs) != 1 {
			t.Fatalf("provider refunds %+v, runs %d", list.Refunds, len(runs))
		}
		p := list.Refunds[0]
		if p.ID != rf.ProviderID || p.Reference != rf.ID || p.Amount != 1500 || p.Requests != 1 ||
			p.IdempotencyKey != runs[0].ID+"/call the provider" {
			t.Fatalf("provider refund %+v; want key %q, reference %q, one request", p, runs[0].ID+"/call the provider", rf.ID)
		}
	})

	t.Run("its steps are in the journal, each run once", func(t *testing.T) {
		run := e.run(e.runsOf("payments.refund")[0].ID)
		var names []string
		for _, s := range run.Steps {
			names = append(names, s.Name)
			if s.Attempts != 1 {
				t.Errorf("step %q: %d attempts, want 1", s.Name, s.Attempts)
			}
		}
		want := "look up the charge,refund id,call the provider,write the refund,emit refund.created"
		if got := strings.Join(names, ","); got != want || run.Status != "completed" {
			t.Fatalf("run %s with steps %s, want completed with %s", run.Status, got, want)
		}
	})

	t.Run("refund.created is emitted once", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		if len(events) != 1 || !strings.Contains(string(events[0].Data), rf.ID) {
			t.Fatalf("events %v", events)
		}
	})

	t.Run("a refund of an unknown charge is a stored 404", func(t *testing.T) {
		k := newKey()
		r := e.do("POST", "/refunds", `{"chargeId":"ch_missing"}`, "Idempotency-Key", k)
		r.want(t, 404, "NotFound")
		again := e.do("POST", "/refunds", `{"chargeId":"ch_missing"}`, "Idempotency-Key", k)
		again.want(t, 404, "NotFound")
		if !again.replayed() || string(again.Body) != string(r.Body) {
			t.Fatalf("retry: replayed=%v %s, want a replay of %s", again.replayed(), again.Body, r.Body)
		}
		var failed int
		for _, run := range e.runsOf("payments.refund") {
			if run.Status == "failed" && run.Result != nil && run.Result.Status == 404 {
				failed++
			}
		}
		if failed != 1 {
			t.Fatalf("%d failed 404 runs, want 1", failed)
		}
	})

	t.Run("without a key it refunds too", func(t *testing.T) {
		other := e.charge(700)
		e.do("POST", "/refunds", fmt.Sprintf(`{"chargeId":%q}`, other.ID)).want(t, 201, "")
		if n := e.count("refunds"); n != 2 {
			t.Fatalf("%d refunds, want 2", n)
		}
	})

	t.Run("a second refund of the charge is 409 AlreadyRefunded (see TestRefundAtMostOncePerCharge)", func(t *testing.T) {
		e.do("POST", "/refunds", body, "Idempotency-Key", newKey()).want(t, 409, "AlreadyRefunded")
		e.do("POST", "/refunds", body).want(t, 409, "AlreadyRefunded")
	})

	t.Run("bad input and bad credentials store nothing", func(t *testing.T) {
		e.do("POST", "/refunds", `{}`, "Idempotency-Key", newKey()).want(t, 400, "ValidationFailed")
		e.do("POST", "/refunds", body, "Authorization", "Bearer bad").want(t, 401, "Unauthorized")
	})
}

// openAt opens the demo with cfg and serves it. stop closes the demo (its
// flows get up to timeout), calls then (if not nil), and closes the HTTP
// server.
func openAt(t *testing.T, cfg app.Config) (url string, stop func(timeout time.Duration, then func())) {
	t.Helper()
	s := openDemo(t, cfg)
	hs := serve(s)
	var once sync.Once
	stop = func(timeout time.Duration, then func()) {
		once.Do(func() {
			s.Shutdown()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			s.Close(ctx)
			if then != nil {
				then()
			}
			hs.Close()
		})
	}
	t.Cleanup(func() { stop(10*time.Second, nil) })
	return hs.URL, stop
}

// A step cut off after the provider refunded, before its result was saved:
// the run picks up in the next process and runs the step again, with the same
// Idempotency-Key, so the provider refunds once. The run claimed
// "refund:<chargeId>" before that step; picked up, it asks again and still
// wins (oke.Claim answers a run's own key true every time), so the pick-up
// answers 201, not 409 AlreadyRefunded.
func TestRefundCutOffStepCallsTheProviderAgainWithTheSameKey(t *testing.T) {
	var (
		mu      sync.Mutex
		keys    []string
		arrived = make(chan struct{})
		release = make(chan struct{})
	)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			close(arrived)
			<-release // the process "dies" meanwhile
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"pr_external"}`)
	}))
	defer prov.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	cfg := app.DefaultConfig()
	cfg.DataDir = t.TempDir()
	var db string
	doneA := func() {}
	if onPostgres(t) {
		db = newDatabase(t, demoConns)
		cfg.Postgres, doneA = demoDSN(t, db)
	}
	cfg.Provider = prov.URL + "/v1/refunds"
	cfg.Lease = 300 * time.Millisecond
	cfg.AdminToken = testAdminToken
	fastScheduler(&cfg)
	cfg.Logger = slog.New(slog.DiscardHandler) // the first process fails noisily, on purpose

	// The first process takes the request and calls the provider…
	urlA, stopA := openAt(t, cfg)
	var c app.Charge
	do(t, urlA, "POST", "/charges", `{"amount":900,"currency":"usd"}`, "Idempotency-Key", newKey()).decode(t, &c)
	key := newKey()
	body := fmt.Sprintf(`{"chargeId":%q}`, c.ID)
	resA := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", urlA+"/refunds", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			resA <- 0
			return
		}
		resp.Body.Close()
		resA <- resp.StatusCode
	}()
	<-arrived
	// …and is shut down before the provider answers: its store is closed
	// under the step, so the step's result is never saved.
	stopA(50*time.Millisecond, func() {
		close(release)
		if code := <-resA; code == 201 {
			t.Error("the first process answered 201 with its store closed")
		}
	})

	// The next process on the folder picks the run up (the scheduler) and
	// the retried key gets its answer.
	if onPostgres(t) {
		doneA() // the first one's connections gone
		cfg.Postgres, _ = demoDSN(t, db)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	urlB, _ := openAt(t, cfg)
	var r reply
	waitFor(t, func() bool {
		r = do(t, urlB, "POST", "/refunds", body, "Idempotency-Key", key)
		return r.Status != 409
	})
	r.want(t, 201, "")
	var rf app.Refund
	r.decode(t, &rf)
	if rf.ProviderID != "pr_external" {
		t.Fatalf("refund %+v", rf)
	}
	eB := &env{t: t, url: urlB}
	runs := eB.runsOf("payments.refund")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1 (the retry resumes the run)", len(runs))
	}
	mu.Lock()
	defer mu.Unlock()
	want := runs[0].ID + "/call the provider"
	if len(keys) != 2 || keys[0] != want || keys[1] != want {
		t.Fatalf("the provider saw keys %q, want %q twice", keys, want)
	}
	for _, s := range eB.run(runs[0].ID).Steps {
		if wantAttempts := map[bool]int{true: 2, false: 1}[s.Name == "call the provider"]; s.Attempts != wantAttempts {
			t.Errorf("step %q: %d attempts, want %d", s.Name, s.Attempts, wantAttempts)
		}
	}
	do(t, urlB, "GET", "/refunds/"+rf.ID, "").want(t, 200, "")
}

func TestPostPipeline(t *testing.T) {
	e := setup(t, fastScheduler)
	key := newKey()
	body := `{"tag":"pipe-1","steps":3,"stepMs":5}`
	r := e.do("POST", "/pipeline", body, "Idempotency-Key", key)
	r.want(t, 201, "")
	if got := strings.TrimSpace(string(r.Body)); got != `{"tag":"pipe-1","steps":3}` {
		t.Fatalf("body = %s", got)
	}
	if loc := r.Header.Get("Location"); loc != "/pipeline/pipe-1" {
		t.Fatalf("Location = %q", loc)
	}
	const once = `{"tag":"pipe-1","steps":[{"step":1,"executions":1},{"step":2,"executions":1},{"step":3,"executions":1}]}`
	t.Run("every step ran once", func(t *testing.T) {
		log := e.do("GET", "/pipeline/pipe-1", "")
		log.want(t, 200, "")
		if got := strings.TrimSpace(string(log.Body)); got != once {
			t.Fatalf("GET /pipeline/pipe-1 = %s, want %s", got, once)
		}
	})
	t.Run("a retried key replays and runs nothing", func(t *testing.T) {
		again := e.do("POST", "/pipeline", body, "Idempotency-Key", key)
		again.want(t, 201, "")
		if !again.replayed() || string(again.Body) != string(r.Body) {
			t.Fatalf("retry: replayed=%v %s", again.replayed(), again.Body)
		}
		if got := strings.TrimSpace(string(e.do("GET", "/pipeline/pipe-1", "").Body)); got != once {
			t.Fatalf("after the retry: %s", got)
		}
	})
	t.Run("the same key with another body is 422", func(t *testing.T) {
		e.do("POST", "/pipeline", `{"tag":"pipe-1","steps":4,"stepMs":5}`, "Idempotency-Key", key).want(t, 422, "IdempotencyKeyReused")
	})
	t.Run("zero steps is done at once", func(t *testing.T) {
		r := e.do("POST", "/pipeline", `{"tag":"empty","steps":0,"stepMs":0}`)
		r.want(t, 201, "")
		if got := strings.TrimSpace(string(e.do("GET", "/pipeline/empty", "").Body)); got != `{"tag":"empty","steps":[]}` {
			t.Fatalf("GET /pipeline/empty = %s", got)
		}
	})
	t.Run("a tag with a space and a slash", func(t *testing.T) {
		r := e.do("POST", "/pipeline", `{"tag":"a b/c","steps":1,"stepMs":0}`)
		r.want(t, 201, "")
		loc := r.Header.Get("Location")
		if loc != "/pipeline/a%20b%2Fc" {
			t.Fatalf("Location = %q", loc)
		}
		if got := strings.TrimSpace(string(e.do("GET", loc, "").Body)); got != `{"tag":"a b/c","steps":[{"step":1,"executions":1}]}` {
			t.Fatalf("GET %s = %s", loc, got)
		}
	})
	for _, bad := range []string{
		`{"tag":"","steps":1,"stepMs":1}`,
		`{"tag":"x","steps":-1,"stepMs":1}`,
		`{"tag":"x","steps":1001,"stepMs":1}`,
		`{"tag":"x","steps":1,"stepMs":-1}`,
		`{"tag":"x","steps":1,"stepMs":60001}`,
	} {
		t.Run("400 for "+bad, func(t *testing.T) {
			e.do("POST", "/pipeline", bad, "Idempotency-Key", newKey()).want(t, 400, "ValidationFailed")
		})
	}
}

func TestPostReminders(t *testing.T) {
	e := setup(t, fastScheduler)
	key := newKey()
	body := `{"to":"ada@example.com","delay":"1s"}`
	r := e.do("POST", "/reminders", body, "Idempotency-Key", key)
	if r.Status != 204 || len(r.Body) != 0 || r.replayed() {
		t.Fatalf("POST /reminders: %d %q replayed=%v, want 204 at once, no body", r.Status, r.Body, r.replayed())
	}
	again := e.do("POST", "/reminders", body, "Idempotency-Key", key)
	if again.Status != 204 || !again.replayed() {
		t.Fatalf("retry: %d replayed=%v, want a replayed 204", again.Status, again.replayed())
	}
	// The parked 204, first and replayed, names the run that goes on.
	runID := r.Header.Get("Oke-Run-Id")
	if !strings.HasPrefix(runID, "run_") || again.Header.Get("Oke-Run-Id") != runID {
		t.Fatalf("Oke-Run-Id: first %q, retry %q; want the same run_… on both", runID, again.Header.Get("Oke-Run-Id"))
	}
	// The same delay written another way is the same request.
	e.do("POST", "/reminders", `{"to":"ada@example.com","delay":"1000ms"}`, "Idempotency-Key", key).want(t, 204, "")
	// A retry that asks to wait is held until the run ends and gets its
	// final answer: the flow's own 204, which names no run.
	held := e.do("POST", "/reminders", body, "Idempotency-Key", key, "Prefer", "wait=30")
	if held.Status != 204 || !held.replayed() || held.Header.Get("Preference-Applied") != "wait=30" || held.Header.Get("Oke-Run-Id") != "" {
		t.Fatalf("retry with Prefer: wait=30: %d %v; want the run's final 204, replayed, Preference-Applied: wait=30, no Oke-Run-Id", held.Status, held.Header)
	}
	if final := e.do("POST", "/reminders", body, "Idempotency-Key", key); final.Status != 204 || final.Header.Get("Oke-Run-Id") != "" {
		t.Fatalf("a plain retry after the run's end: %d %v; want the 204 naming no run", final.Status, final.Header)
	}

	sent := func(to string) (found, sent bool) {
		var list app.ReminderList
		e.do("GET", "/reminders", "").decode(t, &list)
		for _, r := range list.Reminders {
			if r.To == to {
				return true, r.Sent
			}
		}
		return false, false
	}
	waitFor(t, func() bool { _, s := sent("ada@example.com"); return s })

	t.Run("one reminder, one run, completed after two pick-ups", func(t *testing.T) {
		if n := e.count("reminders"); n != 1 {
			t.Fatalf("%d reminders, want 1", n)
		}
		runs := e.runsOf("demo.remind")
		if len(runs) != 1 {
			t.Fatalf("%d runs", len(runs))
		}
		waitFor(t, func() bool { return e.run(runs[0].ID).Status == "completed" })
		run := e.run(runs[0].ID)
		if run.Attempts != 2 || len(run.Steps) != 3 {
			t.Fatalf("run: %d attempts, %d steps; want 2 and 3 (schedule, the sleep, send)", run.Attempts, len(run.Steps))
		}
	})

	t.Run("a reminder due later is parked, not sent", func(t *testing.T) {
		e.do("POST", "/reminders", `{"to":"later@example.com","delay":"1h"}`).want(t, 204, "")
		if found, s := sent("later@example.com"); !found || s {
			t.Fatalf("found=%v sent=%v, want an unsent reminder", found, s)
		}
		var parked int
		for _, run := range e.runsOf("demo.remind") {
			if run.Status == "sleeping" && run.WakeAt != nil && run.WakeAt.After(time.Now().Add(50*time.Minute)) {
				parked++
			}
		}
		if parked != 1 {
			t.Fatalf("%d runs parked for an hour, want 1", parked)
		}
	})

	for _, bad := range []string{
		`{"to":"","delay":"1s"}`,
		`{"to":"x","delay":"soon"}`,
		`{"to":"x","delay":"-1s"}`,
		`{"to":"x","delay":"1h1h"}`,
		`{"to":"x","delay":"1m1h"}`,
		`{"to":"x","delay":"1234567h"}`,
		`{"to":"x","delay":""}`,
		`{"to":"x"}`,
	} {
		t.Run("400 for "+bad, func(t *testing.T) {
			e.do("POST", "/reminders", bad, "Idempotency-Key", newKey()).want(t, 400, "ValidationFailed")
		})
	}
}

func TestAdmin(t *testing.T) {
	e := setup(t, fastScheduler)
	key := newKey()
	e.do("POST", "/pipeline", `{"tag":"adm","steps":2,"stepMs":0}`, "Idempotency-Key", key).want(t, 201, "")
	runs := e.runsOf("demo.pipeline")
	if len(runs) != 1 || runs[0].Status != "completed" || runs[0].Attempts != 1 {
		t.Fatalf("GET /_oke/runs: %+v", runs)
	}
	id := runs[0].ID

	t.Run("GET /_oke/runs/{id} shows the steps", func(t *testing.T) {
		run := e.run(id)
		if len(run.Steps) != 2 || run.Steps[0].Name != "step 1" || run.Steps[1].Name != "step 2" {
			t.Fatalf("steps %+v", run.Steps)
		}
		for _, s := range run.Steps {
			if s.Attempts != 1 || fmt.Sprint(s.Result) != "1" || s.StartedAt.IsZero() || s.FinishedAt.Before(s.StartedAt) {
				t.Fatalf("step %+v", s)
			}
		}
		if run.Result == nil || run.Result.Status != 201 || run.Result.Location != "/pipeline/adm" {
			t.Fatalf("result %+v", run.Result)
		}
		e.do("GET", "/_oke/runs/run_nope", "").want(t, 404, "NotFound")
	})

	t.Run("GET /_oke/runs filters by status", func(t *testing.T) {
		r := e.do("GET", "/_oke/runs?status=failed", "")
		r.want(t, 200, "")
		if got := strings.TrimSpace(string(r.Body)); got != `{"runs":[]}` {
			t.Fatalf("failed runs: %s", got)
		}
		e.do("GET", "/_oke/runs?status=nope", "").want(t, 400, "InvalidInput")
	})

	t.Run("POST /_oke/runs/{id}/replay runs every step again", func(t *testing.T) {
		r := e.do("POST", "/_oke/runs/"+id+"/replay", "")
		r.want(t, 202, "")
		var out struct{ ID, ReplayOf string }
		r.decode(t, &out)
		if out.ReplayOf != id || out.ID == "" || out.ID == id {
			t.Fatalf("replay answer %s", r.Body)
		}
		waitFor(t, func() bool { return e.run(out.ID).Status == "completed" })
		if got := strings.TrimSpace(string(e.do("GET", "/pipeline/adm", "").Body)); got != `{"tag":"adm","steps":[{"step":1,"executions":2},{"step":2,"executions":2}]}` {
			t.Fatalf("after the replay: %s", got)
		}
		if run := e.run(out.ID); run.ReplayOf != id {
			t.Fatalf("replayOf = %q", run.ReplayOf)
		}
		e.do("POST", "/_oke/runs/run_nope/replay", "").want(t, 404, "NotFound")
	})

	t.Run("GET /_oke/idempotency lists the row and its run", func(t *testing.T) {
		var out struct {
			Rows []admin.RowView `json:"rows"`
		}
		e.do("GET", "/_oke/idempotency", "").decode(t, &out)
		var found bool
		for _, row := range out.Rows {
			if row.Key == key {
				found = row.State == "completed" && row.RunID == id && row.Flow == "demo.pipeline" && row.Response != nil && row.Response.Status == 201
			}
		}
		if !found {
			t.Fatalf("no completed row for the key with run %s: %+v", id, out.Rows)
		}
	})

	t.Run("GET /_oke/flows marks the durable flows", func(t *testing.T) {
		var out struct {
			Flows []oke.FlowInfo `json:"flows"`
		}
		e.do("GET", "/_oke/flows", "").decode(t, &out)
		durable := map[string]bool{}
		for _, f := range out.Flows {
			durable[f.Name] = f.Durable
		}
		for _, name := range []string{"payments.refund", "demo.pipeline", "demo.remind"} {
			if !durable[name] {
				t.Errorf("flow %s is not listed as durable", name)
			}
		}
		if durable["payments.charge"] {
			t.Error("payments.charge is listed as durable")
		}
	})
}
