package app_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/examples/payments/app"
)

// TestRefundRequestAcrossSIGKILL: a refund request waits for its approval
// signal in a demo process that is then killed (SIGKILL, on the file
// driver); a new process on the same data folder takes the approval, wakes
// the waiting run and starts the refund, once.
func TestRefundRequestAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo binary")
	}
	bin := buildDemo(t)
	data := t.TempDir()
	args := []string{"-addr", "127.0.0.1:0", "-data", data, "-poll", "20ms", "-admin-token", testAdminToken}
	auth := []string{"Authorization", "Bearer " + testAdminToken}
	run := func(base, id string) admin.RunView {
		t.Helper()
		var v admin.RunView
		do(t, base, "GET", app.AdminPrefix+"/runs/"+id, "", auth...).decode(t, &v)
		return v
	}

	p := startProc(t, bin, args...)
	p.url = waitListening(t, p.stderr, p.done)
	var c app.Charge
	r := do(t, p.url, "POST", "/charges", `{"amount":900,"currency":"usd"}`, "Idempotency-Key", newKey())
	r.want(t, 201, "")
	r.decode(t, &c)
	r = do(t, p.url, "POST", "/refund-requests", fmt.Sprintf(`{"chargeId":%q,"reason":"late"}`, c.ID), "Idempotency-Key", newKey())
	r.want(t, 202, "")
	var req app.RefundRequest
	r.decode(t, &req)
	waitUntil(t, "the request to wait for its approval", func() bool {
		v := run(p.url, req.ID)
		return v.Status == "sleeping" && v.Waiting != nil && v.Waiting.Signal == "approval"
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)

	q := startProc(t, bin, args...)
	q.url = waitListening(t, q.stderr, q.done)
	do(t, q.url, "POST", "/refund-requests/"+req.ID+"/approve", `{"approved":true}`, "Authorization", "Bearer user:ann", "Idempotency-Key", newKey()).want(t, 202, "")
	var v admin.RunView
	waitUntil(t, "the request to finish in the new process", func() bool { v = run(q.url, req.ID); return v.Status == "completed" })
	var d app.RefundDecision
	if err := jsonOf(v.Result.Body, &d); err != nil || d.Status != "approved" || !strings.HasPrefix(d.RefundRun, "run_") {
		t.Fatalf("the decision: %+v (%v)", d, err)
	}
	waitUntil(t, "the refund to complete", func() bool { return run(q.url, d.RefundRun).Status == "completed" })
	if len(v.Signals) != 1 {
		t.Fatalf("signals %+v, want the one approval", v.Signals)
	}
}
