package file

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// injector fails the I/O calls the test picks (through the driver's hooks),
// and can look at the folder before any call.
type injector struct {
	mu     sync.Mutex
	fails  map[faultKey]error
	before func(op ioOp, name string) // called before each I/O call, under mu
}

type faultKey struct {
	op   ioOp
	name string
}

func (in *injector) fail(op ioOp, name string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.before != nil {
		in.before(op, name)
	}
	return in.fails[faultKey{op, name}]
}

// set makes every op on name fail with err until clear.
func (in *injector) set(op ioOp, name string, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.fails == nil {
		in.fails = map[faultKey]error{}
	}
	in.fails[faultKey{op, name}] = err
}

func (in *injector) clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.fails = nil
}

func (in *injector) watch(f func(op ioOp, name string)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.before = f
}

// option opens a driver whose I/O goes through in, and which tries to heal
// a broken log at every call (no wait between attempts).
func (in *injector) option() Option {
	return func(c *config) {
		c.hooks = &hooks{fail: in.fail}
		c.healBackoff = func(time.Duration) time.Duration { return 0 }
	}
}

// copyDir copies the files of dir to a new folder: what a process killed at
// this moment leaves on disk (the page cache survives it).
func copyDir(t testing.TB, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// listing is every file in dir with its bytes.
func listing(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

func sameListing(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for p, b := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: %s is gone", what, p)
		case g != b:
			t.Errorf("%s: %s changed (%d bytes, was %d)", what, p, len(g), len(b))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s was created", what, p)
		}
	}
}
