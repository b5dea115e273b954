package admin_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
)

// syncBuffer is a log sink the handler writes from request goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// fakeClock is a clock a test moves on by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// limitEnv is an admin handler with the token, a fake clock and a captured
// log, called directly so that each request can come from its own address.
type limitEnv struct {
	t     *testing.T
	h     http.Handler
	clock *fakeClock
	log   *syncBuffer
}

func setupLimits(t *testing.T) *limitEnv {
	t.Helper()
	e := &limitEnv{t: t, clock: &fakeClock{t: time.Now()}, log: &syncBuffer{}}
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	logger := slog.New(slog.NewTextHandler(e.log, nil))
	e.h = http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok), admin.WithLogger(logger), admin.WithClock(e.clock.now)))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// send makes one request from the address from.
func (e *limitEnv) send(from, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = from
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func (e *limitEnv) bearer(from, tok string) *httptest.ResponseRecorder {
	return e.send(from, "GET", "/_oke/runs", "", "Authorization", "Bearer "+tok)
}

func (e *limitEnv) want(w *httptest.ResponseRecorder, status int, retryAfter, what string) {
	e.t.Helper()
	if w.Code != status || w.Header().Get("Retry-After") != retryAfter {
		e.t.Fatalf("%s: %d Retry-After %q %s, want %d Retry-After %q", what, w.Code, w.Header().Get("Retry-After"), w.Body, status, retryAfter)
	}
}

// TestAdminBruteForceIsLimited: issue 21 defect 6 — wrong bearer tokens from
// one client are 401 up to the threshold, then 429 with Retry-After (even
// the right token is not checked while blocked), growing with each further
// failure; another client is unaffected; every failure is logged with the
// client, never the token; the right token works once Retry-After has
// passed.
func TestAdminBruteForceIsLimited(t *testing.T) {
	e := setupLimits(t)
	const attacker, other = "192.0.2.1:4242", "198.51.100.7:5151"
	const guess = "wrong-guess-d41d8cd98f00b204"

	for i := 1; i <= 5; i++ {
		e.want(e.bearer(attacker, guess), 401, "", "wrong token "+string(rune('0'+i)))
	}
	w := e.bearer(attacker, guess)
	e.want(w, 429, "1", "the 6th wrong token")
	if envelopeCode(t, w.Body.String()) != "TooManyRequests" {
		t.Fatalf("429 without the envelope: %s", w.Body)
	}
	e.want(e.bearer(attacker, adminTok), 429, "1", "the right token while blocked")
	// Another address guesses and works on its own.
	e.want(e.bearer(other, adminTok), 200, "", "another client's right token")
	e.want(e.bearer(other, guess), 401, "", "another client's wrong token")
	e.want(e.bearer(other, adminTok), 200, "", "another client after one failure")

	log := e.log.String()
	if strings.Contains(log, guess) || strings.Contains(log, adminTok) {
		t.Fatalf("the log shows a tried token:\n%s", log)
	}
	if n := strings.Count(log, "client=192.0.2.1 credential=\"bearer token\""); n != 5 {
		t.Fatalf("%d failures of the attacker logged, want 5:\n%s", n, log)
	}
	if !strings.Contains(log, "failures=5 blockedFor=1s") || !strings.Contains(log, "client=198.51.100.7") {
		t.Fatalf("the log does not say who failed and the block:\n%s", log)
	}

	// After Retry-After the right token works; the next failure blocks for
	// longer (2 s), and the one after that longer again (4 s).
	e.clock.add(time.Second)
	e.want(e.bearer(attacker, adminTok), 200, "", "the right token after Retry-After")
	e.want(e.bearer(attacker, guess), 401, "", "a wrong token after the block")
	e.want(e.bearer(attacker, guess), 429, "2", "blocked again, longer")
	e.clock.add(2 * time.Second)
	e.want(e.bearer(attacker, guess), 401, "", "a wrong token after the second block")
	e.want(e.bearer(attacker, guess), 429, "4", "blocked again, longer still")
	if !strings.Contains(e.log.String(), "refusedWhileBlocked=1") {
		t.Fatalf("the log does not count the requests refused while blocked:\n%s", e.log.String())
	}
}

// TestAdminLoginGuessingIsLimited: wrong tokens in the console's login form
// count too: after the threshold the browser gets the login page with 429
// and Retry-After; a client with a valid session is still let in while its
// address is blocked; the right token logs in once the block has passed.
func TestAdminLoginGuessingIsLimited(t *testing.T) {
	e := setupLimits(t)
	const from = "203.0.113.9:7000"
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}

	// A session made before the guessing (the admin, behind the same NAT).
	w := e.send(from, "POST", "/_oke/login", "token="+url.QueryEscape(adminTok), form...)
	e.want(w, http.StatusSeeOther, "", "login")
	session := w.Result().Cookies()[0]

	for i := 0; i < 5; i++ {
		e.want(e.send(from, "POST", "/_oke/login", "token=guess", form...), 401, "", "a wrong login")
	}
	w = e.send(from, "POST", "/_oke/login", "token="+url.QueryEscape(adminTok), form...)
	e.want(w, 429, "1", "a login while blocked")
	if !strings.Contains(w.Body.String(), `data-input="admin-token"`) || !strings.Contains(w.Body.String(), "try again in 1 s") {
		t.Fatalf("a blocked browser does not get the login page saying when to retry: %s", w.Body)
	}
	e.want(e.send(from, "GET", "/_oke/runs", "", "Cookie", session.Name+"="+session.Value), 200, "", "a valid session while its address is blocked")
	e.want(e.send(from, "GET", "/_oke/runs", "", "Cookie", session.Name+"=99999999999.abc"), 429, "1", "a forged session while blocked")
	if n := strings.Count(e.log.String(), `credential="login form"`); n != 5 {
		t.Fatalf("%d login failures logged, want 5:\n%s", n, e.log.String())
	}

	e.clock.add(time.Second)
	e.want(e.send(from, "POST", "/_oke/login", "token="+url.QueryEscape(adminTok), form...), http.StatusSeeOther, "", "login after Retry-After")
}

// TestAdminCredentiallessRequestsAreNotGuesses: a browser loading the login
// form, or a console tab whose session ended, is not guessing: it never gets
// blocked; a forged session cookie is a guess.
func TestAdminCredentiallessRequestsAreNotGuesses(t *testing.T) {
	e := setupLimits(t)
	const from = "192.0.2.50:1"
	for i := 0; i < 20; i++ {
		e.want(e.send(from, "GET", "/_oke/", "", "Accept", "text/html"), 200, "", "the login form")
		e.want(e.send(from, "GET", "/_oke/runs", ""), 401, "", "no credential")
	}
	// A cookie that is not shaped like a session (an older version's, or
	// garbage) can never be let in, so it is not a guess either.
	for i := 0; i < 20; i++ {
		e.want(e.send(from, "GET", "/_oke/runs", "", "Cookie", admin.SessionCookie+"=1767225600.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), 401, "", "an old-style cookie")
		e.want(e.send(from, "GET", "/_oke/runs", "", "Cookie", admin.SessionCookie+"=garbage"), 401, "", "a garbage cookie")
	}
	e.want(e.bearer(from, adminTok), 200, "", "the right token after many credential-less requests")
	// A cookie shaped like a session but not signed by the token is a
	// guess.
	forged := admin.SessionCookie + "=1767225600." + strings.Repeat("ab", 16) + "." + strings.Repeat("cd", 32)
	for i := 0; i < 5; i++ {
		e.want(e.send(from, "GET", "/_oke/runs", "", "Cookie", forged), 401, "", "a forged session")
	}
	e.want(e.send(from, "GET", "/_oke/runs", "", "Cookie", forged), 429, "1", "a forged session past the threshold")
	if n := strings.Count(e.log.String(), `credential="session cookie"`); n != 5 {
		t.Fatalf("%d forged sessions logged, want 5:\n%s", n, e.log.String())
	}
}
