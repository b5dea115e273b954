package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/okengine/oke/admin"
)

// TestAdminLogoutEndsTheSession: issue 21 defect 7 — after POST /logout the
// session cookie no longer works, even sent again by a client that kept a
// copy (the browser's jar drops it; a stolen copy must die too): 401 for the
// API, the login form for the console. Logout stays CSRF-safe: a
// cross-site logout is 403 and ends nothing.
func TestAdminLogoutEndsTheSession(t *testing.T) {
	_, srv := adminServer(t, admin.Token(adminTok))
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ := adminReq{"POST", "/_oke/login", []string{"Content-Type", "application/x-www-form-urlencoded"}, "token=" + url.QueryEscape(adminTok)}.send(t, c, srv.URL)
	var cookie string
	for _, ck := range resp.Cookies() {
		if ck.Name == admin.SessionCookie {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	if cookie == "" {
		t.Fatalf("login set no session cookie: %d %v", resp.StatusCode, resp.Header)
	}
	withCookie := func(method, path string, hdr ...string) (*http.Response, string) {
		return adminReq{method, path, append([]string{"Cookie", cookie}, hdr...), ""}.send(t, c, srv.URL)
	}
	if resp, body := withCookie("GET", "/_oke/runs"); resp.StatusCode != 200 {
		t.Fatalf("with the session: %d %s", resp.StatusCode, body)
	}
	if resp, body := withCookie("POST", "/_oke/logout", "Origin", "http://evil.example"); resp.StatusCode != 403 {
		t.Fatalf("a cross-site logout: %d %s", resp.StatusCode, body)
	}
	if resp, body := withCookie("GET", "/_oke/runs"); resp.StatusCode != 200 {
		t.Fatalf("a refused cross-site logout ended the session: %d %s", resp.StatusCode, body)
	}
	u, _ := url.Parse(srv.URL)
	if resp, body := withCookie("POST", "/_oke/logout", "Origin", "http://"+u.Host); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d %s", resp.StatusCode, body)
	}
	resp, body := withCookie("GET", "/_oke/runs")
	if resp.StatusCode != 401 || envelopeCode(t, body) != "Unauthorized" {
		t.Fatalf("the logged-out cookie still works: %d %s", resp.StatusCode, body)
	}
	if resp, body := withCookie("GET", "/_oke/", "Accept", "text/html"); !strings.Contains(body, `data-action="login"`) {
		t.Fatalf("the console with the logged-out cookie is not the login form: %d %s", resp.StatusCode, body)
	}
	// A new login works.
	if resp, _ := (adminReq{"POST", "/_oke/login", []string{"Content-Type", "application/x-www-form-urlencoded"}, "token=" + url.QueryEscape(adminTok)}).send(t, c, srv.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login after logout: %d", resp.StatusCode)
	}
}
