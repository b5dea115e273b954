package postgres_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// signalStore returns an open function for drivertest's multi-driver rules:
// its first call makes a fresh migrated schema, each later call opens
// another driver on it.
func signalStore(t *testing.T) func(t *testing.T) driver.Driver {
	pgtest.Need(t, 2*pgtest.DriverConns(testPool)) // two drivers at once, at most
	url, _ := server(t)
	schema := fmt.Sprintf("oke_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	made := false
	return func(t *testing.T) driver.Driver {
		if !made {
			made = true
			return newDriverIn(t, url, schema)
		}
		return openDriver(t, url, testPool, postgres.WithSchema(schema))
	}
}

// TestSignalAcrossRestart: a new app on the same schema continues a run
// parked in a wait when the signal comes.
func TestSignalAcrossRestart(t *testing.T) {
	t.Parallel()
	drivertest.RunSignalRestart(t, signalStore(t))
}

// TestSignalAcrossInstances: a signal sent through one instance wakes the
// run another instance parked, by the schema's notification.
func TestSignalAcrossInstances(t *testing.T) {
	t.Parallel()
	drivertest.RunSignalInstances(t, signalStore(t))
}
