package file_test

import (
	"testing"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
	"github.com/okengine/oke/driver/file"
)

// TestHTTPRules runs every Idempotency-Key rule end to end on the file driver.
func TestHTTPRules(t *testing.T) {
	drivertest.RunHTTP(t, func(t *testing.T) driver.Driver {
		d, err := file.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
