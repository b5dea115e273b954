package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/client"
	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/examples/payments/paymentsclient"
)

// The demo through its generated typed client (examples/payments/
// paymentsclient, written by oke gen client; it stands alone, with copies
// of the app's types), served in-process on the file driver.

// newAPI returns the generated client for e, calling as user:alice.
func newAPI(t *testing.T, e *env, opts ...client.Option) *paymentsclient.Client {
	t.Helper()
	api, err := paymentsclient.New(e.url, append([]client.Option{client.WithHeader("Authorization", "Bearer user:alice")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return api
}

var usd1000 = paymentsclient.ChargeIn{Amount: 1000, Currency: "usd"}

// Charge twice with one client.Key: the second answer is the first,
// replayed, and the charge is made once.
func TestClientChargeTwiceWithOneKeyReplays(t *testing.T) {
	e := setup(t)
	api := newAPI(t, e)
	ctx := context.Background()
	key := client.NewKey()

	first, m1, err := api.Payments.Charge(ctx, usd1000, client.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	second, m2, err := api.Payments.Charge(ctx, usd1000, client.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	if m1.IdempotentReplayed || !m2.IdempotentReplayed {
		t.Errorf("IdempotentReplayed: first %v, second %v; want false, true", m1.IdempotentReplayed, m2.IdempotentReplayed)
	}
	if first != second || first.ID == "" || m2.Status != http.StatusCreated || m2.Location != "/charges/"+first.ID {
		t.Errorf("first %+v, second %+v (meta %+v): want the same charge, 201, its Location", first, second, m2)
	}
	if m1.IdempotencyKey != key || m2.IdempotencyKey != key {
		t.Errorf("keys %q, %q; want %q", m1.IdempotencyKey, m2.IdempotencyKey, key)
	}
	if n := e.count("charges"); n != 1 {
		t.Errorf("%d charges, want 1", n)
	}
	if n := e.executions("payments.charge"); n != 1 {
		t.Errorf("payments.charge ran %v times, want 1", n)
	}
	// Without client.Key each call is its own: a fresh key, a new charge.
	third, m3, err := api.Payments.Charge(ctx, usd1000)
	if err != nil {
		t.Fatal(err)
	}
	if third.ID == first.ID || m3.IdempotentReplayed || m3.IdempotencyKey == "" || m3.IdempotencyKey == key {
		t.Errorf("a call without Key: %+v, meta %+v; want a new charge under a fresh key", third, m3)
	}
}

// The same key with a different body is 422 IdempotencyKeyReused:
// client.ErrKeyReused, naming the flow.
func TestClientKeyReusedWithAnotherBody(t *testing.T) {
	e := setup(t)
	api := newAPI(t, e)
	ctx := context.Background()
	key := client.NewKey()
	if _, _, err := api.Payments.Charge(ctx, usd1000, client.Key(key)); err != nil {
		t.Fatal(err)
	}
	_, meta, err := api.Payments.Charge(ctx, paymentsclient.ChargeIn{Amount: 2000, Currency: "usd"}, client.Key(key))
	var ce *client.Error
	if !errors.Is(err, client.ErrKeyReused) || !errors.As(err, &ce) || ce.Status != http.StatusUnprocessableEntity || ce.Flow != "payments.charge" {
		t.Fatalf("err = %v, want 422 client.ErrKeyReused of payments.charge", err)
	}
	if meta.Status != http.StatusUnprocessableEntity || meta.Attempts != 1 {
		t.Errorf("meta %+v", meta)
	}
	if n := e.count("charges"); n != 1 {
		t.Errorf("%d charges, want 1", n)
	}
}

// A second call under the key of a call still running is 409
// IdempotencyInProgress — client.ErrInProgress, with Retry-After — when
// retries are off; afterwards the key replays the first answer.
func TestClientInProgressWithoutRetries(t *testing.T) {
	e := setup(t)
	api := newAPI(t, e) // no client.WithRetry: one attempt per call
	ctx := context.Background()
	key := client.NewKey()
	type result struct {
		out  paymentsclient.Slow
		meta client.Meta
		err  error
	}
	first := make(chan result, 1)
	go func() {
		out, meta, err := api.Demo.Slow(ctx, paymentsclient.SlowIn{Ms: 1500}, client.Key(key))
		first <- result{out, meta, err}
	}()
	waitFor(t, func() bool { return e.executions("demo.slow") >= 1 }) // it has claimed the key

	_, meta, err := api.Demo.Slow(ctx, paymentsclient.SlowIn{Ms: 1500}, client.Key(key))
	var ce *client.Error
	if !errors.Is(err, client.ErrInProgress) || !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.RetryAfter <= 0 {
		t.Fatalf("err = %v, want 409 client.ErrInProgress with a Retry-After", err)
	}
	if meta.Attempts != 1 || meta.Waited {
		t.Errorf("meta %+v: want 1 attempt, no wait", meta)
	}
	got := <-first
	if got.err != nil || got.meta.Status != http.StatusCreated {
		t.Fatalf("first call: %+v, %v", got.meta, got.err)
	}
	again, meta, err := api.Demo.Slow(ctx, paymentsclient.SlowIn{Ms: 1500}, client.Key(key))
	if err != nil || !meta.IdempotentReplayed || again != got.out {
		t.Fatalf("after the run: %+v, meta %+v, err %v; want a replay of %+v", again, meta, err, got.out)
	}
	if n := e.count("slow_rows"); n != 1 {
		t.Errorf("%d slow rows, want 1", n)
	}
}

// With retries on, a second call under the key of a call still running (a
// 1.5 s POST /slow) is held by the server (Prefer: wait, which the client
// sends on its retry of the 409) and gets the first call's stored answer,
// replayed — not a 409, and without waiting out Retry-After. The slow
// write happens once.
func TestClientRetryWaitsForTheAnswer(t *testing.T) {
	e := setup(t)
	api, err := paymentsclient.New(e.url, client.WithRetry(client.Retry{MaxAttempts: 5, BaseDelay: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := client.NewKey()
	first := make(chan paymentsclient.Slow, 1)
	go func() {
		out, _, err := api.Demo.Slow(ctx, paymentsclient.SlowIn{Ms: 1500}, client.Key(key))
		if err != nil {
			t.Errorf("first call: %v", err)
		}
		first <- out
	}()
	waitFor(t, func() bool { return e.executions("demo.slow") >= 1 }) // it has claimed the key
	second, meta, err := api.Demo.Slow(ctx, paymentsclient.SlowIn{Ms: 1500}, client.Key(key))
	if err != nil || !meta.IdempotentReplayed || !meta.Waited || meta.Attempts != 2 {
		t.Fatalf("second call: meta %+v, err %v; want a replay after one held retry", meta, err)
	}
	if got := <-first; got != second {
		t.Fatalf("the held retry got %+v, the first call %+v", second, got)
	}
	if n := e.count("slow_rows"); n != 1 {
		t.Errorf("%d slow rows, want 1", n)
	}
}

// payments.charge requires a key: client.NoKey() fails before anything is
// sent, naming the flow. A GET sends no key, and refuses one.
func TestClientKeyRulesFromTheContract(t *testing.T) {
	e := setup(t)
	api := newAPI(t, e)
	ctx := context.Background()
	_, meta, err := api.Payments.Charge(ctx, usd1000, client.NoKey())
	if !errors.Is(err, client.ErrKeyMissing) || !strings.Contains(err.Error(), "payments.charge requires an Idempotency-Key") || meta.Attempts != 0 {
		t.Fatalf("NoKey on payments.charge: err %v, meta %+v; want ErrKeyMissing naming the flow, nothing sent", err, meta)
	}
	if m := e.metrics(); outcome(m, "payments.charge", "missing") != 0 || e.count("charges") != 0 {
		t.Errorf("the refused call reached the server")
	}
	if _, _, err := api.Payments.List(ctx, paymentsclient.ListIn{}, client.Key(client.NewKey())); err == nil || !strings.Contains(err.Error(), "flow payments.list does not honor the Idempotency-Key header") {
		t.Errorf("Key on payments.list: err %v, want a refusal naming the flow", err)
	}
}

// Path and query parameters come from the input's fields.
func TestClientPathAndQueryFromInput(t *testing.T) {
	e := setup(t)
	api := newAPI(t, e)
	ctx := context.Background()
	var made []paymentsclient.Charge
	for i := int64(1); i <= 3; i++ {
		ch, _, err := api.Payments.Charge(ctx, paymentsclient.ChargeIn{Amount: 100 * i, Currency: "usd"})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, ch)
	}
	got, meta, err := api.Payments.Get(ctx, paymentsclient.GetIn{ID: made[1].ID})
	if err != nil || got != made[1] || meta.IdempotencyKey != "" {
		t.Fatalf("Get(%s) = %+v, meta %+v, err %v; want %+v, no key", made[1].ID, got, meta, err, made[1])
	}
	list, _, err := api.Payments.List(ctx, paymentsclient.ListIn{Limit: 2})
	if err != nil || len(list.Charges) != 2 || list.Charges[0] != made[2] {
		t.Fatalf("List(limit 2) = %+v, %v; want the newest two", list, err)
	}
	if all, _, err := api.Payments.List(ctx, paymentsclient.ListIn{}); err != nil || len(all.Charges) != 3 {
		t.Fatalf("List() = %+v, %v; want 3", all, err)
	}
	_, _, err = api.Payments.Get(ctx, paymentsclient.GetIn{ID: "ch_nope"})
	if !errors.Is(err, &client.Error{Status: http.StatusNotFound}) {
		t.Fatalf("Get(ch_nope): err %v, want 404", err)
	}
	// The path parameter is escaped: the flow gets the id whole.
	if _, _, err := api.Payments.Get(ctx, paymentsclient.GetIn{ID: "a/b c"}); !errors.Is(err, &client.Error{Status: http.StatusNotFound}) || !strings.Contains(err.Error(), `No charge has id "a/b c"`) {
		t.Fatalf("Get(a/b c): err %v, want payments.get's 404 for that id", err)
	}
	who, _, err := api.Demo.Whoami(ctx, client.Header("X-Tenant", "acme"))
	if err != nil || who != (paymentsclient.Whoami{Tenant: "acme", Principal: "user:alice"}) {
		t.Fatalf("Whoami = %+v, %v", who, err)
	}
}

// A refund through the client, its read-back, a declared failure, a flow
// that answers 204, a stream and the live feed.
func TestClientOtherShapes(t *testing.T) {
	e := setup(t)
	api := newAPI(t, e)
	ctx := context.Background()
	ch, _, err := api.Payments.Charge(ctx, usd1000)
	if err != nil {
		t.Fatal(err)
	}
	ref, meta, err := api.Payments.Refund(ctx, paymentsclient.RefundIn{ChargeID: ch.ID})
	if err != nil || ref.ChargeID != ch.ID || meta.Status != http.StatusCreated {
		t.Fatalf("Refund = %+v, %+v, %v", ref, meta, err)
	}
	if got, _, err := api.Payments.GetRefund(ctx, paymentsclient.GetIn{ID: ref.ID}); err != nil || got != ref {
		t.Fatalf("GetRefund = %+v, %v; want %+v", got, err, ref)
	}

	_, err = api.Demo.Fail(ctx, paymentsclient.FailIn{When: "declared"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusPaymentRequired || ce.Code != "PaymentDeclined" {
		t.Fatalf("Fail(declared): %v, want 402 PaymentDeclined", err)
	}
	if meta, err := api.Demo.Remind(ctx, paymentsclient.RemindIn{To: "bob", Delay: "1h"}); !errors.Is(err, client.ErrPending) ||
		meta.Status != http.StatusNoContent || !meta.Pending || !strings.HasPrefix(meta.RunID, "run_") {
		t.Fatalf("Remind: meta %+v, err %v; want a parked 204: client.ErrPending naming the run", meta, err)
	}

	resp, meta, err := api.Demo.Export(ctx, paymentsclient.ExportIn{Lines: 3, DelayMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	var lines []app.ExportLine
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l app.ExportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	resp.Body.Close()
	if len(lines) != 3 || lines[2].Line != 3 || meta.IdempotencyKey != "" {
		t.Fatalf("Export: %+v, meta %+v; want 3 lines and no key", lines, meta)
	}

	feedCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed, _, err := api.Demo.Events(feedCtx)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Body.Close()
	if ct := feed.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Events Content-Type %q", ct)
	}
	first, err := bufio.NewReader(feed.Body).ReadString('\n')
	if err != nil || first != "event: "+app.ReadyEvent+"\n" {
		t.Fatalf("first line of the feed %q (%v), want the ready event", first, err)
	}
}

// A durable flow's parked answer is client.ErrPending, not a success; the
// same call with the same key and client.Wait gets the run's final answer,
// and a call with Wait in the first place waits for it.
func TestClientWaitsForADurableRun(t *testing.T) {
	e := setup(t, fastScheduler)
	api := newAPI(t, e)
	ctx := context.Background()
	in := paymentsclient.RemindIn{To: "carol@example.com", Delay: "2s"}
	meta, err := api.Demo.Remind(ctx, in)
	var pe *client.PendingError
	if !errors.As(err, &pe) || !meta.Pending || pe.RunID != meta.RunID || pe.IdempotencyKey != meta.IdempotencyKey {
		t.Fatalf("Remind without Wait: %+v, %v; want a *client.PendingError naming the run and the key", meta, err)
	}
	again, err := api.Demo.Remind(ctx, in, client.Key(meta.IdempotencyKey), client.Wait(time.Minute))
	if err != nil || again.Pending || again.Status != http.StatusNoContent || !again.IdempotentReplayed || !again.Waited {
		t.Fatalf("Remind again with the key and Wait: %+v, %v; want the run's final 204, waited for", again, err)
	}
	if got := e.run(meta.RunID); got.Status != "completed" {
		t.Fatalf("run %s is %s after the final answer, want completed", meta.RunID, got.Status)
	}
	// Wait from the start: the first answer parks, the next is held.
	waited, err := api.Demo.Remind(ctx, paymentsclient.RemindIn{To: "dan@example.com", Delay: "1s"}, client.Wait(time.Minute))
	if err != nil || waited.Pending || waited.Status != http.StatusNoContent {
		t.Fatalf("Remind with Wait: %+v, %v; want the run's final 204", waited, err)
	}
}
