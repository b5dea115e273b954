// Package browsertest starts headless Chromium for the console's browser
// tests (chromedp), and writes their screenshots.
//
// The browser is Debian's chromium (/usr/bin/chromium; scripts/chromium
// installs it), or the one $OKE_CHROMIUM names. When none can be found a
// test fails if $CI is set — CI must run the browser tests — and is skipped
// with a message saying how to get one otherwise.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path returns the Chromium to run, or "" when there is none.
func Path() string {
	for _, p := range []string{os.Getenv("OKE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// New starts a headless Chromium with a fresh profile for the test and
// returns a context of its first tab, closed (with the browser) when the
// test ends. Every action on it should carry its own deadline (Run does).
func New(t *testing.T) context.Context {
	t.Helper()
	path := Path()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium at /usr/bin/chromium (or $OKE_CHROMIUM), and CI is set, so the browser tests must run: run scripts/chromium as root (it installs Debian's chromium package)")
		}
		t.Skip("no Chromium at /usr/bin/chromium (or $OKE_CHROMIUM): the console's browser tests need one; run scripts/chromium as root to install Debian's chromium package")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// Start the browser now, so that a browser that cannot start fails here.
	// (On ctx itself: the context of the first action owns the browser, and
	// a deadline of its own would end it.)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	return ctx
}

// Deadline bounds one Do or Get: a step that waits for an element that
// never comes fails instead of hanging.
const Deadline = 60 * time.Second

// Do runs actions on the tab, failing the test with what on an error.
func Do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Deadline)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, describe(ctx))
	}
}

// describe tells where the tab is, for a failure: its URL and text.
func describe(ctx context.Context) string {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return "(the page cannot be read: " + err.Error() + ")"
	}
	return "the page was at " + v
}

// Get runs an action that returns a value.
func Get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Deadline)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, describe(ctx))
	}
	return v
}

// ArtifactDir is where screenshots go: $OKE_TEST_ARTIFACTS/<test name> (a
// folder per subtest) when
// that is set, else a temporary folder of the test.
func ArtifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("OKE_TEST_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, filepath.FromSlash(t.Name()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("artifacts folder: %v", err)
		}
		return dir
	}
	return t.TempDir()
}

// Screenshot writes a PNG of the whole page to dir/name.png.
func Screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := Get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	t.Logf("screenshot: %s", p)
}

// ScreenshotViewport writes a PNG of what the window shows to dir/name.png.
func ScreenshotViewport(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := Get(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	t.Logf("screenshot: %s", p)
}
