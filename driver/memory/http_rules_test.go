package memory_test

import (
	"testing"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
	"github.com/okengine/oke/driver/memory"
)

func TestHTTPRules(t *testing.T) {
	drivertest.RunHTTP(t, func(t *testing.T) driver.Driver { return memory.New() })
}
