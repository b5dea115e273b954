package deadline_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any leave a goroutine running
// (an armed deadline's timer, a context's AfterFunc).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
