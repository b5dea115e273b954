package file

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any leave a goroutine running
// (a lease ticker, a scheduler, a listener, a pool's opener).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
