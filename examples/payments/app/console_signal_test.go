package app_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/okengine/oke/internal/browsertest"
)

// TestConsoleSendsASignal drives the console in headless Chromium: a refund
// request's run page says what the run waits for (the signal "approval")
// and has a form to send it; the payload typed there, sent (through the
// admin API's POST /runs/{id}/signal, with the console's session and its
// Origin), wakes the run, which finishes refused, and the page lists the
// signal as received.
func TestConsoleSendsASignal(t *testing.T) {
	e := setup(t, fastScheduler)
	ctx := browsertest.New(t)
	shots := browsertest.ArtifactDir(t)
	c := e.charge(900)
	r := e.do("POST", "/refund-requests", fmt.Sprintf(`{"chargeId":%q}`, c.ID))
	r.want(t, 202, "")
	var req struct{ ID string }
	r.decode(t, &req)
	waitUntil(t, "the request to wait", func() bool { return e.run(req.ID).Waiting != nil })

	browsertest.Do(t, ctx, "open the console", chromedp.Navigate(e.url+"/_oke/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-input="admin-token"]`)))
	browsertest.Do(t, ctx, "log in",
		chromedp.SendKeys(chromedp.CSS(`[data-input="admin-token"]`), testAdminToken),
		chromedp.Click(chromedp.CSS(`[data-action="login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-nav="flows"]`)))
	browsertest.Do(t, ctx, "open the waiting run", chromedp.Navigate(e.url+"/_oke/#/runs/"+req.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-waiting="approval"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-form="signal"]`)))
	if name := browsertest.Get(t, ctx, "read the signal's name", chromedp.Evaluate[string](`document.querySelector('[data-input="signal-name"]').value`)); name != "approval" {
		t.Fatalf("the form's name is %q, want the signal the run waits for", name)
	}
	browsertest.Screenshot(t, ctx, shots, "waiting")
	browsertest.Do(t, ctx, "send the signal",
		chromedp.SendKeys(chromedp.CSS(`[data-input="signal-data"]`), `{"approved":false,"by":"console","note":"no receipt"}`),
		chromedp.SendKeys(chromedp.CSS(`[data-input="signal-key"]`), "console-1"),
		chromedp.Click(chromedp.CSS(`[data-action="signal"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-signalled]`)))
	waitUntil(t, "the run to finish", func() bool { return e.run(req.ID).Status == "completed" })
	browsertest.Do(t, ctx, "see the signal received", chromedp.WaitVisible(chromedp.CSS(`[data-signal="1"]`)))
	browsertest.Screenshot(t, ctx, shots, "signalled")
	v := e.run(req.ID)
	var d struct{ Status, By, Note string }
	if err := jsonOf(v.Result.Body, &d); err != nil || d.Status != "refused" || d.Note != "no receipt" {
		t.Fatalf("the run's result: %+v (%v)", d, err)
	}
	if len(v.Signals) != 1 || v.Signals[0].Key != "console-1" {
		t.Fatalf("signals: %+v", v.Signals)
	}
}
