package file_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
)

// A response stored with Complete is replayed after the process restarts.
func Example() {
	dir, err := os.MkdirTemp("", "oke-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	key := driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.charge", Key: "9b2f6c1e-charge-0001"}
	claim := func(d *file.Driver, owner string) driver.ClaimResult {
		res, err := d.Claim(ctx, driver.ClaimRequest{
			Key: key, Fingerprint: "sha256-of-input", Owner: owner,
			Lease: 30 * time.Second, TTL: 24 * time.Hour,
		})
		if err != nil {
			log.Fatal(err)
		}
		return res
	}

	d, err := file.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first attempt claimed:", claim(d, "attempt-1").Claimed)
	err = d.Complete(ctx, key, "attempt-1", driver.Response{
		Status: 201, ContentType: "application/json", Location: "/charges/ch_1", Body: []byte(`{"id":"ch_1"}`),
	}, 24*time.Hour) // returns once the response is fsynced
	if err != nil {
		log.Fatal(err)
	}
	d.Close()

	d, err = file.Open(dir) // a restart
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	res := claim(d, "attempt-2")
	fmt.Println("retry claimed:", res.Claimed)
	fmt.Println("replay:", res.Row.Response.Status, res.Row.Response.Location, string(res.Row.Response.Body))
	// Output:
	// first attempt claimed: true
	// retry claimed: false
	// replay: 201 /charges/ch_1 {"id":"ch_1"}
}

// Only one Driver may have a folder open at a time.
func ExampleOpen_locked() {
	dir, err := os.MkdirTemp("", "oke-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d, err := file.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	_, err = file.Open(dir)
	fmt.Println(errors.Is(err, file.ErrLocked))
	// Output:
	// true
}
