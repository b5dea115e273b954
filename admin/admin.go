// Package admin serves the admin surface of an oke app: the console (package
// console: flows, runs, a run's steps, idempotency rows) and the JSON API
// it uses over the app's journal runs (list with filters, show with steps,
// replay, replay from a step, cancel, send a signal, batches, live updates) and its
// Idempotency-Key rows (look up, reveal a stored body, delete, sweep),
// behind a gate (Auth) that is never optional.
//
//	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke",
//		admin.Handler(app, admin.Token(os.Getenv("OKE_ADMIN_TOKEN")))))
//
// The CLI (`oke runs`, `oke idempotency`) reads this API with -addr and
// -token.
package admin

import (
	"bytes"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/console"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/httpx"
)

// Handler serves the admin surface of an oke app: the console (HTML, for
// browsers) and the JSON admin API it and the CLI use.
//
//	GET    /                          the console (a browser), else the API's index
//	GET    /ui/{file}                 the console's script and style sheet
//	GET    /flows                     the flows' contract, with the idempotency pill
//	GET    /runs?flow=&status=&tenant=&createdAfter=&createdBefore=&replayOf=&after=&before=&order=&limit=
//	                                  a page of runs (keyset: after/before an ID), and the next cursor
//	GET    /runs/events?…             the same page, live (Server-Sent Events)
//	GET    /runs/{id}                 one run: steps, timing, replays
//	GET    /runs/{id}/events          the same, live (SSE)
//	POST   /runs/{id}/replay?fromStep=N   a new run from its input (reusing steps 1..N-1)
//	POST   /runs/{id}/cancel          fail a sleeping, waiting or dead run (App.Cancel)
//	POST   /runs/{id}/signal          send a signal {"name":…,"data":…,"key":…} (App.Signal)
//	POST   /runs/{id}/resume          make a dead-lettered run due again (App.Resume)
//	POST   /runs/replay, /runs/cancel, /runs/resume
//	                                  a batch: {"ids":[…]} or the runs the filters select
//	GET    /idempotency?key=&tenant=&principal=&flow=&limit=   rows (bodies hidden)
//	GET    /idempotency/row?tenant=&principal=&flow=&key=[&reveal=1]   one row
//	DELETE /idempotency/row?tenant=&principal=&flow=&key=[&force=1]
//	                                  delete a row (409 RowInProgress while it is in flight, unless forced)
//	POST   /idempotency/sweep         delete the expired rows, in batches
//	GET    /schedules                 the schedules (oke.Cron): spec, next tick, last run
//	POST   /login, POST /logout       the console's session (Token; logout revokes it on the server)
//
// Every request must pass auth (401 otherwise, as the JSON error envelope),
// and a state-changing one (POST, PUT, PATCH, DELETE) whose Origin or
// Sec-Fetch-Site says it comes from another site is 403: a page elsewhere
// cannot make a logged-in browser replay runs. A browser that asks for the
// HTML page at / without a session gets the login form (with Token). Every
// error is the JSON envelope. The console's pages carry a strict
// Content-Security-Policy (scripts from the handler only, none inline) and
// X-Frame-Options: DENY; see docs/console.md.
//
// Guessing is slowed down and logged: a client (an IP address, ClientIP)
// whose credentials are refused Limits.Free times (5) is blocked, 429 Too
// Many Requests with Retry-After, for a second, then twice as long after
// each further refusal, up to ten minutes (Limits, WithLimits); each refusal
// is logged as a warning on the app's logger (WithLogger), with the client
// and what it sent (a bearer token, a session cookie, the login form), never
// the credential. Other clients are not affected. With Token, POST /logout
// revokes the session in the app's store (see Token), so every instance
// sharing the store refuses its cookie.
//
// Handler panics when auth is nil: the admin surface is never served
// without a gate. Pass InsecureNoAuth to opt out, by name.
//
// Mount it under a prefix with http.StripPrefix, e.g.
//
//	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(token))))
func Handler(a *oke.App, auth Auth, opts ...Option) http.Handler {
	if auth == nil {
		panic("admin.Handler: nil Auth: the admin surface shows stored responses and replays runs, so it needs a gate; pass admin.Token(token) (or an admin.AuthFunc of your own), or admin.InsecureNoAuth where something in front of the app authenticates every request")
	}
	tokenAuth, _ := auth.(*tokenAuth)
	o := options{log: a.Logger(), clientIP: ClientIP, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	lim := newLimiter(o.limits)
	var revoked *storeRevocations
	if tokenAuth != nil && a.Driver() != nil {
		revoked = &storeRevocations{d: a.Driver(), timeout: a.StoreTimeout()}
	}
	x := &api{app: a, j: a.Journal(), d: a.Driver(), poll: 500 * time.Millisecond, timeout: a.StoreTimeout()}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { httpx.NotFound(mux, w, r) })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if wantsHTML(r) {
			serveConsole(w, r, tokenAuth != nil)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"api": []string{
			"GET /flows", "GET /runs", "GET /runs/events", "GET /runs/{id}", "GET /runs/{id}/events",
			"POST /runs/{id}/replay", "POST /runs/{id}/cancel", "POST /runs/{id}/resume", "POST /runs/{id}/signal", "POST /runs/replay", "POST /runs/cancel", "POST /runs/resume",
			"GET /idempotency", "GET /idempotency/row", "DELETE /idempotency/row", "POST /idempotency/sweep", "GET /schedules"}})
	})
	mux.HandleFunc("GET /ui/{file}", serveAsset)
	if tokenAuth != nil {
		mux.HandleFunc("POST /logout", serveLogout(tokenAuth, o.now, revoked))
	}
	mux.HandleFunc("GET /flows", x.flows)
	mux.HandleFunc("GET /runs", x.listRuns)
	mux.HandleFunc("GET /runs/events", x.runsEvents)
	mux.HandleFunc("GET /runs/{id}", x.getRun)
	mux.HandleFunc("GET /runs/{id}/events", x.runEvents)
	mux.HandleFunc("POST /runs/{id}/replay", x.replay)
	mux.HandleFunc("POST /runs/{id}/cancel", x.cancel)
	mux.HandleFunc("POST /runs/{id}/signal", x.signal)
	mux.HandleFunc("POST /runs/replay", x.batch("replay"))
	mux.HandleFunc("POST /runs/cancel", x.batch("cancel"))
	mux.HandleFunc("POST /runs/{id}/resume", x.resume)
	mux.HandleFunc("POST /runs/resume", x.batch("resume"))
	mux.HandleFunc("GET /idempotency", x.listRows)
	mux.HandleFunc("GET /idempotency/row", x.getRow)
	mux.HandleFunc("DELETE /idempotency/row", x.deleteRow)
	mux.HandleFunc("POST /idempotency/sweep", x.sweep)
	mux.HandleFunc("GET /schedules", x.schedules)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // not no-referrer: with it a browser sends Origin: null on the login form's POST
		now := o.now()
		client := o.clientIP(r)
		if wait := lim.blocked(client, now); wait > 0 && !(tokenAuth != nil && tokenAuth.sessionOK(r, now)) {
			tooMany(w, r, wait, tokenAuth != nil)
			return
		}
		failed := func(guess string) {
			n, block, shed := lim.fail(client, now)
			path := r.URL.Path
			if len(path) > 200 {
				path = path[:200] + "…"
			}
			o.log.Warn("admin: refused a wrong credential", "client", client, "credential", guess,
				"method", r.Method, "path", mountPrefix(r)+path, "failures", n, "blockedFor", block, "refusedWhileBlocked", shed)
		}
		if tokenAuth != nil && r.URL.Path == "/login" && r.Method == http.MethodPost {
			serveLogin(tokenAuth, w, r, now, func() { failed("login form") })
			return
		}
		if e, guess := guard(auth, r, now, revoked); e != nil {
			if guess != "" {
				failed(guess)
			}
			if tokenAuth != nil && e.Status == http.StatusUnauthorized && wantsHTML(r) && r.URL.Path == "/" {
				writeLogin(w, http.StatusOK, mountPrefix(r)+"/login", "")
				return
			}
			oke.WriteError(w, e)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// tooMany answers a blocked client: 429 with Retry-After (whole seconds,
// at least 1), the login page for a browser, the envelope for the rest.
func tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, login bool) {
	secs := int((wait + time.Second - 1) / time.Second)
	msg := fmt.Sprintf("Too many wrong admin credentials from your address: try again in %d s.", secs)
	if login && (wantsHTML(r) || (r.Method == http.MethodPost && r.URL.Path == "/login" && browserForm(r))) {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeLogin(w, http.StatusTooManyRequests, mountPrefix(r)+"/login", msg)
		return
	}
	httpx.WriteEnvelope(w, http.StatusTooManyRequests, "TooManyRequests", msg, secs)
}

// consoleCSP is the console's Content-Security-Policy: its script and style
// sheet come from the admin handler, nothing runs inline, it talks only to
// its own origin, and no other page may frame it.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// serveConsole writes the console's page (console.Index) for a logged-in
// browser. session says whether it shows a Log out button.
func serveConsole(w http.ResponseWriter, r *http.Request, session bool) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", consoleCSP)
	page := console.Index
	if !session {
		page = bytes.Replace(page, []byte(`data-session="1"`), []byte(`data-session="0"`), 1)
	}
	w.Write(page)
}

// serveAsset serves a file of the console (console.Assets).
func serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(console.Assets, name)
	if err != nil {
		httpx.WriteEnvelope(w, http.StatusNotFound, "NotFound", fmt.Sprintf("The console has no file %s.", httpx.Quote(name)), 0)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Security-Policy", consoleCSP)
	w.Write(b)
}

func parseStatus(s string) (driver.RunStatus, bool) {
	for _, st := range []driver.RunStatus{driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed, driver.RunDead} {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}
