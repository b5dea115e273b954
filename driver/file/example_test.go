package file_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
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

// A tool that only looks opens the folder read-only: it creates no file,
// and every call that would write fails with ErrReadOnly.
func ExampleOpenReadOnly() {
	dir, err := os.MkdirTemp("", "oke-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	key := driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.charge", Key: "9b2f6c1e-charge-0001"}

	_, err = file.OpenReadOnly(dir) // nothing stored here yet, and nothing is created
	fmt.Println("empty folder:", errors.Is(err, file.ErrNoData))

	d, err := file.Open(dir) // the app
	if err != nil {
		log.Fatal(err)
	}
	req := driver.ClaimRequest{Key: key, Fingerprint: "sha256-of-input", Owner: "attempt-1", Lease: 30 * time.Second, TTL: 24 * time.Hour}
	if _, err := d.Claim(ctx, req); err != nil {
		log.Fatal(err)
	}
	if err := d.Complete(ctx, key, "attempt-1", driver.Response{Status: 201, Body: []byte(`{"id":"ch_1"}`)}, 24*time.Hour); err != nil {
		log.Fatal(err)
	}
	d.Close()

	r, err := file.OpenReadOnly(dir) // the tool
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	row, err := r.Get(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored:", row.State, row.Response.Status)
	_, err = r.Claim(ctx, req)
	fmt.Println("claim:", errors.Is(err, file.ErrReadOnly), errors.Is(err, driver.ErrUnavailable))
	// Output:
	// empty folder: true
	// stored: completed 201
	// claim: true true
}

// A log that lost records it had fsynced is refused, with what is missing.
func ExampleLossError() {
	dir, err := os.MkdirTemp("", "oke-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d, err := file.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := d.CreateRun(context.Background(), driver.Run{ID: "run_1", Flow: "payments.refund"}, 0); err != nil {
		log.Fatal(err) // returns once the run is fsynced
	}
	d.Close()

	// Someone empties journal.json.
	if err := os.Truncate(filepath.Join(dir, "journal.json"), 0); err != nil {
		log.Fatal(err)
	}
	_, err = file.Open(dir)
	var lost *file.LossError
	if errors.As(err, &lost) {
		fmt.Println(filepath.Base(lost.Path), "holds", lost.Records, "records of the", lost.SyncedRecords, "fsynced:", lost.Reason)
	}
	fmt.Println(errors.Is(err, file.ErrCorrupt))
	// Output:
	// journal.json holds 0 records of the 2 fsynced: the file was truncated or replaced
	// true
}
