package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
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

// TestAdminLogoutReachesEveryInstance: two instances of an app sharing one
// store (each its own process memory, its own Handler, the same token): a
// logout on one is refused on the other too, because the logout is
// recorded in the store (a row of flow admin.LogoutFlow, living as long as
// the session would have). On the memory driver (one store, two apps) and
// on Postgres (two pools, as two processes would have).
func TestAdminLogoutReachesEveryInstance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		shared := memory.New()
		logoutOnEveryInstance(t, shared, shared)
	})
	t.Run("postgres", func(t *testing.T) {
		_, dsn := pgtest.NewDatabase(t, "oke_admin_logout")
		c := pgtest.Charge(t, 2*pgtest.DriverConns(1))
		var ds [2]driver.Driver
		for i := range ds {
			d, err := postgres.Open(context.Background(), c.DSN(pgtest.WithPoolSize(dsn, 1)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if err := d.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			ds[i] = d
		}
		logoutOnEveryInstance(t, ds[0], ds[1])
	})
}

func logoutOnEveryInstance(t *testing.T, d0, d1 driver.Driver) {
	var srvs [2]*httptest.Server
	for i, d := range []driver.Driver{d0, d1} {
		app := oke.New(oke.Config{Driver: d, SweepInterval: -1, Logger: quiet()})
		app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok))))
		srvs[i] = httptest.NewServer(app)
		t.Cleanup(func() {
			srvs[i].Close()
			app.Close(context.Background())
		})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ := adminReq{"POST", "/_oke/login", []string{"Content-Type", "application/x-www-form-urlencoded"}, "token=" + url.QueryEscape(adminTok)}.send(t, c, srvs[0].URL)
	var cookie string
	for _, ck := range resp.Cookies() {
		if ck.Name == admin.SessionCookie {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	on := func(i int, method, path string) int {
		resp, _ := adminReq{method, path, []string{"Cookie", cookie}, ""}.send(t, c, srvs[i].URL)
		return resp.StatusCode
	}
	if a, b := on(0, "GET", "/_oke/runs"), on(1, "GET", "/_oke/runs"); a != 200 || b != 200 {
		t.Fatalf("a session made on instance 0: %d there, %d on instance 1; want 200 on both", a, b)
	}
	if got := on(0, "POST", "/_oke/logout"); got != http.StatusSeeOther {
		t.Fatalf("logout on instance 0: %d", got)
	}
	if a, b := on(0, "GET", "/_oke/runs"), on(1, "GET", "/_oke/runs"); a != 401 || b != 401 {
		t.Fatalf("after logging out on instance 0: %d there, %d on instance 1; want 401 on both", a, b)
	}
	rows, err := d1.List(context.Background(), driver.Key{}, 0)
	if err != nil || len(rows) != 1 || rows[0].Key.Flow != admin.LogoutFlow || rows[0].State != driver.Completed ||
		rows[0].ExpiresAt.Before(time.Now().Add(11*time.Hour)) {
		t.Fatalf("the store holds %+v %v, want one completed %s row living about 12 h", rows, err, admin.LogoutFlow)
	}
}
