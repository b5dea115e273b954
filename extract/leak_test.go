package extract_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any leave a goroutine running
// (the loader parses and checks packages on goroutines of its own).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
