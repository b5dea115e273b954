package lease

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any leave a goroutine running
// (a lease ticker, a scheduler, a listener, a pool's opener).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPool is a pool closed when the test ends.
func testPool(t testing.TB) *Pool {
	p := NewPool()
	t.Cleanup(p.Close)
	return p
}
