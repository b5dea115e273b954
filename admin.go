package oke

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/okengine/oke/driver"
)

// RunView is a journal run as the admin API and the CLI show it.
type RunView struct {
	ID         string      `json:"id"`
	Flow       string      `json:"flow"`
	Status     string      `json:"status"`
	Input      any         `json:"input,omitempty"`
	Tenant     string      `json:"tenant,omitempty"`
	Principal  string      `json:"principal,omitempty"`
	Attempts   int         `json:"attempts"`
	Owner      string      `json:"owner,omitempty"`
	LeaseUntil *time.Time  `json:"leaseUntil,omitempty"`
	WakeAt     *time.Time  `json:"wakeAt,omitempty"`
	ReplayOf   string      `json:"replayOf,omitempty"`
	Parent     string      `json:"parent,omitempty"`
	Event      string      `json:"event,omitempty"`
	Error      string      `json:"error,omitempty"`
	Result     *StoredView `json:"result,omitempty"`
	CreatedAt  time.Time   `json:"createdAt"`
	UpdatedAt  time.Time   `json:"updatedAt"`
	StepCount  int         `json:"stepCount"` // saved steps (also in listings, which carry no Steps)
	Steps      []StepView  `json:"steps,omitempty"`
	Next       *NextView   `json:"next,omitempty"` // unfinished runs: the step after the saved ones
}

// NextView is the step an unfinished run takes next, after its saved ones:
// only its position is known (its name is the code's, once it gets there).
// Attempts is how many executions have begun it (driver.Run.NextAttempts):
// for a held run, its holder included; for a run waiting to be picked up
// after a lapse or a release, those so far (the next pick-up adds one); for
// a sleeping run, 1, the execution that wakes it. An execution cut off
// between two steps counts as an attempt of the later one.
type NextView struct {
	Seq      int `json:"seq"`
	Attempts int `json:"attempts"`
}

// StepView is a saved step.
type StepView struct {
	Seq        int       `json:"seq"`
	Name       string    `json:"name"`
	Result     any       `json:"result,omitempty"`
	Failure    any       `json:"failure,omitempty"`
	Attempts   int       `json:"attempts"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Millis     float64   `json:"ms"`
}

// StoredView is a stored response.
type StoredView struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	Location    string `json:"location,omitempty"`
	Body        any    `json:"body,omitempty"`
}

// ViewRun turns a run and its steps into a RunView.
func ViewRun(r driver.Run, steps []driver.Step) RunView {
	v := RunView{ID: r.ID, Flow: r.Flow, Status: r.Status.String(), Input: rawJSON(r.Input), Tenant: r.Tenant,
		Principal: r.Principal, Attempts: r.Attempts, Owner: r.Owner, ReplayOf: r.ReplayOf, Parent: r.Parent,
		Event: r.Event, Error: r.Error, Result: viewStored(r.Result), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		StepCount: max(r.Steps, len(steps))}
	if !r.LeaseUntil.IsZero() && r.Owner != "" {
		t := r.LeaseUntil
		v.LeaseUntil = &t
	}
	if !r.WakeAt.IsZero() {
		t := r.WakeAt
		v.WakeAt = &t
	}
	if !r.Status.Finished() {
		v.Next = &NextView{Seq: v.StepCount + 1, Attempts: r.NextAttempts}
	}
	for _, s := range steps {
		v.Steps = append(v.Steps, StepView{Seq: s.Seq, Name: s.Name, Result: rawJSON(s.Result), Failure: rawJSON(s.Failure),
			Attempts: s.Attempts, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
			Millis: float64(s.FinishedAt.Sub(s.StartedAt).Microseconds()) / 1000})
	}
	return v
}

func viewStored(r *driver.Response) *StoredView {
	if r == nil {
		return nil
	}
	v := &StoredView{Status: r.Status, ContentType: r.ContentType, Location: r.Location}
	if isJSONType(r.ContentType) {
		v.Body = rawJSON(r.Body)
	} else if len(r.Body) > 0 {
		v.Body = string(r.Body)
	}
	return v
}

func rawJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	if !json.Valid(b) {
		return string(b)
	}
	return json.RawMessage(b)
}

// RowView is an idempotency row as the admin API shows it.
type RowView struct {
	Tenant    string      `json:"tenant"`
	Principal string      `json:"principal"`
	Flow      string      `json:"flow"`
	Key       string      `json:"key"`
	State     string      `json:"state"`
	RunID     string      `json:"runId,omitempty"`
	ExpiresAt time.Time   `json:"expiresAt"`
	CreatedAt time.Time   `json:"createdAt"`
	Response  *StoredView `json:"response,omitempty"`
}

// ViewRow turns an idempotency row into a RowView.
func ViewRow(row driver.Row) RowView {
	return RowView{Tenant: row.Key.Tenant, Principal: row.Key.Principal, Flow: row.Key.Flow, Key: row.Key.Key,
		State: row.State.String(), RunID: row.RunID, ExpiresAt: row.ExpiresAt, CreatedAt: row.CreatedAt,
		Response: viewStored(row.Response)}
}

// AdminHandler serves the admin surface: a small JSON API over the app's
// journal and idempotency rows, for the CLI and consoles.
//
//	GET  /runs?flow=&status=&after=&limit=   runs in ID order
//	GET  /runs/{id}                          one run with its steps
//	POST /runs/{id}/replay                   start a new run from its input
//	GET  /idempotency?limit=                 idempotency rows
//	GET  /flows                              the flows' contract
//	POST /login, POST /logout                the console's session (AdminToken)
//
// Every request must pass Config.AdminAuth (401 otherwise, as the JSON
// error envelope), and a state-changing one (POST, PUT, PATCH, DELETE)
// whose Origin or Sec-Fetch-Site says it comes from another site is 403:
// a page elsewhere cannot make a logged-in browser replay runs. A browser
// that asks for the HTML page at / without a session gets the login form
// (with AdminToken). Without an AdminAuth the handler serves nothing
// (503 AdminAuthMissing) and Start reports the problem; set
// InsecureNoAdminAuth to opt out, by name.
//
// Mount it under a prefix with http.StripPrefix, e.g.
//
//	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", app.AdminHandler()))
func (a *App) AdminHandler() http.Handler {
	if a.cfg.AdminAuth == nil {
		a.problem(errors.New("AdminHandler: Config.AdminAuth is not set, so the admin surface would show stored responses and replay runs for anyone; fix: set AdminAuth: oke.AdminToken(token) (or your own oke.AdminAuthFunc), or oke.InsecureNoAdminAuth where something in front of the app authenticates every request"))
	}
	auth := a.cfg.AdminAuth
	tokenAuth, _ := auth.(*adminTokenAuth)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { routeNotFound(mux, w, r) })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if wantsHTML(r) {
			writeAdminIndex(w, mountPrefix(r), tokenAuth != nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"api": []string{"GET /runs", "GET /runs/{id}", "POST /runs/{id}/replay", "GET /idempotency", "GET /flows"}})
	})
	if tokenAuth != nil {
		mux.HandleFunc("POST /logout", serveLogout)
	}
	mux.HandleFunc("GET /runs", func(w http.ResponseWriter, r *http.Request) {
		if a.journal == nil {
			WriteError(w, ErrNotFound.WithMessage("This app's driver keeps no journal."))
			return
		}
		q := r.URL.Query()
		f := driver.RunFilter{After: q.Get("after"), Flow: q.Get("flow")}
		if s := q.Get("status"); s != "" {
			st, ok := parseStatus(s)
			if !ok {
				WriteError(w, &Error{Status: 400, Code: CodeInvalidInput, Message: "status must be running, sleeping, completed or failed"})
				return
			}
			f.Status = []driver.RunStatus{st}
		}
		limit, _ := strconv.Atoi(q.Get("limit"))
		if limit <= 0 || limit > 1000 {
			limit = 100
		}
		runs, err := a.journal.ListRuns(r.Context(), f, limit)
		if err != nil {
			WriteError(w, ErrStoreUnavailable.WithCause(err))
			return
		}
		out := make([]RunView, len(runs))
		for i, run := range runs {
			out[i] = ViewRun(run, nil)
		}
		writeJSON(w, http.StatusOK, map[string]any{"runs": out})
	})
	mux.HandleFunc("GET /runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if a.journal == nil {
			WriteError(w, ErrNotFound.WithMessage("This app's driver keeps no journal."))
			return
		}
		run, steps, err := a.journal.GetRun(r.Context(), r.PathValue("id"))
		if errors.Is(err, driver.ErrNotFound) {
			WriteError(w, ErrNotFound.WithMessage("No run has id %q.", r.PathValue("id")))
			return
		}
		if err != nil {
			WriteError(w, ErrStoreUnavailable.WithCause(err))
			return
		}
		writeJSON(w, http.StatusOK, ViewRun(run, steps))
	})
	mux.HandleFunc("POST /runs/{id}/replay", func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Replay(r.Context(), r.PathValue("id"))
		if errors.Is(err, driver.ErrNotFound) {
			WriteError(w, ErrNotFound.WithMessage("No run has id %q.", r.PathValue("id")))
			return
		}
		if err != nil {
			WriteError(w, &Error{Status: http.StatusConflict, Code: "ReplayFailed", Message: err.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "replayOf": r.PathValue("id")})
	})
	mux.HandleFunc("GET /idempotency", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 || limit > 1000 {
			limit = 100
		}
		rows, err := a.cfg.Driver.List(r.Context(), driver.Key{}, limit)
		if err != nil {
			WriteError(w, ErrStoreUnavailable.WithCause(err))
			return
		}
		out := make([]RowView, len(rows))
		for i, row := range rows {
			out[i] = ViewRow(row)
		}
		writeJSON(w, http.StatusOK, map[string]any{"rows": out})
	})
	mux.HandleFunc("GET /flows", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"flows": a.Flows()})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if tokenAuth != nil && r.URL.Path == "/login" && r.Method == http.MethodPost {
			serveLogin(tokenAuth, w, r)
			return
		}
		if e := adminGuard(auth, r); e != nil {
			if tokenAuth != nil && e.Status == http.StatusUnauthorized && wantsHTML(r) && r.URL.Path == "/" {
				writeLogin(w, http.StatusOK, mountPrefix(r)+"/login", "")
				return
			}
			writeEnvelope(w, e)
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		WriteError(w, ErrInternal.WithCause(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
