package app_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/browsertest"
)

// TestConsoleSchedulesInABrowser: the console's schedules page lists the
// demo's sweep — its spec, its next tick — and, once a tick ran, its last
// run, which links to the run's page.
func TestConsoleSchedulesInABrowser(t *testing.T) {
	e := setup(t, fastScheduler, func(c *app.Config) { c.SweepCron = "@every 1s" })
	ctx := browsertest.New(t)
	shots := browsertest.ArtifactDir(t)
	base := e.url + "/_oke/"
	browsertest.Do(t, ctx, "log in", chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`[data-input="admin-token"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-input="admin-token"]`), testAdminToken),
		chromedp.Click(chromedp.CSS(`[data-action="login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-nav="schedules"]`)))
	// The page reads the API again every few seconds and draws its rows
	// afresh: a completed run of a tick shows up on it. So what the test
	// looks for and clicks is found in the page, in one evaluation each, not
	// as a node a later drawing may have replaced by the next CDP call.
	sweep := `[data-schedule="demo.sweep"][data-spec="@every 1s"]`
	present := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`document.querySelector('` + sel + `') !== null`)
	}
	browsertest.Do(t, ctx, "open the schedules page",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-nav="schedules"]').click()`),
		present(sweep), present(sweep+`[data-last-status="completed"]`))
	if next := browsertest.Get(t, ctx, "read the next tick", chromedp.Evaluate[string](`document.querySelector('`+sweep+`').getAttribute("data-next")`)); next == "" {
		t.Errorf("the sweep shows no next tick")
	}
	run := browsertest.Get(t, ctx, "read the last run", chromedp.Evaluate[string](`document.querySelector('`+sweep+`').getAttribute("data-last-run")`))
	if !strings.HasPrefix(run, "run_") {
		t.Fatalf("data-last-run = %q", run)
	}
	browsertest.Screenshot(t, ctx, shots, "schedules")
	browsertest.Do(t, ctx, "open the last run",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+sweep+` a[href^="#/runs/"]').click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-step="2"]`)))
}
