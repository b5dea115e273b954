package oke_test

import (
	"testing"

	"github.com/okengine/oke/internal/pgtest"
)

// TestMain fails the package's tests when any leave a goroutine running
// (a lease ticker, a scheduler, a listener, a pool's opener), once the
// shared admin connection to the test server (TestTracing's Postgres
// case) is closed.
func TestMain(m *testing.M) {
	pgtest.Main(m)
}
