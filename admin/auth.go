package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
type tokenAuth struct {
	token   []byte
	revoked *revocations
}

var _ Auth = (*tokenAuth)(nil)

// Token returns an Auth that lets in a request carrying
// "Authorization: Bearer <token>" (the CLI's -token, scripts), or the
// console's session cookie, which the login form of AdminHandler sets after
// checking the token: HttpOnly, SameSite=Strict, Secure when the request came
// over TLS, valid 12 hours. The cookie holds a random session id, its expiry
// and an HMAC keyed by the token, never the token; changing the token ends
// every session. Tokens are compared in constant time. An empty token lets
// nobody in.
//
// Logging out (POST /logout) revokes the session on the server, not only in
// the browser: the same cookie is refused from then on. Handler records the
// logout in the app's store (a row of flow LogoutFlow that lives as long as
// the session would have), so every instance of the app sharing that store
// refuses the cookie, after restarts too; while the store cannot be read, a
// session cookie gets 503 (the bearer token still works). This Auth used on
// its own (Authorize) knows only the logouts of its process, kept in memory
// (at most 10 000 at once; past that, every session open at the time is
// ended, never one let in again). To end every session at once, change the
// token.
//
// Draw the token at random (32 bytes, hex) and keep it like a password.
func Token(token string) Auth {
	return &tokenAuth{token: []byte(token), revoked: newRevocations(maxRevoked)}
}

// Authorize implements Auth.
func (a *tokenAuth) Authorize(r *http.Request) error {
	if e, _, _ := a.check(r, time.Now()); e != nil {
		return e
	}
	return nil
}

// check authorizes r at now. guess names the credential when the refusal is
// a wrong guess at a secret (a wrong token, a forged cookie) that the
// limiter counts; it is empty for a request with no credential or with a
// genuine session that expired or logged out. session is the session id
// when r was let in by its session cookie.
func (a *tokenAuth) check(r *http.Request, now time.Time) (e *oke.Error, guess, session string) {
	if len(a.token) == 0 {
		return oke.Unauthorized("The admin surface has no token configured; nobody may use it."), "", ""
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), a.token) == 1 {
			return nil, "", ""
		}
		return oke.Unauthorized("The admin token is wrong."), "bearer token", ""
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		switch a.validSession(c.Value, now) {
		case sessionValid:
			id, _, _, _ := a.parseSession(c.Value)
			return nil, "", id
		case sessionForged:
			return oke.Unauthorized("The console session is not valid: log in again."), "session cookie", ""
		}
		return errSessionEnded, "", ""
	}
	return oke.Unauthorized("The admin surface needs the admin token: send Authorization: Bearer <token>, or log in to the console."), "", ""
}

var errSessionEnded = oke.Unauthorized("The console session ended (it expired, or logged out): log in again.")

// sessionOK reports whether r carries a valid console session and no other
// credential: the one request a blocked client is still let through with.
func (a *tokenAuth) sessionOK(r *http.Request, now time.Time) bool {
	if r.Header.Get("Authorization") != "" {
		return false
	}
	c, err := r.Cookie(SessionCookie)
	return err == nil && a.validSession(c.Value, now) == sessionValid
}

// session returns a new session cookie value valid until exp: the expiry, a
// random session id, and a MAC of both keyed by the token.
func (a *tokenAuth) session(exp time.Time) string {
	var id [16]byte
	rand.Read(id[:])
	ts := strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(id[:])
	return ts + "." + a.mac(ts)
}

func (a *tokenAuth) mac(ts string) string {
	m := hmac.New(sha256.New, a.token)
	m.Write([]byte("oke admin session v2\x00" + ts))
	return hex.EncodeToString(m.Sum(nil))
}

// sessionState is what validSession finds in a cookie.
type sessionState int

const (
	sessionValid  sessionState = iota
	sessionForged              // not signed by the token: a guess
	sessionEnded               // signed, but expired or revoked (logged out)
)

// parseSession reads a cookie value: its session id and expiry, and
// whether it has the shape of one of our sessions (shaped) and its MAC is
// the token's (ok).
func (a *tokenAuth) parseSession(v string) (id string, exp int64, shaped, ok bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return "", 0, false, false
	}
	ts, sum := v[:i], v[i+1:]
	exps, id, found := strings.Cut(ts, ".")
	exp, err := strconv.ParseInt(exps, 10, 64)
	if !found || len(id) != 32 || len(sum) != 64 || err != nil {
		return "", 0, false, false
	}
	return id, exp, true, hmac.Equal([]byte(sum), []byte(a.mac(ts)))
}

// validSession judges a session cookie at now. Only a cookie shaped like
// ours whose MAC is wrong is forged (a guess the limiter counts): any other
// malformed value, such as a session of an older version, can never be let
// in, so it is merely ended.
func (a *tokenAuth) validSession(v string, now time.Time) sessionState {
	id, exp, shaped, ok := a.parseSession(v)
	switch {
	case !shaped:
		return sessionEnded
	case !ok:
		return sessionForged
	case now.Unix() >= exp || exp > now.Add(sessionTTL+time.Minute).Unix():
		return sessionEnded
	case a.revoked.has(id, exp):
		return sessionEnded
	}
	return sessionValid
}

// logout revokes the session of cookie value v, when it is one of ours,
// in this process, and returns its id and expiry.
func (a *tokenAuth) logout(v string, now time.Time) (id string, exp time.Time, ok bool) {
	id, e, _, ok := a.parseSession(v)
	if !ok || now.Unix() >= e {
		return "", time.Time{}, false
	}
	a.revoked.add(id, e, now)
	return id, time.Unix(e, 0), true
}

// maxRevoked is how many logged-out sessions Token remembers at once.
const maxRevoked = 10000

// revocations is the set of logged-out sessions not yet expired, bounded:
// when it is full of live ones, every session expiring up to a session's
// length from now (every session open now) is revoked at once instead, and
// the set starts empty — it never forgets a revocation by letting its
// session in again.
type revocations struct {
	mu     sync.Mutex
	max    int
	m      map[string]int64 // session id → its expiry (Unix seconds)
	before int64            // every session expiring at or before this is revoked
}

func newRevocations(max int) *revocations {
	return &revocations{max: max, m: map[string]int64{}}
}

func (s *revocations) add(id string, exp int64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for k, e := range s.m {
			if e <= now.Unix() || e <= s.before {
				delete(s.m, k)
			}
		}
	}
	if len(s.m) >= s.max {
		s.before = max(s.before, now.Add(sessionTTL).Unix())
		clear(s.m)
		return
	}
	s.m[id] = exp
}

func (s *revocations) has(id string, exp int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if exp <= s.before {
		return true
	}
	_, ok := s.m[id]
	return ok
}

// guard is what every admin request passes: authorization, then, for
// a state-changing request, the same-origin check (CSRF). guess is set when
// the refusal was a wrong guess at a credential (see tokenAuth.check; for
// another Auth, any 401 of a request that sent an Authorization header).
func guard(auth Auth, r *http.Request, now time.Time, revoked *storeRevocations) (e *oke.Error, guess string) {
	if auth == nil {
		return &oke.Error{Status: http.StatusServiceUnavailable, Code: "AuthMissing",
			Message: "The admin surface has no authentication configured (oke.Config.Auth); it serves nothing until it has."}, ""
	}
	if ta, ok := auth.(*tokenAuth); ok {
		e, guess, session := ta.check(r, now)
		if e != nil {
			return e, guess
		}
		if session != "" && revoked != nil {
			switch gone, err := revoked.has(r.Context(), session); {
			case err != nil:
				return oke.ErrStoreUnavailable.WithMessage("The console session could not be checked against the logouts in the store; retry, or use the bearer token.").WithCause(err), ""
			case gone:
				return errSessionEnded, ""
			}
		}
	} else if err := auth.Authorize(r); err != nil {
		if !errors.As(err, &e) {
			e = oke.ErrUnauthorized.WithCause(err)
		}
		if e.Status == http.StatusUnauthorized && r.Header.Get("Authorization") != "" {
			guess = "authorization header"
		}
		return e, guess
	}
	if stateChanging(r.Method) && !sameOrigin(r) {
		return oke.Forbidden("A state-changing admin request must come from the app's own origin."), ""
	}
	return nil, ""
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
// anything else with JSON. A wrong token calls failed, which counts it and
// may block the client (the answer is still this attempt's 401).
func serveLogin(auth *tokenAuth, w http.ResponseWriter, r *http.Request, now time.Time, failed func()) {
	prefix := mountPrefix(r)
	if !sameOrigin(r) {
		oke.WriteError(w, oke.Forbidden("Log in from the app's own origin."))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := r.PostFormValue("token")
	if len(auth.token) == 0 || subtle.ConstantTimeCompare([]byte(tok), auth.token) != 1 {
		if len(auth.token) != 0 {
			failed()
		}
		if browserForm(r) {
			writeLogin(w, http.StatusUnauthorized, prefix+"/login", "That is not the admin token.")
			return
		}
		oke.WriteError(w, oke.Unauthorized("That is not the admin token."))
		return
	}
	exp := now.Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: auth.session(exp), Path: prefix + "/",
		Expires: exp, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
}

// browserForm reports whether r is a browser's form post or page request,
// answered with the login page rather than JSON.
func browserForm(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html") || r.Header.Get("Content-Type") == "application/x-www-form-urlencoded"
}

// serveLogout ends the console session: it revokes the session on the
// server — in this process, and in the app's store when revoked is set, so
// that every instance sharing the store refuses it (see Handler) — and
// clears the cookie in the browser.
func serveLogout(auth *tokenAuth, now func() time.Time, revoked *storeRevocations) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		prefix := mountPrefix(r)
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: prefix + "/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		if c, err := r.Cookie(SessionCookie); err == nil {
			if id, exp, ok := auth.logout(c.Value, now()); ok && revoked != nil {
				if err := revoked.add(r.Context(), id, exp, now()); err != nil {
					oke.WriteError(w, oke.ErrStoreUnavailable.WithMessage("Logged out on this instance only: the store did not record the logout, so other instances of the app may still take this session's cookie until it expires. Log out again.").WithCause(err))
					return
				}
			}
		}
		http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
	}
}
