package app_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

var adminTokenLine = regexp.MustCompile(`(?m)^admin token: in (\S+) `)

// runMain runs the demo's Main with args until the test ends and returns
// its URL and stderr.
func runMain(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		app.Main(ctx, "payments", append([]string{"-addr", "127.0.0.1:0", "-data", t.TempDir()}, args...), &stderr, &stderr)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return waitListening(t, &stderr, done), &stderr
}

// TestDemoAdminToken: DESIGN.md 6.1 — every route under /_oke/ needs the
// admin token: -admin-token, else OKE_ADMIN_TOKEN, else a random one drawn
// at start and written to a file of its own in -data, whose path is logged
// as one line "admin token: in <file> …" (a token is never logged: issue
// 21, 10).
func TestDemoAdminToken(t *testing.T) {
	t.Run("drawn and its file logged when neither is set", func(t *testing.T) {
		t.Setenv("OKE_ADMIN_TOKEN", "")
		url, stderr := runMain(t)
		m := adminTokenLine.FindAllStringSubmatch(stderr.String(), -1)
		if len(m) != 1 {
			t.Fatalf("want one line \"admin token: in <file> …\"; stderr:\n%s", stderr)
		}
		b, err := os.ReadFile(m[0][1])
		token := strings.TrimSpace(string(b))
		if err != nil || len(token) < 16 {
			t.Fatalf("the token file %s: %q %v", m[0][1], b, err)
		}
		do(t, url, "GET", "/_oke/runs", "").want(t, 401, "Unauthorized")
		do(t, url, "GET", "/_oke/idempotency", "", "Authorization", "Bearer wrong").want(t, 401, "Unauthorized")
		do(t, url, "GET", "/_oke/runs", "", "Authorization", "Bearer "+token).want(t, 200, "")
	})
	t.Run("from -admin-token, not logged", func(t *testing.T) {
		t.Setenv("OKE_ADMIN_TOKEN", "from-the-environment-000")
		url, stderr := runMain(t, "-admin-token", "from-the-flag-0000000000")
		if strings.Contains(stderr.String(), "from-the-flag") || adminTokenLine.MatchString(stderr.String()) {
			t.Fatalf("a given token was logged:\n%s", stderr)
		}
		if !strings.Contains(stderr.String(), "prefer -admin-token-file or $OKE_ADMIN_TOKEN") {
			t.Fatalf("no warning that -admin-token shows in ps:\n%s", stderr)
		}
		do(t, url, "GET", "/_oke/flows", "", "Authorization", "Bearer from-the-environment-000").want(t, 401, "Unauthorized")
		do(t, url, "GET", "/_oke/flows", "", "Authorization", "Bearer from-the-flag-0000000000").want(t, 200, "")
	})
	t.Run("from OKE_ADMIN_TOKEN", func(t *testing.T) {
		t.Setenv("OKE_ADMIN_TOKEN", "from-the-environment-000")
		url, stderr := runMain(t)
		if adminTokenLine.MatchString(stderr.String()) {
			t.Fatalf("a given token was logged:\n%s", stderr)
		}
		do(t, url, "GET", "/_oke/flows", "", "Authorization", "Bearer from-the-environment-000").want(t, 200, "")
	})
	t.Run("a cross-site replay is refused", func(t *testing.T) {
		url, _ := runMain(t, "-admin-token", "from-the-flag-0000000000")
		do(t, url, "POST", "/_oke/runs/run_x/replay", "", "Authorization", "Bearer from-the-flag-0000000000",
			"Origin", "http://evil.example", "Content-Type", "text/plain").want(t, 403, "Forbidden")
	})
	t.Run("a browser gets the login form", func(t *testing.T) {
		url, _ := runMain(t, "-admin-token", "from-the-flag-0000000000")
		r := do(t, url, "GET", "/_oke/", "", "Accept", "text/html")
		if r.Status != 200 || !strings.Contains(string(r.Body), `data-input="admin-token"`) {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
}
