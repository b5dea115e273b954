package admin_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/browsertest"
)

// TestConsoleDeleteOfARowInFlightInABrowser: issue 21 defect 10 in the
// console — Delete on a row still in flight shows the 409 RowInProgress
// error and deletes nothing; the button becomes an explicit force button
// that says what it does, and only a click on it deletes the row; a
// completed row is deleted by the first click. Then Log out shows the login
// form and the API refuses the browser (the server-side revocation itself
// is TestAdminLogoutEndsTheSession's).
func TestConsoleDeleteOfARowInFlightInABrowser(t *testing.T) {
	ctx := browsertest.New(t)
	d := memory.New()
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, Logger: quiet()})
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok))))
	srv := httptest.NewServer(app)
	t.Cleanup(func() {
		srv.Close()
		app.Close(context.Background())
	})
	bg := context.Background()
	held := driver.Key{Tenant: "default", Principal: "anon", Flow: "adm.secret", Key: "console-in-flight-key"}
	done := driver.Key{Tenant: "default", Principal: "anon", Flow: "adm.secret", Key: "console-completed-key"}
	for _, k := range []driver.Key{held, done} {
		if res, err := d.Claim(bg, driver.ClaimRequest{Key: k, Fingerprint: "fp", Owner: "holder-" + k.Key, Lease: time.Hour, TTL: 24 * time.Hour}); err != nil || !res.Claimed {
			t.Fatalf("claim %s: %+v %v", k.Key, res, err)
		}
	}
	if err := d.Complete(bg, done, "holder-"+done.Key, driver.Response{Status: 201}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rowSel := func(k driver.Key) string { return `[data-row="` + k.Key + `"]` }

	browsertest.Do(t, ctx, "log in", chromedp.Navigate(srv.URL+"/_oke/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-input="admin-token"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-input="admin-token"]`), adminTok),
		chromedp.Click(chromedp.CSS(`[data-action="login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-nav="idempotency"]`)))
	browsertest.Do(t, ctx, "open the rows", chromedp.Click(chromedp.CSS(`[data-nav="idempotency"]`)),
		chromedp.WaitVisible(chromedp.CSS(rowSel(held)+` [data-action="delete"]`)),
		chromedp.WaitVisible(chromedp.CSS(rowSel(done)+` [data-action="delete"]`)))

	// Delete acts on one click (DESIGN §9: data-action="delete" deletes a
	// row); on a row in flight the server refuses it.
	browsertest.Do(t, ctx, "delete the row in flight", chromedp.Click(chromedp.CSS(rowSel(held)+` [data-action="delete"]`)),
		chromedp.WaitVisible(chromedp.CSS(rowSel(held)+` [data-action="force-delete"]`)))
	msg := browsertest.Get(t, ctx, "read the error", chromedp.Evaluate[string](`document.querySelector("[data-error]").textContent`))
	force := browsertest.Get(t, ctx, "read the force button", chromedp.Evaluate[string](`document.querySelector('[data-action="force-delete"]').textContent`))
	if !strings.Contains(msg, "RowInProgress") || !strings.Contains(msg, "second execution") || !strings.Contains(force, "second execution may start") {
		t.Fatalf("the console's refusal: error %q, button %q", msg, force)
	}
	if row, err := d.Get(bg, held); err != nil || row.Owner != "holder-"+held.Key {
		t.Fatalf("the refused delete touched the row: %+v %v", row, err)
	}
	// Forcing asks first: dismissing the dialog deletes nothing.
	browsertest.Do(t, ctx, "force the delete, then keep the row", chromedp.Click(chromedp.CSS(rowSel(held)+` [data-action="force-delete"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-dialog="confirm"]`)),
		chromedp.Click(chromedp.CSS(`[data-dialog="confirm"] [data-action="dismiss"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`[data-dialog="confirm"]`)))
	if row, err := d.Get(bg, held); err != nil || row.Owner != "holder-"+held.Key {
		t.Fatalf("a dismissed force delete touched the row: %+v %v", row, err)
	}
	browsertest.Do(t, ctx, "force the delete", chromedp.Click(chromedp.CSS(rowSel(held)+` [data-action="force-delete"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-dialog="confirm"]`)),
		chromedp.Click(chromedp.CSS(`[data-dialog="confirm"] [data-action="confirm"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(held))))
	if _, err := d.Get(bg, held); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("after the forced delete: %v", err)
	}
	browsertest.Do(t, ctx, "delete the completed row", chromedp.Click(chromedp.CSS(rowSel(done)+` [data-action="delete"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(done))))
	if _, err := d.Get(bg, done); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("the completed row was not deleted: %v", err)
	}

	// Log out: the login form; the browser's session no longer opens the API.
	browsertest.Do(t, ctx, "log out", chromedp.Click(chromedp.CSS(`[data-action="logout"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-input="admin-token"]`)))
	browsertest.Do(t, ctx, "open the API after logout", chromedp.Navigate(srv.URL+"/_oke/runs"))
	body := browsertest.Get(t, ctx, "read the API's answer", chromedp.Evaluate[string](`document.body.innerText`))
	if !strings.Contains(body, "Unauthorized") {
		t.Fatalf("the API after logout: %q, want the 401 envelope", body)
	}
}
