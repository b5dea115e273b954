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
