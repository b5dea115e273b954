package admin_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/okengine/oke/internal/pgtest"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any leave a goroutine running
// (a lease ticker, a scheduler, a listener, a pool's opener), once the
// shared admin connection to the test server (the benchmarks') is closed.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
