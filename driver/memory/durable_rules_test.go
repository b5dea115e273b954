package memory_test

import (
	"testing"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
	"github.com/okengine/oke/driver/memory"
)

func TestDurableRules(t *testing.T) {
	drivertest.RunDurable(t, func(t *testing.T) driver.Driver { return memory.New() })
}
