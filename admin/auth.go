package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/okengine/oke"
)

// Auth authorizes requests to the admin surface (Handler: the JSON admin
// API, and the console built on it). Authorize returns nil to let the
// request in, or an error to refuse it: an *oke.Error is sent as is (use
// Unauthorized for 401, Forbidden for 403); any other error is a 401.
//
// The admin surface shows stored responses, which may hold personal data,
// and changes runs (replays them), so it needs an Auth: Token for
// a shared secret, an AuthFunc for your own SSO check, or —
// explicitly, and by that name — InsecureNoAuth.
type Auth interface {
	Authorize(r *http.Request) error
}

// AuthFunc is an Auth written as a function.
type AuthFunc func(r *http.Request) error

// Authorize implements Auth.
func (f AuthFunc) Authorize(r *http.Request) error { return f(r) }

// InsecureNoAuth lets every request into the admin surface. Use it only
// where something in front of the app already authenticates every request
// (a private network is not that); AdminHandler refuses to serve without an
// Auth, so opting out has to be written down.
var InsecureNoAuth Auth = AuthFunc(func(*http.Request) error { return nil })

// SessionCookie is the name of the console's session cookie, set by the
// login form of AdminHandler when Token is the app's Auth.
const SessionCookie = "oke_admin"

// sessionTTL is how long a console session lasts.
const sessionTTL = 12 * time.Hour

// tokenAuth is the Auth made by Token; AdminHandler finds it
// by type assertion to offer the login form.
type tokenAuth struct{ token []byte }

var _ Auth = (*tokenAuth)(nil)

// Token returns an Auth that lets in a request carrying
// "Authorization: Bearer <token>" (the CLI's -token, scripts), or the
// console's session cookie, which the login form of AdminHandler sets after
// checking the token: HttpOnly, SameSite=Strict, Secure when the request came
// over TLS, valid 12 hours. The cookie holds an expiry and an HMAC keyed by
// the token, never the token; changing the token ends every session. Tokens
// are compared in constant time. An empty token lets nobody in.
//
// Draw the token at random (32 bytes, hex) and keep it like a password.
func Token(token string) Auth {
	return &tokenAuth{token: []byte(token)}
}

// Authorize implements Auth.
func (a *tokenAuth) Authorize(r *http.Request) error {
	if len(a.token) == 0 {
		return oke.Unauthorized("The admin surface has no token configured; nobody may use it.")
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), a.token) == 1 {
			return nil
		}
		return oke.Unauthorized("The admin token is wrong.")
	}
	if c, err := r.Cookie(SessionCookie); err == nil && a.validSession(c.Value, time.Now()) {
		return nil
	}
	return oke.Unauthorized("The admin surface needs the admin token: send Authorization: Bearer <token>, or log in to the console.")
}

// session returns a session cookie value valid until exp: the expiry and a
// MAC of it keyed by the token.
func (a *tokenAuth) session(exp time.Time) string {
	ts := strconv.FormatInt(exp.Unix(), 10)
	return ts + "." + a.mac(ts)
}

func (a *tokenAuth) mac(ts string) string {
	m := hmac.New(sha256.New, a.token)
	m.Write([]byte("oke admin session v1\x00" + ts))
	return hex.EncodeToString(m.Sum(nil))
}

func (a *tokenAuth) validSession(v string, now time.Time) bool {
	ts, sum, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Unix() >= exp || exp > now.Add(sessionTTL+time.Minute).Unix() {
		return false
	}
	return hmac.Equal([]byte(sum), []byte(a.mac(ts)))
}

// guard is what every admin request passes: authorization, then, for
// a state-changing request, the same-origin check (CSRF).
func guard(auth Auth, r *http.Request) *oke.Error {
	if auth == nil {
		return &oke.Error{Status: http.StatusServiceUnavailable, Code: "AuthMissing",
			Message: "The admin surface has no authentication configured (oke.Config.Auth); it serves nothing until it has."}
	}
	if err := auth.Authorize(r); err != nil {
		var e *oke.Error
		if !errors.As(err, &e) {
			e = oke.ErrUnauthorized.WithCause(err)
		}
		return e
	}
	if stateChanging(r.Method) && !sameOrigin(r) {
		return oke.Forbidden("A state-changing admin request must come from the app's own origin.")
	}
	return nil
}

// stateChanging reports whether method may change state.
func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// sameOrigin reports whether a request is not a cross-site one: its Origin,
// when present, names the host the request was sent to, and its
// Sec-Fetch-Site, when present, says same-origin or none (typed by the user).
// Requests without either (curl, the CLI, Go clients) are not from a browser
// page and pass; they still need the token.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" and other opaque origins
	}
	return strings.EqualFold(u.Host, r.Host)
}

// mountPrefix is the path under which the admin handler is mounted (e.g.
// "/_oke" behind http.StripPrefix), found by comparing the request's
// original path with the path it sees.
func mountPrefix(r *http.Request) string {
	orig := r.RequestURI
	if i := strings.IndexAny(orig, "?#"); i >= 0 {
		orig = orig[:i]
	}
	if u, err := url.ParseRequestURI(orig); err == nil {
		orig = u.Path
	}
	p := strings.TrimSuffix(orig, r.URL.Path)
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	return strings.TrimSuffix(p, "/")
}

// wantsHTML reports whether a request is a browser's asking for a page.
func wantsHTML(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html")
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>oke · log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:15px system-ui,sans-serif;max-width:26rem;margin:12vh auto;padding:0 1rem;color:#1b1f24}
input,button{font:inherit;padding:.5rem .6rem;width:100%;box-sizing:border-box;margin:.3rem 0}
button{background:#1b1f24;color:#fff;border:0;border-radius:4px;cursor:pointer}
.err{color:#b3261e}</style></head>
<body><h1>oke</h1><p>This is the admin console of an oke app. Enter its admin token
(the demo writes the one it draws to <code>.oke/admin-token</code>).</p>
{{if .Error}}<p class="err" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}">
<label>Admin token <input type="password" name="token" autocomplete="current-password" required data-input="admin-token" autofocus></label>
<button type="submit" data-action="login">Log in</button>
</form></body></html>
`))

// writeLogin writes the login form.
func writeLogin(w http.ResponseWriter, status int, action, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	loginPage.Execute(w, struct{ Action, Error string }{action, msg})
}

// serveLogin handles POST /login: it checks the token from the form and sets
// the session cookie. It answers a browser with a redirect to the console,
// anything else with JSON.
func serveLogin(auth *tokenAuth, w http.ResponseWriter, r *http.Request) {
	prefix := mountPrefix(r)
	if !sameOrigin(r) {
		oke.WriteError(w, oke.Forbidden("Log in from the app's own origin."))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := r.PostFormValue("token")
	if len(auth.token) == 0 || subtle.ConstantTimeCompare([]byte(tok), auth.token) != 1 {
		if strings.Contains(r.Header.Get("Accept"), "text/html") || r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			writeLogin(w, http.StatusUnauthorized, prefix+"/login", "That is not the admin token.")
			return
		}
		oke.WriteError(w, oke.Unauthorized("That is not the admin token."))
		return
	}
	exp := time.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: auth.session(exp), Path: prefix + "/",
		Expires: exp, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
}

// serveLogout ends the console session.
func serveLogout(w http.ResponseWriter, r *http.Request) {
	prefix := mountPrefix(r)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: prefix + "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
}
