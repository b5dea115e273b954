package memory_test

import (
	"testing"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
	"github.com/okengine/oke/driver/memory"
)

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Driver { return memory.New() })
}

// TestTxConformance skips: the memory driver has no SQL database for a
// flow's transaction (driver.TxDriver), and RunTx says so.
func TestTxConformance(t *testing.T) {
	drivertest.RunTx(t, func(t *testing.T) driver.Driver { return memory.New() }, drivertest.TxOptions{})
}
