package app_test

import (
	"testing"

	"github.com/okengine/oke/internal/pgtest"
)

// TestMain fails the package's tests when any leave a goroutine running.
func TestMain(m *testing.M) { pgtest.Main(m) }
