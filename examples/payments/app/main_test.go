package app_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/examples/payments/app"
)

// TestHelpShowsNoSecret: -h prints no admin token, whether it comes from
// $OKE_ADMIN_TOKEN or the command line, and no DSN (it may hold a password).
func TestHelpShowsNoSecret(t *testing.T) {
	t.Setenv("OKE_ADMIN_TOKEN", "env-token-s3cr3t-0123456789")
	var stderr bytes.Buffer
	err := app.Main(context.Background(), "payments", []string{"-admin-token", "flag-token-s3cr3t-0123456789",
		"-postgres", "postgres://u:pw-s3cr3t@127.0.0.1:1/x", "-h"}, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) || strings.Contains(stderr.String(), "s3cr3t") || !strings.Contains(stderr.String(), "-admin-token token") {
		t.Fatalf("err %v; -h printed:\n%s", err, stderr.String())
	}
}

// The flags, in process: mistakes fail before anything is opened.
func TestMainFlags(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		exit   int
		is     error  // errors.Is(err, is) when set
		stderr string // in stderr
	}{
		{"-h prints the usage and exits 0", []string{"-h"}, 0, flag.ErrHelp, "-postgres DSN"},
		{"an unknown flag is a usage error", []string{"-nope"}, 2, nil, "flag provided but not defined: -nope"},
		{"an argument is a usage error", []string{"serve"}, 2, nil, `unexpected argument "serve"`},
		{"-postgres fails clearly when no server answers", []string{"-postgres", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=5"}, 1, driver.ErrUnavailable, "open the Postgres driver"},
		{"-lease 0 fails", []string{"-lease", "0s"}, 1, nil, "-lease must be positive"},
		{"-lease must be a duration", []string{"-lease", "30"}, 2, nil, "invalid value"},
		{"-poll 0 fails", []string{"-poll", "0s"}, 1, nil, "-poll must be positive"},
		{"-retry-delay 0 fails", []string{"-retry-delay", "0s"}, 1, nil, "-retry-delay must be positive"},
		{"-provider must be an http URL", []string{"-provider", "ftp://x"}, 1, nil, "-provider must be an http(s) URL"},
		{"-driver must be file or memory", []string{"-driver", "redis"}, 1, nil, `-driver must be "file" or "memory"`},
		{"-read-header-timeout 0 fails: connections need a bound", []string{"-read-header-timeout", "0s"}, 1, nil, "-read-header-timeout must be positive"},
		{"-read-timeout 0 fails", []string{"-read-timeout", "0s"}, 1, nil, "-read-timeout must be positive"},
		{"-write-timeout 0 fails", []string{"-write-timeout", "0s"}, 1, nil, "-write-timeout must be positive"},
		{"-idle-timeout must be a duration", []string{"-idle-timeout", "120"}, 2, nil, "invalid value"},
		{"-max-conns 0 fails", []string{"-max-conns", "0"}, 1, nil, "-max-conns must be at least 1"},
		{"-max-header-bytes under 4096 fails", []string{"-max-header-bytes", "100"}, 1, nil, "-max-header-bytes must be at least 4096"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			args := append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tc.args...)
			err := app.Main(context.Background(), "payments", args, io.Discard, &stderr)
			if code := app.Exit(&stderr, "payments", err); code != tc.exit {
				t.Fatalf("exit %d, want %d (err %v)", code, tc.exit, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("stderr %q does not hold %q", stderr.String(), tc.stderr)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
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

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// waitListening waits until stderr shows the listening address, or done
// says the run ended.
func waitListening(t *testing.T, stderr *syncBuffer, done <-chan struct{}) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		select {
		case <-done:
			t.Fatalf("the demo stopped before listening; stderr:\n%s", stderr)
		case <-deadline:
			t.Fatalf("the demo did not listen in 60s; stderr:\n%s", stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// runDemo starts app.Run on the file driver in a temporary folder, on a
// free port, and returns its URL, its stderr and stop, which ends the run
// and returns Run's error once it has returned.
func runDemo(t *testing.T) (url string, stderr *syncBuffer, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	stderr = &syncBuffer{}
	done := make(chan struct{})
	var runErr error
	go func() { defer close(done); runErr = app.Run(ctx, cfg, stderr) }()
	t.Cleanup(func() { cancel(); <-done })
	url = waitListening(t, stderr, done)
	return url, stderr, func() error { cancel(); <-done; return runErr }
}

// Run serves until its context ends, then stops cleanly.
func TestRun(t *testing.T) {
	url, stderr, stop := runDemo(t)
	do(t, url, "GET", "/healthz", "").want(t, 200, "")
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(stderr.String(), "payments: stopped") {
		t.Fatalf("stderr %q does not say it stopped", stderr.String())
	}
}

// proc is a running demo process.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error // Wait's, once done is closed
	url    string
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { defer close(p.done); p.err = p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the process did not exit in 60s; stderr:\n%s", p.stderr)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("wait: %v", p.err)
	}
	return 0
}

// buildDemo builds the demo binary into a temp folder.
func buildDemo(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "payments")
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/okengine/oke/examples/payments").CombinedOutput()
	if err != nil {
		t.Fatalf("go build the demo: %v\n%s", err, out)
	}
	return bin
}

// The demo as a process: it holds its -data folder, survives a restart and
// shuts down gracefully on SIGTERM.
func TestProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo binary")
	}
	bin := buildDemo(t)
	data := t.TempDir()
	key := newKey()

	a := startProc(t, bin, "-addr", "127.0.0.1:0", "-data", data)
	a.url = waitListening(t, a.stderr, a.done)
	do(t, a.url, "GET", "/healthz", "").want(t, 200, "")
	first := do(t, a.url, "POST", "/charges", `{"amount":700,"currency":"usd"}`, "Idempotency-Key", key)
	first.want(t, 201, "")

	t.Run("a second process on the same -data exits non-zero: the folder is locked", func(t *testing.T) {
		b := startProc(t, bin, "-addr", "127.0.0.1:0", "-data", data)
		if code := b.wait(t); code == 0 {
			t.Fatalf("the second process exited 0; stderr:\n%s", b.stderr)
		}
		if !strings.Contains(strings.ToLower(b.stderr.String()), "lock") {
			t.Fatalf("stderr does not mention the lock:\n%s", b.stderr)
		}
		do(t, a.url, "GET", "/healthz", "").want(t, 200, "") // the first one is unharmed
	})

	t.Run("SIGTERM lets running requests finish, closes feeds and exits 0", func(t *testing.T) {
		_, feed := openFeed(t, &env{t: t, url: a.url})
		next(t, feed)
		slow := make(chan reply, 1)
		go func() { slow <- do(t, a.url, "POST", "/slow", `{"ms":1000}`, "Idempotency-Key", newKey()) }()
		waitFor(t, func() bool {
			return strings.Contains(string(do(t, a.url, "GET", "/metrics", "").Body), `oke_flow_executions_total{flow="demo.slow"} 1`)
		})
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		(<-slow).want(t, 201, "")
		if code := a.wait(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, a.stderr)
		}
		if !strings.Contains(a.stderr.String(), "payments: stopped") {
			t.Fatalf("stderr does not say it stopped:\n%s", a.stderr)
		}
	})

	t.Run("after a restart on the same -data, a retry still replays", func(t *testing.T) {
		c := startProc(t, bin, "-addr", "127.0.0.1:0", "-data", data)
		c.url = waitListening(t, c.stderr, c.done)
		again := do(t, c.url, "POST", "/charges", `{"amount":700,"currency":"usd"}`, "Idempotency-Key", key)
		again.want(t, 201, "")
		if !again.replayed() || string(again.Body) != string(first.Body) {
			t.Fatalf("after restart: replayed=%v body %s, want a replay of %s", again.replayed(), again.Body, first.Body)
		}
		do(t, c.url, "GET", first.Header.Get("Location"), "").want(t, 200, "")
		c.cmd.Process.Signal(syscall.SIGTERM)
		if code := c.wait(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, c.stderr)
		}
	})

	t.Run("-postgres with no server exits non-zero with a clear error", func(t *testing.T) {
		p := startProc(t, bin, "-data", t.TempDir(), "-postgres", "postgres://postgres@127.0.0.1:1/oke?sslmode=disable&connect_timeout=5")
		if code := p.wait(t); code == 0 {
			t.Fatal("exit 0 with -postgres and no server")
		}
		if !strings.Contains(p.stderr.String(), "open the Postgres driver") {
			t.Fatalf("stderr:\n%s", p.stderr)
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
