package app_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
)

// POST /slow: demo.slow, auto.
func TestPostSlow(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"waits, writes a row, answers 201", `{"ms":1}`, 201, ""},
		{"ms 0 is fine", `{"ms":0}`, 201, ""},
		{"a negative ms is 400 ValidationFailed", `{"ms":-1}`, 400, "ValidationFailed"},
		{"ms over ten minutes is 400 ValidationFailed", `{"ms":600001}`, 400, "ValidationFailed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			r := e.do("POST", "/slow", tc.body, "Idempotency-Key", newKey())
			r.want(t, tc.status, tc.code)
			want := 0
			if tc.status == 201 {
				want = 1
				var s app.Slow
				r.decode(t, &s)
				if s.ID == 0 {
					t.Fatalf("body %s has no id", r.Body)
				}
			}
			if n := e.count("slow_rows"); n != want {
				t.Fatalf("%d slow rows, want %d", n, want)
			}
		})
	}

	t.Run("a retry while it runs is 409 IdempotencyInProgress with Retry-After; after, it replays", func(t *testing.T) {
		lease := 5 * time.Second
		e := setup(t, func(c *app.Config) { c.Lease = lease })
		key := newKey()
		first := make(chan reply, 1)
		go func() { first <- do(t, e.url, "POST", "/slow", `{"ms":1500}`, "Idempotency-Key", key) }()
		// Wait until the first call runs (it has claimed the key).
		for deadline := time.Now().Add(10 * time.Second); e.executions("demo.slow") < 1; {
			if time.Now().After(deadline) {
				t.Fatal("the first call did not start in 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		r := e.do("POST", "/slow", `{"ms":1500}`, "Idempotency-Key", key)
		r.want(t, 409, "IdempotencyInProgress")
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > int(lease/time.Second) {
			t.Fatalf("Retry-After = %q, want 1..%d seconds (the -lease)", r.Header.Get("Retry-After"), int(lease/time.Second))
		}
		got := <-first
		got.want(t, 201, "")
		again := e.do("POST", "/slow", `{"ms":1500}`, "Idempotency-Key", key)
		again.want(t, 201, "")
		if !again.replayed() || string(again.Body) != string(got.Body) {
			t.Fatalf("after the run: replayed=%v body %s, want a replay of %s", again.replayed(), again.Body, got.Body)
		}
		if n := e.count("slow_rows"); n != 1 {
			t.Fatalf("%d slow rows, want 1", n)
		}
		m := e.metrics()
		if n := outcome(m, "demo.slow", "in_progress"); n < 1 {
			t.Fatalf("in_progress outcomes = %v, want at least 1", n)
		}
	})

	t.Run("N simultaneous requests with one key run it once", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		var wg sync.WaitGroup
		statuses := make(chan int, 8)
		for range 8 {
			wg.Go(func() {
				statuses <- do(t, e.url, "POST", "/slow", `{"ms":200}`, "Idempotency-Key", key).Status
			})
		}
		wg.Wait()
		close(statuses)
		for s := range statuses {
			if s != 201 && s != 409 {
				t.Fatalf("status %d, want 201 or 409", s)
			}
		}
		if n := e.executions("demo.slow"); n != 1 {
			t.Fatalf("demo.slow ran %v times, want 1", n)
		}
	})
}

// POST /notes: demo.note, auto with TTL 2s.
func TestPostNotes(t *testing.T) {
	t.Run("writes a note: 201; a retry within the TTL replays", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		r := e.do("POST", "/notes", `{"text":"hello"}`, "Idempotency-Key", key)
		r.want(t, 201, "")
		var n app.Note
		r.decode(t, &n)
		if n.ID == 0 || n.Text != "hello" {
			t.Fatalf("note = %s, want an id and text hello", r.Body)
		}
		again := e.do("POST", "/notes", `{"text":"hello"}`, "Idempotency-Key", key)
		if !again.replayed() || string(again.Body) != string(r.Body) {
			t.Fatalf("retry: replayed=%v body %s, want a replay of %s", again.replayed(), again.Body, r.Body)
		}
	})
	t.Run("after the 2s TTL the same key runs again", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		var first, second app.Note
		e.do("POST", "/notes", `{"text":"hello"}`, "Idempotency-Key", key).decode(t, &first)
		time.Sleep(2100 * time.Millisecond)
		r := e.do("POST", "/notes", `{"text":"hello"}`, "Idempotency-Key", key)
		r.want(t, 201, "")
		r.decode(t, &second)
		if r.replayed() || second.ID == first.ID {
			t.Fatalf("after the TTL: replayed=%v id %d (first %d), want a new note", r.replayed(), second.ID, first.ID)
		}
		if n := e.count("notes"); n != 2 {
			t.Fatalf("%d notes, want 2", n)
		}
	})
	t.Run("without a key every call writes", func(t *testing.T) {
		e := setup(t)
		e.do("POST", "/notes", `{"text":"a"}`).want(t, 201, "")
		e.do("POST", "/notes", `{"text":"a"}`).want(t, 201, "")
		if n := e.count("notes"); n != 2 {
			t.Fatalf("%d notes, want 2", n)
		}
	})
	t.Run("an empty text is 400 ValidationFailed", func(t *testing.T) {
		setup(t).do("POST", "/notes", `{"text":""}`, "Idempotency-Key", newKey()).want(t, 400, "ValidationFailed")
	})
}

// POST /fail: demo.fail, its three failures.
func TestPostFail(t *testing.T) {
	cases := []struct {
		name       string
		when       string
		status     int
		code       string
		replayed   bool // the retry with the same key is a replay
		executions float64
		writes     int
	}{
		{"before any write: 500, nothing stored, the same key runs again", "before", 500, "InternalError", false, 2, 0},
		{"after a write: 500 InternalError stored and replayed", "after", 500, "InternalError", true, 1, 1},
		{"declared: 402 PaymentDeclined stored and replayed", "declared", 402, "PaymentDeclined", true, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			key := newKey()
			body := `{"when":"` + tc.when + `"}`
			first := e.do("POST", "/fail", body, "Idempotency-Key", key)
			first.want(t, tc.status, tc.code)
			if first.replayed() {
				t.Fatal("the first call is marked replayed")
			}
			again := e.do("POST", "/fail", body, "Idempotency-Key", key)
			again.want(t, tc.status, tc.code)
			if again.replayed() != tc.replayed {
				t.Fatalf("retry replayed = %v, want %v", again.replayed(), tc.replayed)
			}
			if n := e.executions("demo.fail"); n != tc.executions {
				t.Fatalf("demo.fail ran %v times, want %v", n, tc.executions)
			}
			if n := e.count("fail_writes"); n != tc.writes {
				t.Fatalf("%d rows written, want %d", n, tc.writes)
			}
		})
	}
	t.Run("another when is 400 ValidationFailed", func(t *testing.T) {
		setup(t).do("POST", "/fail", `{"when":"never"}`, "Idempotency-Key", newKey()).want(t, 400, "ValidationFailed")
	})
}

// POST /export: demo.export, a stream: chunked, never stored.
func TestPostExport(t *testing.T) {
	t.Run("a chunked NDJSON body of several lines", func(t *testing.T) {
		e := setup(t)
		resp, err := http.Post(e.url+"/export", "application/json", strings.NewReader(`{"lines":3,"delayMs":1}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d, want 200", resp.StatusCode)
		}
		if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("Transfer-Encoding = %q, want chunked", resp.TransferEncoding)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Fatalf("Content-Type = %q, want application/x-ndjson", ct)
		}
		lines := readLines(t, resp)
		if len(lines) != 3 {
			t.Fatalf("%d lines, want 3: %q", len(lines), lines)
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, `{"line":`+strconv.Itoa(i+1)+`,"of":3,`) {
				t.Fatalf("line %d = %q", i+1, l)
			}
		}
	})
	t.Run("an empty body exports the default five lines", func(t *testing.T) {
		e := setup(t)
		resp, err := http.Post(e.url+"/export", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if n := len(readLines(t, resp)); n != 5 {
			t.Fatalf("%d lines, want 5", n)
		}
	})
	t.Run("lines reach the client as they are written", func(t *testing.T) {
		e := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/export", strings.NewReader(`{"lines":2,"delayMs":10000}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, `{"line":1,"of":2,`) {
			t.Fatalf("first line %q, %v: want it before the second is written", line, err)
		}
	})
	t.Run("the same Idempotency-Key twice runs twice: never stored or replayed", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		for i := range 2 {
			r := e.do("POST", "/export", `{"lines":2,"delayMs":1}`, "Idempotency-Key", key)
			r.want(t, 200, "")
			if r.replayed() {
				t.Fatalf("call %d was replayed", i+1)
			}
			if n := strings.Count(string(r.Body), "\n"); n != 2 {
				t.Fatalf("call %d: %d lines, want 2", i+1, n)
			}
		}
		m := e.metrics()
		if n := m[`oke_flow_executions_total{flow="demo.export"}`]; n != 2 {
			t.Fatalf("demo.export ran %v times, want 2", n)
		}
		if n := outcome(m, "demo.export", "ignored"); n != 2 {
			t.Fatalf("ignored outcomes = %v, want 2", n)
		}
	})
	t.Run("lines over 1000 is 400 ValidationFailed", func(t *testing.T) {
		setup(t).do("POST", "/export", `{"lines":1001}`).want(t, 400, "ValidationFailed")
	})
}

func readLines(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read body: %v", err)
	}
	return lines
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// openFeed opens GET /events and returns its events as they arrive.
func openFeed(t *testing.T, e *env, hdr ...string) (*http.Response, <-chan sseEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/events", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan sseEvent, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				ch <- ev
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return resp, ch
}

// next returns the next event, failing after a generous wait.
func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the feed ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
	}
	return sseEvent{}
}

// GET /events: demo.events, a live SSE feed.
func TestGetEvents(t *testing.T) {
	t.Run("the feed opens with a ready event", func(t *testing.T) {
		e := setup(t)
		resp, ch := openFeed(t, e)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d, want 200", resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type = %q, want text/event-stream", ct)
		}
		if ev := next(t, ch); ev.name != app.ReadyEvent {
			t.Fatalf("first event %+v, want %q", ev, app.ReadyEvent)
		}
	})

	emitters := []struct {
		name  string
		event string
		call  func(e *env) string // returns text the event's data holds
	}{
		{"POST /notes emits note.created", "note.created", func(e *env) string {
			e.do("POST", "/notes", `{"text":"feed me"}`).want(e.t, 201, "")
			return `"text":"feed me"`
		}},
		{"POST /webhooks/provider emits webhook.received", "webhook.received", func(e *env) string {
			e.do("POST", "/webhooks/provider", `{"id":"evt_feed","type":"charge.succeeded"}`).want(e.t, 200, "")
			return `"id":"evt_feed"`
		}},
	}
	for _, tc := range emitters {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			_, ch := openFeed(t, e)
			next(t, ch) // ready: subscribed
			want := tc.call(e)
			ev := next(t, ch)
			if ev.name != tc.event || !strings.Contains(ev.data, want) {
				t.Fatalf("event %+v, want %s with %s", ev, tc.event, want)
			}
		})
	}

	t.Run("every open feed gets every event", func(t *testing.T) {
		e := setup(t)
		_, a := openFeed(t, e)
		_, b := openFeed(t, e, "Authorization", "Bearer user:2")
		next(t, a)
		next(t, b)
		e.do("POST", "/notes", `{"text":"for every feed"}`).want(t, 201, "")
		for _, ch := range []<-chan sseEvent{a, b} {
			if ev := next(t, ch); ev.name != "note.created" || !strings.Contains(ev.data, "for every feed") {
				t.Fatalf("event %+v, want the note", ev)
			}
		}
	})
	t.Run("a feed gets only its tenant's events", func(t *testing.T) {
		e := setup(t)
		_, spy := openFeed(t, e, "X-Tenant", "spy")
		next(t, spy)
		e.do("POST", "/notes", `{"text":"the default tenant's"}`).want(t, 201, "")
		e.do("POST", "/notes", `{"text":"the spy's own"}`, "X-Tenant", "spy").want(t, 201, "")
		// Events reach a feed in the order they were emitted: the first the
		// spy's feed sees must be its own.
		if ev := next(t, spy); ev.name != "note.created" || !strings.Contains(ev.data, "the spy's own") {
			t.Fatalf("the spy's feed got %+v, want only its own note", ev)
		}
	})
	t.Run("Bearer bad is 401", func(t *testing.T) {
		setup(t).do("GET", "/events", "", "Authorization", "Bearer bad").want(t, 401, "Unauthorized")
	})
	t.Run("shutting the server down ends the feed", func(t *testing.T) {
		e := setup(t)
		_, ch := openFeed(t, e)
		next(t, ch)
		e.srv.Shutdown()
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatal("an event after shutdown")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the feed still open 10s after shutdown")
		}
	})
}

// POST /webhooks/provider: demo.webhook, deduped on the payload's id.
func TestPostWebhook(t *testing.T) {
	t.Run("a second delivery of the same event id does nothing", func(t *testing.T) {
		e := setup(t)
		first := e.do("POST", "/webhooks/provider", `{"id":"evt_1","type":"charge.succeeded"}`)
		first.want(t, 200, "")
		var ack app.WebhookAck
		first.decode(t, &ack)
		if ack != (app.WebhookAck{Received: true, ID: "evt_1", Type: "charge.succeeded"}) {
			t.Fatalf("ack = %+v", ack)
		}
		// The provider retries, even with another body or its own key: the
		// id alone decides.
		for _, again := range []reply{
			e.do("POST", "/webhooks/provider", `{"id":"evt_1","type":"charge.succeeded"}`),
			e.do("POST", "/webhooks/provider", `{"type":"charge.failed","id":"evt_1"}`, "Idempotency-Key", newKey()),
		} {
			again.want(t, 200, "")
			if !again.replayed() || string(again.Body) != string(first.Body) {
				t.Fatalf("redelivery: replayed=%v body %s, want a replay of %s", again.replayed(), again.Body, first.Body)
			}
		}
		if n := e.count("webhook_events"); n != 1 {
			t.Fatalf("%d events stored, want 1", n)
		}
		if n := e.executions("demo.webhook"); n != 1 {
			t.Fatalf("demo.webhook ran %v times, want 1", n)
		}
	})
	t.Run("another event id runs", func(t *testing.T) {
		e := setup(t)
		e.do("POST", "/webhooks/provider", `{"id":"evt_1","type":"a"}`).want(t, 200, "")
		r := e.do("POST", "/webhooks/provider", `{"id":"evt_2","type":"a"}`)
		r.want(t, 200, "")
		if r.replayed() {
			t.Fatal("evt_2 was a replay of evt_1")
		}
		if n := e.count("webhook_events"); n != 2 {
			t.Fatalf("%d events stored, want 2", n)
		}
	})
	t.Run("the UNIQUE event id backs the dedupe up", func(t *testing.T) {
		e := setup(t)
		if _, err := e.srv.DB().Exec(`INSERT INTO webhook_events (event_id, type, payload) VALUES ('evt_old', 't', '{}')`); err != nil {
			t.Fatal(err)
		}
		r := e.do("POST", "/webhooks/provider", `{"id":"evt_old","type":"t"}`)
		r.want(t, 200, "")
		var ack app.WebhookAck
		r.decode(t, &ack)
		if !ack.Duplicate {
			t.Fatalf("ack = %+v, want duplicate", ack)
		}
		if n := e.count("webhook_events"); n != 1 {
			t.Fatalf("%d events stored, want 1", n)
		}
	})
	t.Run("fields the demo does not know are accepted and kept", func(t *testing.T) {
		e := setup(t)
		e.do("POST", "/webhooks/provider", `{"id":"evt_3","type":"t","livemode":false,"data":{"object":{"id":"ch_1"}}}`).want(t, 200, "")
		var payload string
		if err := e.srv.DB().QueryRow(`SELECT payload FROM webhook_events WHERE event_id = 'evt_3'`).Scan(&payload); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(payload, `"livemode":false`) {
			t.Fatalf("stored payload %s lost fields", payload)
		}
	})
	refused := []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   string
	}{
		{"a payload without id is 400", `{"type":"t"}`, nil, 400, "ValidationFailed"},
		{"a numeric id is 400", `{"id":7,"type":"t"}`, nil, 400, "InvalidInput"},
		{"a payload without type is 400", `{"id":"evt_4"}`, nil, 400, "ValidationFailed"},
		{"malformed JSON is 400", `{"id":`, nil, 400, "MalformedJSON"},
		{"Bearer bad is 401", `{"id":"evt_5","type":"t"}`, []string{"Authorization", "Bearer bad"}, 401, "Unauthorized"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.do("POST", "/webhooks/provider", tc.body, tc.hdr...).want(t, tc.status, tc.code)
			if n := e.count("webhook_events"); n != 0 {
				t.Fatalf("%d events stored, want 0", n)
			}
		})
	}
}

// The identity rules, seen through GET /whoami.
func TestIdentity(t *testing.T) {
	e := setup(t)
	cases := []struct {
		name      string
		hdr       []string
		status    int
		code      string
		tenant    string
		principal string
	}{
		{"no credentials is anon in tenant default", nil, 200, "", "default", "anon"},
		{"Bearer user:<id> is user:<id>", []string{"Authorization", "Bearer user:42"}, 200, "", "default", "user:42"},
		{"the Bearer scheme is case-insensitive", []string{"Authorization", "bearer user:42"}, 200, "", "default", "user:42"},
		{"X-API-Key: <id> is apikey:<id>", []string{"X-API-Key", "k_live_1"}, 200, "", "default", "apikey:k_live_1"},
		{"Authorization wins over X-API-Key", []string{"Authorization", "Bearer user:42", "X-API-Key", "k"}, 200, "", "default", "user:42"},
		{"X-Tenant sets the tenant", []string{"X-Tenant", "acme", "X-API-Key", "k"}, 200, "", "acme", "apikey:k"},
		{"Bearer bad is 401", []string{"Authorization", "Bearer bad"}, 401, "Unauthorized", "", ""},
		{"Bearer user: without an id is 401", []string{"Authorization", "Bearer user:"}, 401, "Unauthorized", "", ""},
		{"Basic credentials are 401", []string{"Authorization", "Basic dXNlcjpwYXNz"}, 401, "Unauthorized", "", ""},
		{"a bad Authorization is 401 even with an X-API-Key", []string{"Authorization", "Bearer bad", "X-API-Key", "k"}, 401, "Unauthorized", "", ""},
		{"an X-API-Key with a space is 401", []string{"X-API-Key", "a b"}, 401, "Unauthorized", "", ""},
		{"an X-Tenant with a space is 400", []string{"X-Tenant", "a b"}, 400, "InvalidTenant", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", "/whoami", "", tc.hdr...)
			r.want(t, tc.status, tc.code)
			if tc.status != 200 {
				return
			}
			var who app.Whoami
			r.decode(t, &who)
			if who.Tenant != tc.tenant || who.Principal != tc.principal {
				t.Fatalf("identity = %+v, want tenant %q principal %q", who, tc.tenant, tc.principal)
			}
		})
	}
}

// GET /metrics: oke's series with the right counts.
func TestGetMetrics(t *testing.T) {
	e := setup(t)
	key := newKey()
	e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key).want(t, 201, "")
	e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key).want(t, 201, "")

	r := e.do("GET", "/metrics", "")
	r.want(t, 200, "")
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type = %q, want Prometheus text", ct)
	}
	m := e.metrics()
	want := map[string]float64{
		`oke_flow_executions_total{flow="payments.charge"}`:                         1,
		`oke_idempotency_outcomes_total{flow="payments.charge",outcome="live"}`:     1,
		`oke_idempotency_outcomes_total{flow="payments.charge",outcome="replayed"}`: 1,
	}
	for series, v := range want {
		if got, ok := m[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}

	// The refusals count too.
	e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`).want(t, 400, "IdempotencyKeyMissing")
	e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", "short").want(t, 400, "IdempotencyKeyInvalid")
	e.do("POST", "/charges", `{"amount":5,"currency":"usd"}`, "Idempotency-Key", key).want(t, 422, "IdempotencyKeyReused")
	m = e.metrics()
	for _, o := range []string{"missing", "invalid", "reused"} {
		if got := outcome(m, "payments.charge", o); got != 1 {
			t.Errorf("outcome %s = %v, want 1", o, got)
		}
	}
	if got := m[`oke_flow_executions_total{flow="payments.charge"}`]; got != 1 {
		t.Errorf("payments.charge executions = %v after refusals, want 1", got)
	}
}

// GET /healthz, and requests that match no route.
func TestOtherRoutes(t *testing.T) {
	e := setup(t)
	cases := []struct {
		name, method, path string
		status             int
		code, body         string
	}{
		{"GET /healthz is 200 ok", "GET", "/healthz", 200, "", `{"status":"ok"}`},
		{"an unknown path is 404 NotFound", "GET", "/nope", 404, "NotFound", ""},
		{"a known path with another method is 405", "DELETE", "/charges", 405, "MethodNotAllowed", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, "")
			r.want(t, tc.status, tc.code)
			if tc.body != "" && strings.TrimSpace(string(r.Body)) != tc.body {
				t.Fatalf("body = %s, want %s", r.Body, tc.body)
			}
		})
	}
}
