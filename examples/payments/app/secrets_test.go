package app_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

// issue 21 (10): no log line ever shows a secret. A drawn admin token is
// written to a file readable by the owner only and the log names the file;
// a DSN's password shows in no log line and no error.
func TestNoSecretInTheLogs(t *testing.T) {
	const pw = "pw-s3cr3t-0123456789"
	t.Run("a drawn admin token is written to a 0600 file, not logged", func(t *testing.T) {
		t.Setenv("OKE_ADMIN_TOKEN", "")
		url, stderr := runMain(t)
		path := filepath.Join(dataDirOf(t, stderr), app.TokenFileName)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("the drawn token's file: %v; stderr:\n%s", err, stderr)
		}
		token := strings.TrimSuffix(string(b), "\n")
		if len(token) < 16 || strings.Contains(stderr.String(), token) {
			t.Fatalf("token %q; the log shows it or is wrong:\n%s", token, stderr)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the token file's mode: %v %v, want 0600", fi.Mode(), err)
		}
		do(t, url, "GET", "/_oke/runs", "", "Authorization", "Bearer "+token).want(t, 200, "")
	})

	t.Run("a DSN's password is in no log line (Run on Postgres, logging at debug)", func(t *testing.T) {
		u, err := url.Parse(procDSN(t, newDatabase(t, procConns)))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), pw) // the test server trusts: any password is let in
		cfg := app.DefaultConfig()
		cfg.Addr, cfg.DataDir, cfg.Postgres, cfg.AdminToken = "127.0.0.1:0", t.TempDir(), u.String(), ""
		var out syncBuffer
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var runErr error
		go func() { defer close(done); runErr = app.Run(ctx, cfg, &out) }()
		base := waitListening(t, &out, done)
		do(t, base, "POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", newKey()).want(t, 201, "")
		do(t, base, "GET", "/healthz", "").want(t, 200, "")
		cancel()
		<-done
		if runErr != nil {
			t.Fatalf("Run: %v", runErr)
		}
		if strings.Contains(out.String(), pw) || !strings.Contains(out.String(), "admin token: in ") {
			t.Fatalf("the log:\n%s", out.String())
		}
		if b, err := os.ReadFile(filepath.Join(cfg.DataDir, app.TokenFileName)); err != nil || strings.Contains(out.String(), strings.TrimSpace(string(b))) {
			t.Fatalf("the drawn token is logged, or not in its file (%v):\n%s", err, out.String())
		}
	})

	for _, dsn := range []string{
		"postgres://u:" + pw + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=5",
		"postgres://u:" + pw + "@127.0.0.1:notaport/x",
		"postgres://u:" + pw + "@127.0.0.1:1/x?sslmode=bogus",
		"host=127.0.0.1 port=1 user=u password=" + pw + " dbname=x connect_timeout=5 sslmode=disable",
	} {
		t.Run("a failing DSN's error does not show its password", func(t *testing.T) {
			var stderr bytes.Buffer
			err := app.Main(context.Background(), "payments", []string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-postgres", dsn}, io.Discard, &stderr)
			if app.Exit(&stderr, "payments", err) != 1 || strings.Contains(stderr.String(), pw) {
				t.Fatalf("err %v; stderr:\n%s", err, stderr.String())
			}
		})
	}
}

var regexpDataDir = regexp.MustCompile(`driver \w+, data (\S+?),`)

// dataDirOf returns the -data folder the demo runMain started says it uses.
func dataDirOf(t *testing.T, stderr *syncBuffer) string {
	t.Helper()
	m := regexpDataDir.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no data folder in the log:\n%s", stderr)
	}
	return m[1]
}

// DESIGN.md 11: -admin-token-file FILE, which wins over -admin-token and
// $OKE_ADMIN_TOKEN (a token in a file does not show in ps); a missing,
// empty or many-line file fails at start, naming the flag.
func TestAdminTokenFile(t *testing.T) {
	t.Setenv("OKE_ADMIN_TOKEN", "from-the-environment-000")
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("it wins over -admin-token and the environment; its newline is dropped", func(t *testing.T) {
		url, stderr := runMain(t, "-admin-token-file", write("token", "from-the-file-0000000000\n", 0o600), "-admin-token", "from-the-flag-0000000000")
		for _, other := range []string{"from-the-flag-0000000000", "from-the-environment-000"} {
			do(t, url, "GET", "/_oke/flows", "", "Authorization", "Bearer "+other).want(t, 401, "Unauthorized")
		}
		do(t, url, "GET", "/_oke/flows", "", "Authorization", "Bearer from-the-file-0000000000").want(t, 200, "")
		if s := stderr.String(); strings.Contains(s, "from-the-file") || strings.Contains(s, "admin token:") || strings.Contains(s, "readable by every user") {
			t.Fatalf("stderr:\n%s", s)
		}
	})

	t.Run("a file every user may read is used, with a warning", func(t *testing.T) {
		p := write("open-token", "from-the-file-0000000000\r\n", 0o644)
		if err := os.Chmod(p, 0o644); err != nil { // past the umask
			t.Fatal(err)
		}
		url, stderr := runMain(t, "-admin-token-file", p)
		do(t, url, "GET", "/_oke/flows", "", "Authorization", "Bearer from-the-file-0000000000").want(t, 200, "")
		if !strings.Contains(stderr.String(), "readable by every user") {
			t.Fatalf("no warning; stderr:\n%s", stderr)
		}
	})

	for _, tc := range []struct{ name, path, want string }{
		{"a missing file", filepath.Join(dir, "nope"), "no such file"},
		{"an empty file", write("empty", "\n", 0o600), "is empty"},
		{"two lines", write("two", "a-token-0000000000\nanother\n", 0o600), "more than one line"},
		{"a file far too big for a token", write("big", strings.Repeat("x", 5000), 0o600), "larger than"},
	} {
		t.Run(tc.name+" fails at start, naming the flag", func(t *testing.T) {
			var stderr bytes.Buffer
			err := app.Main(context.Background(), "payments", []string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-admin-token-file", tc.path}, io.Discard, &stderr)
			if code := app.Exit(&stderr, "payments", err); code != 1 || !strings.Contains(stderr.String(), "-admin-token-file") || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d; stderr %q, want -admin-token-file and %q", code, stderr.String(), tc.want)
			}
		})
	}
}
