package app_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/okengine/oke/internal/browsertest"
)

// TestConsoleIndexInABrowser drives issue 22's console in headless
// Chromium on the file driver: the flows index narrows by name and by kind
// and shows the flow's live numbers; times are ISO 8601 in UTC until the
// toggle switches them to the browser's zone, and the choice survives a
// reload; the runs page offers bulk actions only once filtered, and a bulk
// cancel asks first (dismissed: nothing cancelled); a keyed run links to
// its idempotency row and back; the idempotency list pages with its cursor;
// a sleeping run draws its sleep and its wake time and counts no retry;
// and the page does not scroll sideways at 420 px.
func TestConsoleIndexInABrowser(t *testing.T) {
	e := setup(t, fastScheduler)
	ctx := browsertest.New(t)
	shots := browsertest.ArtifactDir(t)

	chargeKey, remindKey, pipeKey := newKey(), newKey(), newKey()
	e.do("POST", "/charges", `{"amount":700,"currency":"usd"}`, "Idempotency-Key", chargeKey).want(t, 201, "")
	e.do("POST", "/charges", `{"amount":700,"currency":"usd"}`, "Idempotency-Key", chargeKey).want(t, 201, "")
	e.do("POST", "/reminders", `{"to":"ada@example.com","delay":"1h"}`, "Idempotency-Key", remindKey).want(t, 204, "")
	e.do("POST", "/pipeline", `{"tag":"index","steps":2,"stepMs":1}`, "Idempotency-Key", pipeKey).want(t, 201, "")
	var remindRun string
	for _, r := range e.runsOf("demo.remind") {
		if r.IdemKey != nil && r.IdemKey.Key == remindKey {
			remindRun = r.ID
		}
	}
	if remindRun == "" {
		t.Fatalf("the reminder's run (key %s) not found, or it has no idemKey: %+v", remindKey, e.runsOf("demo.remind"))
	}
	base := e.url + "/_oke/"

	browsertest.Do(t, ctx, "log in", chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`[data-input="admin-token"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-input="admin-token"]`), testAdminToken),
		chromedp.Click(chromedp.CSS(`[data-action="login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-flow="payments.charge"]`)))

	// Flows: search by name, filters, numbers.
	visibleFlows := func() []string {
		t.Helper()
		return browsertest.Get(t, ctx, "list the flows shown", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("tr[data-flow]")].filter(e => !e.hidden && e.offsetParent !== null).map(e => e.dataset.flow)`))
	}
	all := visibleFlows()
	if len(all) < 5 {
		t.Fatalf("the flows index shows %v, want every flow", all)
	}
	stat := func(flow, name string) string {
		t.Helper()
		return browsertest.Get(t, ctx, "read "+name+" of "+flow, chromedp.TextContent(chromedp.CSS(`[data-flow="`+flow+`"] [data-stat="`+name+`"]`)))
	}
	if got := stat("payments.charge", "executions"); got != "1" {
		t.Errorf("payments.charge executions %q, want 1 (one live request, one replay)", got)
	}
	if got := stat("payments.charge", "replays"); got != "1" {
		t.Errorf("payments.charge replays %q, want 1", got)
	}
	browsertest.Do(t, ctx, "search for charge", chromedp.SendKeys(chromedp.CSS(`[data-input="flow-search"]`), "charge"))
	for _, f := range visibleFlows() {
		if !strings.Contains(f, "charge") {
			t.Errorf("searching \"charge\" shows %s", f)
		}
	}
	if got := visibleFlows(); len(got) == 0 || len(got) >= len(all) {
		t.Errorf("searching \"charge\" shows %v of %v", got, all)
	}
	browsertest.Do(t, ctx, "clear the search, keep durable flows",
		chromedp.Evaluate[chromedp.Void](`(() => { const i = document.querySelector('[data-input="flow-search"]'); i.value = ""; i.dispatchEvent(new Event("input", {bubbles: true}));
			const s = document.querySelector('[data-input="flow-durable"]'); s.value = "yes"; s.dispatchEvent(new Event("change", {bubbles: true})); })()`))
	durable := visibleFlows()
	if !contains(durable, "demo.remind") || contains(durable, "payments.charge") {
		t.Errorf("durable flows shown: %v, want demo.remind and not payments.charge", durable)
	}
	browsertest.Do(t, ctx, "required idempotency only",
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('[data-input="flow-durable"]'); s.value = ""; s.dispatchEvent(new Event("change", {bubbles: true}));
			const m = document.querySelector('[data-input="flow-mode"]'); m.value = "required"; m.dispatchEvent(new Event("change", {bubbles: true})); })()`))
	required := visibleFlows()
	if !contains(required, "payments.charge") || contains(required, "demo.note") || contains(required, "payments.list") {
		t.Errorf("required flows shown: %v, want payments.charge, not demo.note (auto) or payments.list", required)
	}
	browsertest.ScreenshotViewport(t, ctx, shots, "flows-index")

	// Times: UTC by default, ISO 8601 with its zone; the toggle switches
	// to local and is remembered.
	runTime := func() string {
		t.Helper()
		return browsertest.Get(t, ctx, "read a run's time", chromedp.TextContent(chromedp.CSS(`[data-run="`+remindRun+`"] time`)))
	}
	browsertest.Do(t, ctx, "open the runs", chromedp.Navigate(base+"#/runs"),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/runs"] [data-run="`+remindRun+`"] time`)))
	if got := runTime(); !isoUTC(got) {
		t.Errorf("a run's time %q, want ISO 8601 in UTC (…T…Z)", got)
	}
	browsertest.Do(t, ctx, "switch to local time", chromedp.Evaluate[chromedp.Void](`localStorage.removeItem("oke.console.tz")`),
		chromedp.Click(chromedp.CSS(`[data-action="tz"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-action="tz"][data-tz="local"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/runs"] [data-run="`+remindRun+`"] time`)))
	// The browser's zone (Chromium's default, the machine's): its offset
	// or Z, never a bare local time.
	local := runTime()
	if !strings.Contains(local, "T") || !(strings.HasSuffix(local, "Z") || strings.Contains(local[19:], "+") || strings.Contains(local[19:], "-")) {
		t.Errorf("a run's local time %q, want ISO 8601 with its offset", local)
	}
	browsertest.Do(t, ctx, "reload", chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/runs"] [data-run="`+remindRun+`"] time`)))
	if tz := browsertest.Get(t, ctx, "read the toggle", chromedp.Evaluate[string](`document.querySelector('[data-action="tz"]').dataset.tz`)); tz != "local" {
		t.Errorf("after a reload the zone is %q, want local (remembered)", tz)
	}
	browsertest.Do(t, ctx, "back to UTC", chromedp.Click(chromedp.CSS(`[data-action="tz"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-action="tz"][data-tz="utc"]`)))

	// Bulk actions: not on the unfiltered list; on a filtered one, with
	// the count, and confirmed.
	if n := browsertest.Get(t, ctx, "look for bulk buttons", chromedp.Evaluate[int](`document.querySelectorAll('[data-action^="batch-"]').length`)); n != 0 {
		t.Errorf("the unfiltered runs page has %d bulk buttons, want none", n)
	}
	browsertest.Do(t, ctx, "filter the reminders", chromedp.Navigate(base+"#/runs?flow=demo.remind&status=sleeping"),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/runs?flow=demo.remind&status=sleeping"] [data-action="batch-cancel"]`)))
	label := browsertest.Get(t, ctx, "read the bulk cancel", chromedp.TextContent(chromedp.CSS(`[data-action="batch-cancel"]`)))
	if label != "Cancel these 1 run" {
		t.Errorf("the bulk cancel says %q, want \"Cancel these 1 run\"", label)
	}
	browsertest.Do(t, ctx, "bulk cancel, then dismiss", chromedp.Click(chromedp.CSS(`[data-action="batch-cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-dialog="confirm"]`)))
	if q := browsertest.Get(t, ctx, "read the question", chromedp.TextContent(chromedp.CSS(`[data-dialog-text]`))); !strings.Contains(q, "Cancel these 1 run?") {
		t.Errorf("the confirmation asks %q", q)
	}
	browsertest.Do(t, ctx, "dismiss", chromedp.Click(chromedp.CSS(`[data-action="dismiss"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`[data-dialog="confirm"]`)))
	if st := e.run(remindRun).Status; st != "sleeping" {
		t.Errorf("after a dismissed bulk cancel the run is %s, want sleeping", st)
	}

	// The run: its key's row, the sleep drawn with its wake time, no retry.
	browsertest.Do(t, ctx, "open the sleeping run", chromedp.Navigate(base+"#/runs/"+remindRun),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/runs/`+remindRun+`"] [data-sleep-until]`)))
	if n := browsertest.Get(t, ctx, "look for the drawn sleep", chromedp.Evaluate[int](`document.querySelectorAll('[data-parked="sleep"] [data-gap="sleep"]').length`)); n != 1 {
		t.Errorf("the sleeping run draws %d sleeps after its last step, want 1", n)
	}
	next := browsertest.Get(t, ctx, "read the next step", chromedp.TextContent(chromedp.CSS(`[data-next-step]`)))
	if !strings.Contains(next, "sleeping until 20") {
		t.Errorf("the sleeping run's next step says %q, want its wake time", next)
	}
	if got := browsertest.Get(t, ctx, "read the retries", chromedp.Evaluate[string](`document.querySelector("[data-retries]").dataset.retries`)); got != "0" {
		t.Errorf("the sleeping run shows %s retries, want 0", got)
	}
	if body := browsertest.Get(t, ctx, "read the page", chromedp.Evaluate[string](`document.querySelector("main").innerText`)); strings.Contains(body, "waiting 0 ms") {
		t.Errorf("the sleeping run's page says \"waiting 0 ms\"")
	}
	browsertest.ScreenshotViewport(t, ctx, shots, "run-sleeping")
	browsertest.Do(t, ctx, "follow the key's row", chromedp.Click(chromedp.CSS(`#main [data-link="idempotency-row"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-row="`+remindKey+`"] [data-link="run"]`)))
	if got := browsertest.Get(t, ctx, "read the row's run", chromedp.TextContent(chromedp.CSS(`[data-row="`+remindKey+`"] [data-link="run"]`))); got != remindRun {
		t.Errorf("the row links run %q, want %s", got, remindRun)
	}

	// Paging the idempotency rows two at a time: every row once.
	var seen []string
	browsertest.Do(t, ctx, "open the first page", chromedp.Navigate(base+"#/idempotency?limit=2"),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/idempotency?limit=2"] [data-rows-shown]`)))
	for i := 0; ; i++ {
		rows := browsertest.Get(t, ctx, "read the rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll("[data-row]")].map(e => e.dataset.row)`))
		if len(rows) > 2 {
			t.Fatalf("a page of limit=2 shows %d rows", len(rows))
		}
		seen = append(seen, rows...)
		more := browsertest.Get(t, ctx, "look for next", chromedp.Evaluate[bool](`!!document.querySelector('[data-action="next-page"]')`))
		if !more || i > 10 {
			break
		}
		shown := browsertest.Get(t, ctx, "read the address", chromedp.Evaluate[string](`document.querySelector("#main").dataset.shown`))
		browsertest.Do(t, ctx, "next page", chromedp.Click(chromedp.CSS(`[data-action="next-page"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-action="first-page"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#main").dataset.shown !== `+jsString(shown)))
	}
	for _, k := range []string{chargeKey, remindKey, pipeKey} {
		if n := count(seen, k); n != 1 {
			t.Errorf("paging shows the row of %s %d times, want 1 (seen %v)", k, n, seen)
		}
	}

	// A 420 px screen: nothing wider than the page, and every stacked
	// table cell labelled with its column.
	browsertest.Do(t, ctx, "a narrow screen", chromedp.EmulateViewport(420, 800), chromedp.Navigate(base+"#/idempotency"),
		chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="/idempotency"] [data-row="`+chargeKey+`"]`)))
	for _, page := range []string{"/idempotency", "/runs", "/flows", "/schedules", "/runs/" + remindRun} {
		browsertest.Do(t, ctx, "open "+page, chromedp.Navigate(base+"#"+page),
			chromedp.WaitVisible(chromedp.CSS(`#main[data-shown="`+page+`"]`)))
		if w := browsertest.Get(t, ctx, "measure "+page, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 420 {
			t.Errorf("at 420 px the page %s is %d px wide: it scrolls sideways", page, w)
		}
		if n := browsertest.Get(t, ctx, "count unlabelled cells of "+page, chromedp.Evaluate[int](unlabelledCells)); n != 0 {
			t.Errorf("at 420 px the page %s has %d table cells without a data-label: stacked, they show no column name", page, n)
		}
		browsertest.ScreenshotViewport(t, ctx, shots, "narrow"+strings.ReplaceAll(page, "/", "-"))
	}
}

// unlabelledCells counts the body cells of the page's tables that have no
// data-label though their column has a name (an actions column has none).
const unlabelledCells = `[...document.querySelectorAll("#main table")].reduce((n, table) => {
	const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
	for (const tr of table.querySelectorAll("tbody tr"))
		[...tr.children].forEach((td, i) => { if (heads[i] && !td.hasAttribute("colspan") && !td.dataset.label) n++; });
	return n;
}, 0)`

func contains(list []string, s string) bool { return count(list, s) > 0 }

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// isoUTC: 2026-01-02T15:04:05.000Z.
func isoUTC(s string) bool {
	return len(s) == 24 && s[4] == '-' && s[10] == 'T' && s[19] == '.' && strings.HasSuffix(s, "Z")
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
