package postgres_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/okengine/oke"
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

// A charge whose only effect is its INSERT through Fx.Tx, with its
// Idempotency-Key claim held in the charge's transaction (ClaimInTx): the
// claim goes in the INSERT's round trip and commits with the charge and its
// response — two round trips and one commit per charge, where claiming
// first takes three and two. The function changes nothing before that
// INSERT, which is what ClaimInTx asks. (ClaimAuto picks this for such a
// flow when its contract, from oke extract, shows it.) Not run as a test:
// it needs a server.
func Example_claimInTx() {
	ctx := context.Background()
	d, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	app := oke.New(oke.Config{Driver: d})
	defer app.Close(ctx)
	type chargeIn struct{ Amount int64 }
	app.Handle(oke.POST("/charges"), oke.NewFlow("payments.charge", oke.Options{
		Idempotency: oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimInTx},
	}, func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int64], error) {
		tx, err := fx.Tx(ctx)
		if err != nil {
			return oke.Response[int64]{}, err
		}
		var id int64
		err = tx.QueryRow(ctx, `INSERT INTO charges (amount) VALUES ($1) RETURNING id`, in.Amount).Scan(&id)
		if err != nil {
			// A replay, a 409 or a 422 stops here (oke.ErrKeyNotClaimed):
			// the INSERT did not run, and the client gets that answer.
			return oke.Response[int64]{}, err
		}
		return oke.Created(id, fmt.Sprint("/charges/", id)), nil
	}))
	if err := app.Start(ctx); err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", app))
}
