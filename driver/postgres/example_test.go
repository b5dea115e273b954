package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
)

// Open the driver, create its tables, and claim an Idempotency-Key: the
// lease and the TTL are computed from the database's clock, reported as
// ClaimResult.Now. (Not run as a test: it needs a server.)
func Example() {
	ctx := context.Background()
	d, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), postgres.WithSchema("oke"))
	if err != nil {
		log.Fatal(err) // errors.Is(err, driver.ErrUnavailable): no server answers
	}
	defer d.Close()
	if err := d.Migrate(ctx); err != nil { // safe to run on every start, and concurrently
		log.Fatal(err)
	}
	res, err := d.Claim(ctx, driver.ClaimRequest{
		Key:         driver.Key{Tenant: "acme", Principal: "user:42", Flow: "payments.charge", Key: "7f9c2d1e-charge-0001"},
		Fingerprint: "…hex SHA-256 of the flow and its input…",
		Owner:       "a token unique to this attempt",
		Lease:       30 * time.Second,
		TTL:         24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Claimed, res.Row.LeaseUntil.Sub(res.Now))
}
