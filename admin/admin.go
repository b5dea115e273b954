// Package admin serves the admin surface of an oke app: a JSON API over its
// journal runs (list, show with steps, replay) and its Idempotency-Key rows
// (with their stored responses), and the console's login, behind a gate
// (Auth) that is never optional.
//
//	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke",
//		admin.Handler(app, admin.Token(os.Getenv("OKE_ADMIN_TOKEN")))))
//
// The CLI (`oke runs`, `oke idempotency`) reads this API with -addr and
// -token.
package admin

import (
	"errors"
	"html/template"
	"net/http"
	"strconv"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/httpx"
)

// Handler serves the admin surface of an oke app: a small JSON API over the app's
// journal and idempotency rows, for the CLI and consoles.
//
//	GET  /runs?flow=&status=&after=&limit=   runs in ID order
//	GET  /runs/{id}                          one run with its steps
//	POST /runs/{id}/replay                   start a new run from its input
//	GET  /idempotency?limit=                 idempotency rows
//	GET  /flows                              the flows' contract
//	POST /login, POST /logout                the console's session (AdminToken)
//
// Every request must pass auth (401 otherwise, as the JSON error envelope),
// and a state-changing one (POST, PUT, PATCH, DELETE) whose Origin or
// Sec-Fetch-Site says it comes from another site is 403: a page elsewhere
// cannot make a logged-in browser replay runs. A browser that asks for the
// HTML page at / without a session gets the login form (with Token).
//
// Handler panics when auth is nil: the admin surface is never served
// without a gate. Pass InsecureNoAuth to opt out, by name.
//
// Mount it under a prefix with http.StripPrefix, e.g.
//
//	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(token))))
func Handler(a *oke.App, auth Auth) http.Handler {
	if auth == nil {
		panic("admin.Handler: nil Auth: the admin surface shows stored responses and replays runs, so it needs a gate; pass admin.Token(token) (or an admin.AuthFunc of your own), or admin.InsecureNoAuth where something in front of the app authenticates every request")
	}
	tokenAuth, _ := auth.(*tokenAuth)
	j := a.Journal()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { httpx.NotFound(mux, w, r) })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if wantsHTML(r) {
			writeAdminIndex(w, mountPrefix(r), tokenAuth != nil)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"api": []string{"GET /runs", "GET /runs/{id}", "POST /runs/{id}/replay", "GET /idempotency", "GET /flows"}})
	})
	if tokenAuth != nil {
		mux.HandleFunc("POST /logout", serveLogout)
	}
	mux.HandleFunc("GET /runs", func(w http.ResponseWriter, r *http.Request) {
		if j == nil {
			oke.WriteError(w, oke.ErrNotFound.WithMessage("This app's driver keeps no journal."))
			return
		}
		q := r.URL.Query()
		f := driver.RunFilter{After: q.Get("after"), Flow: q.Get("flow")}
		if s := q.Get("status"); s != "" {
			st, ok := parseStatus(s)
			if !ok {
				oke.WriteError(w, &oke.Error{Status: 400, Code: oke.CodeInvalidInput, Message: "status must be running, sleeping, completed or failed"})
				return
			}
			f.Status = []driver.RunStatus{st}
		}
		limit, _ := strconv.Atoi(q.Get("limit"))
		if limit <= 0 || limit > 1000 {
			limit = 100
		}
		runs, err := j.ListRuns(r.Context(), f, limit)
		if err != nil {
			oke.WriteError(w, oke.ErrStoreUnavailable.WithCause(err))
			return
		}
		out := make([]RunView, len(runs))
		for i, run := range runs {
			out[i] = ViewRun(run, nil)
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"runs": out})
	})
	mux.HandleFunc("GET /runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if j == nil {
			oke.WriteError(w, oke.ErrNotFound.WithMessage("This app's driver keeps no journal."))
			return
		}
		run, steps, err := j.GetRun(r.Context(), r.PathValue("id"))
		if errors.Is(err, driver.ErrNotFound) {
			oke.WriteError(w, oke.ErrNotFound.WithMessage("No run has id %q.", r.PathValue("id")))
			return
		}
		if err != nil {
			oke.WriteError(w, oke.ErrStoreUnavailable.WithCause(err))
			return
		}
		httpx.WriteJSON(w, http.StatusOK, ViewRun(run, steps))
	})
	mux.HandleFunc("POST /runs/{id}/replay", func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Replay(r.Context(), r.PathValue("id"))
		if errors.Is(err, driver.ErrNotFound) {
			oke.WriteError(w, oke.ErrNotFound.WithMessage("No run has id %q.", r.PathValue("id")))
			return
		}
		if err != nil {
			oke.WriteError(w, &oke.Error{Status: http.StatusConflict, Code: "ReplayFailed", Message: err.Error()})
			return
		}
		httpx.WriteJSON(w, http.StatusAccepted, map[string]string{"id": id, "replayOf": r.PathValue("id")})
	})
	mux.HandleFunc("GET /idempotency", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 || limit > 1000 {
			limit = 100
		}
		rows, err := a.Driver().List(r.Context(), driver.Key{}, limit)
		if err != nil {
			oke.WriteError(w, oke.ErrStoreUnavailable.WithCause(err))
			return
		}
		out := make([]RowView, len(rows))
		for i, row := range rows {
			out[i] = ViewRow(row)
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"rows": out})
	})
	mux.HandleFunc("GET /flows", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"flows": a.Flows()})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if tokenAuth != nil && r.URL.Path == "/login" && r.Method == http.MethodPost {
			serveLogin(tokenAuth, w, r)
			return
		}
		if e := guard(auth, r); e != nil {
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

// writeAdminIndex is the admin surface's page for a logged-in browser.
func writeAdminIndex(w http.ResponseWriter, prefix string, session bool) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	adminIndex.Execute(w, struct {
		Prefix  string
		Session bool
	}{prefix, session})
}

var adminIndex = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>oke · admin</title>
<style>body{font:15px system-ui,sans-serif;max-width:40rem;margin:8vh auto;padding:0 1rem;color:#1b1f24}</style></head>
<body><h1>oke admin</h1><p>The JSON admin API of this app:</p><ul>
<li><a href="{{.Prefix}}/flows" data-nav="flows">flows</a></li>
<li><a href="{{.Prefix}}/runs" data-nav="runs">runs</a></li>
<li><a href="{{.Prefix}}/idempotency" data-nav="idempotency">idempotency rows</a></li></ul>
{{if .Session}}<form method="post" action="{{.Prefix}}/logout"><button type="submit" data-action="logout">Log out</button></form>{{end}}
</body></html>
`))

func parseStatus(s string) (driver.RunStatus, bool) {
	for _, st := range []driver.RunStatus{driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed} {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}
