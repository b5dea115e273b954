package app_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/browsertest"
)

// xss is stored in a flow's input and, through it, in a stored body: if the
// console ever turned data into markup, the script or the handler would set
// window.__xss (and document.title).
const xss = `<script>window.__xss=1;document.title="XSS"</script><img src=x onerror="window.__xss=2">`

// TestConsoleInABrowser drives the console in headless Chromium against the
// demo on the file driver (issue 14's "done when"): log in; the flows page
// shows the idempotency pill for payments.charge (required) and demo.note
// (auto, 2s) and none for payments.list; the runs page lists a pipeline
// run; its page shows its steps; Replay makes a new run that completes;
// replay from step 3 reuses steps 1 and 2 (the pipeline's execution counts
// prove it); an idempotency row is found by its key, its body revealed, and
// deleted; a <script> in a flow's input and in a stored body does not run.
// It writes a screenshot of each page (browsertest.ArtifactDir). It runs on
// the file driver, and again with -postgres.
func TestConsoleInABrowser(t *testing.T) {
	t.Run("file", func(t *testing.T) { consoleInABrowser(t, setup(t, fastScheduler)) })
	t.Run("postgres", func(t *testing.T) {
		consoleInABrowser(t, setup(t, fastScheduler, func(c *app.Config) {
			c.Postgres, _ = demoDSN(t, newDatabase(t, demoConns))
		}))
	})
}

func consoleInABrowser(t *testing.T, e *env) {
	ctx := browsertest.New(t)
	shots := browsertest.ArtifactDir(t)

	// The data: a pipeline run, one whose input holds a script, a charge.
	pipeKey, xssKey, chargeKey := newKey(), newKey(), newKey()
	e.do("POST", "/pipeline", `{"tag":"console","steps":3,"stepMs":1}`, "Idempotency-Key", pipeKey).want(t, 201, "")
	in, _ := json.Marshal(xss)
	e.do("POST", "/pipeline", `{"tag":`+string(in)+`,"steps":2,"stepMs":1}`, "Idempotency-Key", xssKey).want(t, 201, "")
	e.do("POST", "/charges", `{"amount":500,"currency":"usd"}`, "Idempotency-Key", chargeKey).want(t, 201, "")
	var pipeRun, xssRun string
	for _, r := range e.runsOf("demo.pipeline") {
		var in struct{ Tag string }
		b, _ := json.Marshal(r.Input)
		json.Unmarshal(b, &in)
		switch in.Tag {
		case "console":
			pipeRun = r.ID
		case xss:
			xssRun = r.ID
		}
	}
	if pipeRun == "" || xssRun == "" {
		t.Fatalf("pipeline runs not found: %+v", e.runsOf("demo.pipeline"))
	}
	base := e.url + "/_oke/"

	// Log in.
	browsertest.Do(t, ctx, "open the console", chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`[data-input="admin-token"]`)))
	browsertest.Screenshot(t, ctx, shots, "login")
	browsertest.Do(t, ctx, "log in",
		chromedp.SendKeys(chromedp.CSS(`[data-input="admin-token"]`), testAdminToken),
		chromedp.Click(chromedp.CSS(`[data-action="login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-nav="flows"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-flow="payments.charge"]`)))

	// Flows: the pills.
	pill := func(flow string) (string, bool) {
		t.Helper()
		v := browsertest.Get(t, ctx, "read the pill of "+flow, chromedp.Evaluate[[]string](`(() => {
			const p = document.querySelector('[data-flow="`+flow+`"] [data-pill="idempotency"]');
			return p ? ["1", p.textContent] : ["0", ""];
		})()`))
		return v[1], v[0] == "1"
	}
	if text, ok := pill("payments.charge"); !ok || !strings.Contains(text, "required") || !strings.Contains(text, "24h") {
		t.Errorf("payments.charge pill: %q (present %v), want required and 24h", text, ok)
	}
	if text, ok := pill("demo.note"); !ok || !strings.Contains(text, "auto") || !strings.Contains(text, "2s") {
		t.Errorf("demo.note pill: %q (present %v), want auto and 2s", text, ok)
	}
	if text, ok := pill("payments.list"); ok {
		t.Errorf("payments.list (GET) has a pill %q, want none", text)
	}
	why := browsertest.Get(t, ctx, "read the why of payments.charge", chromedp.TextContent(chromedp.CSS(`[data-flow="payments.charge"] .why`)))
	if !strings.Contains(why, "INSERT INTO charges") {
		t.Errorf("payments.charge's why: %q, want the INSERT that makes it write", why)
	}
	browsertest.Screenshot(t, ctx, shots, "flows")
	browsertest.ScreenshotViewport(t, ctx, shots, "flows-top")

	// Runs: the pipeline run is listed, completed.
	browsertest.Do(t, ctx, "open the runs page", chromedp.Click(chromedp.CSS(`[data-nav="runs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-run="`+pipeRun+`"][data-status="completed"]`)))
	browsertest.Screenshot(t, ctx, shots, "runs")

	// The run: its three steps.
	browsertest.Do(t, ctx, "open the run", chromedp.Click(chromedp.CSS(`[data-run="`+pipeRun+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-step="3"]`)))
	if n := browsertest.Get(t, ctx, "count steps", chromedp.Evaluate[int](`document.querySelectorAll("[data-step]").length`)); n != 3 {
		t.Errorf("the run's page shows %d steps, want 3", n)
	}
	browsertest.Screenshot(t, ctx, shots, "run")

	// Replay: a new run that completes; every step ran again.
	replayed := func(what string, click chromedp.Action[chromedp.Void]) string {
		t.Helper()
		browsertest.Do(t, ctx, what, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("[data-replayed-run]").forEach(e => e.remove())`),
			click, chromedp.WaitVisible(chromedp.CSS(`[data-replayed-run]`)))
		id := browsertest.Get(t, ctx, "read the replayed run", chromedp.Evaluate[string](`document.querySelector("[data-replayed-run]").getAttribute("data-replayed-run")`))
		if id == "" || id == pipeRun {
			t.Fatalf("%s: data-replayed-run = %q", what, id)
		}
		waitFor(t, func() bool { return e.run(id).Status == "completed" })
		return id
	}
	first := replayed("replay", chromedp.Click(chromedp.CSS(`[data-action="replay"]`)))
	if got := e.do("GET", "/pipeline/console", "").Body; !strings.Contains(string(got), `[{"step":1,"executions":2},{"step":2,"executions":2},{"step":3,"executions":2}]`) {
		t.Errorf("after a replay: %s, want every step executed twice", got)
	}
	if r := e.run(first); r.ReplayOf != pipeRun {
		t.Errorf("the replay's replayOf = %q, want %s", r.ReplayOf, pipeRun)
	}
	// Both runs link to each other.
	browsertest.Do(t, ctx, "see the replay on the original's page",
		chromedp.WaitVisible(chromedp.CSS(`[data-replay="`+first+`"]`)))

	// Replay from step 3: steps 1 and 2 are reused, step 3 runs again.
	// As a person types it: the input event tells the page (a live
	// redraw keeps what was typed).
	fromStep := chromedp.Steps(
		chromedp.Evaluate[chromedp.Void](`(() => { const i = document.querySelector('[data-input="from-step"]');
			i.value = "3"; i.dispatchEvent(new Event("input", {bubbles: true})); })()`),
		chromedp.Click(chromedp.CSS(`[data-action="replay-from"]`)))
	second := replayed("replay from step 3", fromStep)
	if got := e.do("GET", "/pipeline/console", "").Body; !strings.Contains(string(got), `[{"step":1,"executions":2},{"step":2,"executions":2},{"step":3,"executions":3}]`) {
		t.Errorf("after a replay from step 3: %s, want steps 1 and 2 reused (2 executions) and step 3 run again (3)", got)
	}
	browsertest.Do(t, ctx, "open the replay from step 3", chromedp.Click(chromedp.CSS(`[data-replayed-run]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-link="replay-of"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-step="3"]`)))
	if got := browsertest.Get(t, ctx, "read replay-of", chromedp.TextContent(chromedp.CSS(`[data-link="replay-of"]`))); got != pipeRun {
		t.Errorf("the replay's page links %q as its original, want %s", got, pipeRun)
	}
	_ = second
	browsertest.Screenshot(t, ctx, shots, "replay")

	// Idempotency: find the charge's row by its key; its body is hidden
	// until revealed; delete it.
	row := `[data-row="` + chargeKey + `"][data-flow-name="payments.charge"][data-tenant="default"][data-principal="anon"]`
	browsertest.Do(t, ctx, "look up the charge's key", chromedp.Click(chromedp.CSS(`[data-nav="idempotency"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-input="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-input="key"]`), chargeKey),
		chromedp.Click(chromedp.CSS(`[data-action="lookup"]`)),
		// The lookup's page, not the one before it, narrowed at once
		// (it holds the row too, until the lookup's page replaces it).
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/idempotency?key=`+chargeKey+`"] `+row)))
	if n := browsertest.Get(t, ctx, "count rows", chromedp.Evaluate[int](`document.querySelectorAll("[data-row]").length`)); n != 1 {
		t.Errorf("looking up one key shows %d rows, want 1", n)
	}
	if n := browsertest.Get(t, ctx, "look for bodies", chromedp.Evaluate[int](`document.querySelectorAll("[data-body]").length`)); n != 0 {
		t.Errorf("a stored body is shown before Reveal (%d)", n)
	}
	browsertest.Do(t, ctx, "reveal the body", chromedp.Click(chromedp.CSS(row+` [data-action="reveal"]`)),
		chromedp.WaitVisible(chromedp.CSS(row+` [data-body]`)))
	// Reveal clicked on a row whose page is being replaced (a lookup just
	// sent: the rows shown narrow at once, the lookup's page comes after):
	// the body shows on the page that ends up shown, whichever answer comes
	// first.
	browsertest.Do(t, ctx, "look up again and reveal at once", chromedp.Click(chromedp.CSS(`[data-nav="flows"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/flows"]`)),
		chromedp.Click(chromedp.CSS(`[data-nav="idempotency"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/idempotency"] `+row+` [data-action="reveal"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-input="key"]`), chargeKey),
		chromedp.Evaluate[chromedp.Void](`(() => {
			document.querySelector('[data-action="lookup"]').click();
			document.querySelector(`+"`"+row+` [data-action="reveal"]`+"`"+`).click();
		})()`),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/idempotency?key=`+chargeKey+`"] `+row+` [data-body]`)))
	if body := browsertest.Get(t, ctx, "read the body", chromedp.TextContent(chromedp.CSS(row+` [data-body]`))); !strings.Contains(body, `"amount": 500`) {
		t.Errorf("revealed body %q, want the charge", body)
	}
	browsertest.Screenshot(t, ctx, shots, "idempotency")
	browsertest.Do(t, ctx, "delete the row", chromedp.Click(chromedp.CSS(row+` [data-action="delete"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(row)))
	q := url.Values{"tenant": {"default"}, "principal": {"anon"}, "flow": {"payments.charge"}, "key": {chargeKey}}
	e.do("GET", "/_oke/idempotency/row?"+q.Encode(), "").want(t, 404, "NotFound")

	// A script in a flow's input and in a stored body stays text.
	browsertest.Do(t, ctx, "open the run whose input holds a script", chromedp.Navigate(base+"#/runs/"+xssRun),
		chromedp.WaitVisible(chromedp.CSS(`[data-step="2"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-input-json]`)))
	if got := browsertest.Get(t, ctx, "read the input", chromedp.TextContent(chromedp.CSS(`[data-input-json]`))); !strings.Contains(got, "<script>") {
		t.Errorf("the input is shown as %q, want the script as text", got)
	}
	noScriptRan(t, ctx, "the run's page")
	browsertest.Do(t, ctx, "reveal the stored body that holds a script", chromedp.Navigate(base+"#/idempotency?key="+url.QueryEscape(xssKey)),
		chromedp.WaitVisible(chromedp.CSS(`[data-row="`+xssKey+`"] [data-action="reveal"]`)),
		chromedp.Click(chromedp.CSS(`[data-row="`+xssKey+`"] [data-action="reveal"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-row="`+xssKey+`"] [data-body]`)))
	if got := browsertest.Get(t, ctx, "read the body", chromedp.TextContent(chromedp.CSS(`[data-row="`+xssKey+`"] [data-body]`))); !strings.Contains(got, "<script>") {
		t.Errorf("the stored body is shown as %q, want the script as text", got)
	}
	noScriptRan(t, ctx, "the revealed body")
	browsertest.Screenshot(t, ctx, shots, "escaped")
}

// noScriptRan checks that nothing the page shows became markup that ran.
func noScriptRan(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	// No element made from data: no handler of one can have run.
	got := browsertest.Get(t, ctx, "look for injected markup", chromedp.Evaluate[[]any](
		`[String(window.__xss), document.title, document.querySelectorAll("main script, main img").length]`))
	if got[0] != "undefined" || got[1] != "oke console" || got[2] != float64(0) {
		t.Errorf("%s: window.__xss = %v, title %v, %v script/img elements in the page; want undefined, \"oke console\", 0", where, got[0], got[1], got[2])
	}
}
