package idem

import (
	"testing"

	"github.com/okengine/oke/internal/lease"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any leave a goroutine running
// (a lease ticker, a scheduler, a listener, a pool's opener).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPool is a lease pool closed when the test ends.
func testPool(t testing.TB) *lease.Pool {
	p := lease.NewPool()
	t.Cleanup(p.Close)
	return p
}
