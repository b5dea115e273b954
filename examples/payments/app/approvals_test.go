package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
)

// TestRefundRequests: POST /refund-requests starts a run that waits for the
// signal "approval" (202, its id); POST
// /refund-requests/{id}/approve sends it — refused for anon (403) and for
// another tenant (404), sent for a user of the tenant — and the run, woken
// at once, starts the refund. A second approval finds the run finished.
func TestRefundRequests(t *testing.T) {
	e := setup(t, fastScheduler)
	c := e.charge(700)

	key := newKey()
	r := e.do("POST", "/refund-requests", fmt.Sprintf(`{"chargeId":%q,"reason":"damaged"}`, c.ID), "Idempotency-Key", key)
	r.want(t, 202, "")
	var req app.RefundRequest
	r.decode(t, &req)
	if !strings.HasPrefix(req.ID, "run_") || req.Status != "pending" || req.ChargeID != c.ID {
		t.Fatalf("POST /refund-requests: %+v", req)
	}
	again := e.do("POST", "/refund-requests", fmt.Sprintf(`{"chargeId":%q,"reason":"damaged"}`, c.ID), "Idempotency-Key", key)
	if !again.replayed() || string(again.Body) != string(r.Body) {
		t.Fatalf("a retried key: replayed=%v %s, want the first answer", again.replayed(), again.Body)
	}
	waitUntil(t, "the request to wait for its approval", func() bool {
		v := e.run(req.ID)
		return v.Status == "sleeping" && v.Waiting != nil && v.Waiting.Signal == "approval"
	})

	approve := "/refund-requests/" + req.ID + "/approve"
	e.do("POST", approve, `{"approved":true}`).want(t, 403, "Forbidden")
	e.do("POST", approve, `{"approved":true}`, "Authorization", "Bearer user:mallory", "X-Tenant", "other").want(t, 404, "NotFound")
	e.do("POST", approve, `{"approved":true,"note":"ok"}`, "Authorization", "Bearer user:ann", "Idempotency-Key", newKey()).want(t, 202, "")

	var v = e.run(req.ID)
	waitUntil(t, "the request to finish", func() bool { v = e.run(req.ID); return v.Status == "completed" })
	var d app.RefundDecision
	if err := jsonOf(v.Result.Body, &d); err != nil || d.Status != "approved" || d.By != "user:ann" || d.Note != "ok" || !strings.HasPrefix(d.RefundRun, "run_") {
		t.Fatalf("the decision: %+v (%v)", d, err)
	}
	if len(v.Signals) != 1 || v.Signals[0].Step == 0 {
		t.Fatalf("the run's signals: %+v, want the approval, received", v.Signals)
	}
	waitUntil(t, "the refund to complete", func() bool { return e.run(d.RefundRun).Status == "completed" })
	if n := e.count("refunds"); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
	e.do("POST", approve, `{"approved":true}`, "Authorization", "Bearer user:ann").want(t, 409, "RequestDecided")
}

// waitUntil polls cond until it holds, failing after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// jsonOf decodes v, a JSON value the admin API decoded into any, into out.
func jsonOf(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
