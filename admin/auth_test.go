package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func do(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

const adminTok = "0123456789abcdef0123456789abcdef"

// adminServer serves an app with one durable flow and its admin handler at
// /_oke/, guarded by auth.
func adminServer(t *testing.T, auth admin.Auth) (*oke.App, *httptest.Server) {
	t.Helper()
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	app.Handle(oke.POST("/d"), oke.NewFlow("adm.run", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
			return oke.OK("done"), nil
		}))
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, auth)))
	srv := httptest.NewServer(app)
	t.Cleanup(func() {
		srv.Close()
		app.Close(context.Background())
	})
	return app, srv
}

type adminReq struct {
	method, path string
	hdr          []string
	body         string
}

func (r adminReq) send(t *testing.T, c *http.Client, base string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(r.hdr); i += 2 {
		req.Header.Set(r.hdr[i], r.hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func envelopeCode(t *testing.T, body string) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("not an error envelope: %q", body)
	}
	return env.Error.Code
}

// TestAdminNeedsTheToken: DESIGN.md 6.1 — every route under /_oke/ needs the
// admin token; without it, 401 with the error envelope, whatever the route
// (known or not) and method.
func TestAdminNeedsTheToken(t *testing.T) {
	_, srv := adminServer(t, admin.Token(adminTok))
	bearer := []string{"Authorization", "Bearer " + adminTok}
	for _, tc := range []struct {
		name   string
		req    adminReq
		status int
		code   string
	}{
		{"runs without the token", adminReq{"GET", "/_oke/runs", nil, ""}, 401, "Unauthorized"},
		{"one run without the token", adminReq{"GET", "/_oke/runs/run_x", nil, ""}, 401, "Unauthorized"},
		{"idempotency rows without the token", adminReq{"GET", "/_oke/idempotency", nil, ""}, 401, "Unauthorized"},
		{"flows without the token", adminReq{"GET", "/_oke/flows", nil, ""}, 401, "Unauthorized"},
		{"a replay without the token", adminReq{"POST", "/_oke/runs/run_x/replay", []string{"Content-Type", "text/plain"}, ""}, 401, "Unauthorized"},
		{"an unknown admin route without the token", adminReq{"GET", "/_oke/nope", nil, ""}, 401, "Unauthorized"},
		{"the root as JSON without the token", adminReq{"GET", "/_oke/", nil, ""}, 401, "Unauthorized"},
		{"a wrong token", adminReq{"GET", "/_oke/runs", []string{"Authorization", "Bearer wrong"}, ""}, 401, "Unauthorized"},
		{"another scheme", adminReq{"GET", "/_oke/runs", []string{"Authorization", "Basic " + adminTok}, ""}, 401, "Unauthorized"},
		{"a forged session cookie", adminReq{"GET", "/_oke/runs", []string{"Cookie", admin.SessionCookie + "=99999999999.abc"}, ""}, 401, "Unauthorized"},
		{"runs with the token", adminReq{"GET", "/_oke/runs", bearer, ""}, 200, ""},
		{"an unknown admin route with the token is a 404 envelope", adminReq{"GET", "/_oke/nope", bearer, ""}, 404, "NotFound"},
		{"a wrong method with the token is a 405 envelope", adminReq{"DELETE", "/_oke/runs", bearer, ""}, 405, "MethodNotAllowed"},
		{"a missing run with the token is a 404 envelope", adminReq{"GET", "/_oke/runs/run_x", bearer, ""}, 404, "NotFound"},
		// CSRF: a state-changing request from another site is refused, token or not.
		{"a replay from a foreign Origin", adminReq{"POST", "/_oke/runs/run_x/replay", append([]string{"Origin", "http://evil.example", "Content-Type", "text/plain"}, bearer...), ""}, 403, "Forbidden"},
		{"a replay from an opaque Origin", adminReq{"POST", "/_oke/runs/run_x/replay", append([]string{"Origin", "null"}, bearer...), ""}, 403, "Forbidden"},
		{"a replay a browser marks cross-site", adminReq{"POST", "/_oke/runs/run_x/replay", append([]string{"Sec-Fetch-Site", "cross-site"}, bearer...), ""}, 403, "Forbidden"},
		{"a replay a browser marks same-site (another subdomain)", adminReq{"POST", "/_oke/runs/run_x/replay", append([]string{"Sec-Fetch-Site", "same-site"}, bearer...), ""}, 403, "Forbidden"},
		{"a read from a foreign Origin is not state-changing", adminReq{"GET", "/_oke/flows", append([]string{"Origin", "http://evil.example"}, bearer...), ""}, 200, ""},
		{"a login from a foreign Origin", adminReq{"POST", "/_oke/login", []string{"Origin", "http://evil.example", "Content-Type", "application/x-www-form-urlencoded"}, "token=" + adminTok}, 403, "Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tc.req.send(t, srv.Client(), srv.URL)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.code != "" {
				if got := envelopeCode(t, body); got != tc.code {
					t.Fatalf("code %s, want %s", got, tc.code)
				}
			}
		})
	}
	// A same-origin replay with the token goes through (to the 404 of a
	// missing run).
	u, _ := url.Parse(srv.URL)
	resp, body := adminReq{"POST", "/_oke/runs/run_x/replay", append([]string{"Origin", "http://" + u.Host}, bearer...), ""}.send(t, srv.Client(), srv.URL)
	if resp.StatusCode != 404 || envelopeCode(t, body) != "NotFound" {
		t.Fatalf("same-origin replay: %d %s", resp.StatusCode, body)
	}
}

// TestAdminConsoleLogin: a browser at /_oke/ without a session gets the login
// form; the right token sets an HttpOnly, SameSite=Strict session cookie
// scoped to /_oke/ that then lets the browser in; a wrong one does not.
func TestAdminConsoleLogin(t *testing.T) {
	_, srv := adminServer(t, admin.Token(adminTok))
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	html := []string{"Accept", "text/html,application/xhtml+xml"}

	resp, body := adminReq{"GET", "/_oke/", html, ""}.send(t, c, srv.URL)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `data-input="admin-token"`) || !strings.Contains(body, `data-action="login"`) || !strings.Contains(body, `action="/_oke/login"`) {
		t.Fatalf("login form: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	if resp, body := (adminReq{"POST", "/_oke/login", form, "token=wrong"}).send(t, c, srv.URL); resp.StatusCode != 401 || !strings.Contains(body, "not the admin token") {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, body)
	}
	if resp, _ := (adminReq{"GET", "/_oke/runs", nil, ""}).send(t, c, srv.URL); resp.StatusCode != 401 {
		t.Fatalf("a wrong login let the browser in: %d", resp.StatusCode)
	}

	// Log in (without following the redirect, to see the cookie).
	noRedirect := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ = adminReq{"POST", "/_oke/login", form, "token=" + url.QueryEscape(adminTok)}.send(t, noRedirect, srv.URL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/_oke/" {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Header)
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == admin.SessionCookie {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/_oke/" || session.Secure {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/_oke/ (not Secure over plain HTTP)", session)
	}
	if strings.Contains(session.Value, adminTok) {
		t.Fatal("the session cookie holds the token itself")
	}
	if resp, body := (adminReq{"GET", "/_oke/runs", nil, ""}).send(t, c, srv.URL); resp.StatusCode != 200 || !strings.Contains(body, `"runs"`) {
		t.Fatalf("with the session: %d %s", resp.StatusCode, body)
	}
	if resp, body := (adminReq{"GET", "/_oke/", html, ""}).send(t, c, srv.URL); resp.StatusCode != 200 || !strings.Contains(body, `data-nav="runs"`) {
		t.Fatalf("console index with the session: %d %s", resp.StatusCode, body)
	}
	// Log out: the cookie is gone.
	if resp, _ := (adminReq{"POST", "/_oke/logout", nil, ""}).send(t, noRedirect, srv.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := (adminReq{"GET", "/_oke/runs", nil, ""}).send(t, c, srv.URL); resp.StatusCode != 401 {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
}

// TestAdminSessionCookieIsSecureOverTLS: served over TLS, the session cookie
// is Secure.
func TestAdminSessionCookieIsSecureOverTLS(t *testing.T) {
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok))))
	srv := httptest.NewTLSServer(app)
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, _ := adminReq{"POST", "/_oke/login", []string{"Content-Type", "application/x-www-form-urlencoded"}, "token=" + adminTok}.send(t, c, srv.URL)
	for _, ck := range resp.Cookies() {
		if ck.Name == admin.SessionCookie && ck.Secure {
			return
		}
	}
	t.Fatalf("no Secure session cookie over TLS: %v", resp.Header)
}

// TestAdminRefusesToServeWithoutAuth: the admin surface is never served
// without a gate — Handler panics on a nil Auth, naming the fix — and
// InsecureNoAuth opts out, by name.
func TestAdminRefusesToServeWithoutAuth(t *testing.T) {
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	func() {
		defer func() {
			p := recover()
			msg, _ := p.(string)
			if !strings.Contains(msg, "admin.Token") || !strings.Contains(msg, "admin.InsecureNoAuth") {
				t.Fatalf("Handler(app, nil) did not panic naming the fix: %v", p)
			}
		}()
		admin.Handler(app, nil)
	}()
	h := admin.Handler(app, admin.InsecureNoAuth)
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := do(h, "GET", "/flows", ""); w.Code != 200 {
		t.Fatalf("InsecureNoAuth: %d %s", w.Code, w.Body)
	}
}

// TestAdminAuthFunc: an app's own check decides; its *Error is sent as is.
func TestAdminAuthFunc(t *testing.T) {
	auth := admin.AuthFunc(func(r *http.Request) error {
		switch r.Header.Get("X-Role") {
		case "admin":
			return nil
		case "user":
			return oke.Forbidden("Admins only.")
		}
		return errors.New("no SSO session")
	})
	_, srv := adminServer(t, auth)
	for role, want := range map[string]int{"admin": 200, "user": 403, "": 401} {
		resp, body := adminReq{"GET", "/_oke/flows", []string{"X-Role", role}, ""}.send(t, srv.Client(), srv.URL)
		if resp.StatusCode != want {
			t.Fatalf("role %q: %d %s, want %d", role, resp.StatusCode, body, want)
		}
		if want != 200 {
			envelopeCode(t, body)
		}
	}
}
