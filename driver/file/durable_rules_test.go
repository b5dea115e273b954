package file

import (
	"testing"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
)

// The durable-execution rules end to end (an oke.App with durable flows) on
// the file driver's journal.
func TestDurableRules(t *testing.T) {
	drivertest.RunDurable(t, func(t *testing.T) driver.Driver { return open(t, t.TempDir()) })
}
