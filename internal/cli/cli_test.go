package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/cli"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(context.Background(), args, &out, &errb, serveDemo)
	return code, out.String(), errb.String()
}

func TestCommands(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // in stdout
		stderr string // in stderr
	}{
		{"no command prints the usage and exits 2", nil, 2, "", "Usage:\n\n  oke <command> [arguments]"},
		{"help lists the commands", []string{"help"}, 0, "serve", ""},
		{"-h is help", []string{"-h"}, 0, "Commands:", ""},
		{"help serve shows the demo's flags", []string{"help", "serve"}, 0, "-postgres DSN", ""},
		{"help version", []string{"help", "version"}, 0, "Usage: oke version", ""},
		{"help of an unknown command exits 2", []string{"help", "nope"}, 2, "", `unknown command "nope"`},
		{"version prints the version", []string{"version"}, 0, "oke ", ""},
		{"version takes no argument", []string{"version", "x"}, 2, "", `unexpected argument "x"`},
		{"an unknown command exits 2", []string{"deploy"}, 2, "", `oke: unknown command "deploy"`},
		{"serve -h exits 0", []string{"serve", "-h"}, 0, "", "Usage: oke serve [flags]"},
		{"serve with a bad flag exits 2", []string{"serve", "-nope"}, 2, "", "flag provided but not defined: -nope"},
		{"serve -postgres with no server exits 1 with a clear error", []string{"serve", "-postgres", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=5"}, 1, "", "oke serve: open the Postgres driver"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Fatalf("stdout %q does not hold %q", stdout, tc.stdout)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("stderr %q does not hold %q", stderr, tc.stderr)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	old := cli.Version
	cli.Version = "v1.2.3"
	defer func() { cli.Version = old }()
	code, stdout, _ := run("version")
	if code != 0 || !regexp.MustCompile(`^oke v1\.2\.3 \((rev [0-9a-f]{7}(\+dirty)?, )?go[^ ,()]+\)\n$`).MatchString(stdout) {
		t.Fatalf("exit %d, stdout %q: want one line, oke v1.2.3 (rev …, go…)", code, stdout)
	}
	if code, stdout, _ := run("version", "-json"); code != 0 || !strings.HasPrefix(stdout, `{"arch":`) || !strings.Contains(stdout, `"oke":"v1.2.3"`) {
		t.Fatalf("version -json: exit %d, stdout %q", code, stdout)
	}
}

// TestBuildVersion: DESIGN.md §11 — `oke version` prints one short line:
// the module version (devel for a checkout), the VCS revision (short,
// +dirty when modified) and the Go version, from each shape of build info.
func TestBuildVersion(t *testing.T) {
	const sha = "1d120a6f0e2b9c8d7e6f5a4b3c2d1e0f9a8b7c6d"
	rev := debug.BuildSetting{Key: "vcs.revision", Value: sha}
	at := debug.BuildSetting{Key: "vcs.time", Value: "2026-12-01T09:49:33Z"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	clean := debug.BuildSetting{Key: "vcs.modified", Value: "false"}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     string
	}{
		{"go install …@v0.3.0: a release, no VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}}, "", "oke v0.3.0 (go1.26.8)"},
		{"a release built from its tag", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{rev, at, clean}}, "", "oke v0.3.0 (rev 1d120a6, go1.26.8)"},
		{"its tag, modified", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0+dirty"}, Settings: []debug.BuildSetting{rev, dirty}}, "", "oke v0.3.0 (rev 1d120a6+dirty, go1.26.8)"},
		{"a checkout: the pseudo-version go build stamps", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201094933-1d120a6f0e2b"}, Settings: []debug.BuildSetting{rev, at, clean}}, "", "oke devel (rev 1d120a6, go1.26.8)"},
		{"a modified checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201094933-1d120a6f0e2b+dirty"}, Settings: []debug.BuildSetting{rev, at, dirty}}, "", "oke devel (rev 1d120a6+dirty, go1.26.8)"},
		{"a pseudo-version after a tag, no VCS settings", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1-0.20261201094933-1d120a6f0e2b"}}, "", "oke devel (rev 1d120a6, go1.26.8)"},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "oke devel (go1.26.8)"},
		{"-ldflags -X …Version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{rev, clean}}, "v1.2.3", "oke v1.2.3 (rev 1d120a6, go1.26.8)"},
		{"no build info", nil, "", "oke devel (" + runtime.Version() + ")"},
	} {
		if got := cli.BuildVersion(tc.bi, tc.override).Line(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// serveDemo is `oke serve` as cmd/oke builds it.
func serveDemo(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	return app.Exit(stderr, name, app.Main(ctx, name, args, stdout, stderr))
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// oke serve runs the demo until its context ends.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-data", t.TempDir()}, io.Discard, &stderr, serveDemo)
	}()
	re := regexp.MustCompile(`listening on (http://\S+)`)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before listening:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen in 30s:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %d", resp.StatusCode)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d after its context ended:\n%s", code, stderr.String())
	}
}
