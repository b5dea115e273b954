package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// Every statement of a flow's transaction on the driver's database is
// bounded by Config.StoreTimeout, whichever way it is sent and wherever it
// is in the transaction: the first (which carries the BEGIN and, for a
// keyed request, the claim) and any later one, sent with Exec, Query or
// QueryRow. oke hands database/sql a context with no Done channel for them
// (deadline.Hush) and the driver ties the deadline to the connection's
// socket instead: a statement the server does not answer (pg_sleep(30)
// here) must still fail as a timeout, not wait.
func TestFlowStatementsHaveTheStoreTimeout(t *testing.T) {
	t.Parallel()
	d := newDriver(t)
	table := chargesTable(t, d)
	app := oke.New(oke.Config{Driver: d, StoreTimeout: 300 * time.Millisecond, SweepInterval: -1, PollInterval: -1})
	const sleep = `SELECT pg_sleep(30)`
	sends := map[string]func(ctx context.Context, tx *oke.Tx) error{
		"exec": func(ctx context.Context, tx *oke.Tx) error {
			_, err := tx.Exec(ctx, sleep)
			return err
		},
		"query": func(ctx context.Context, tx *oke.Tx) error {
			rows, err := tx.Query(ctx, sleep)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
			}
			return rows.Err()
		},
		"queryrow": func(ctx context.Context, tx *oke.Tx) error {
			var s string
			return tx.QueryRow(ctx, sleep).Scan(&s)
		},
	}
	errs := make(chan error, 1)
	type in struct{ Send, At string }
	for _, claim := range []oke.ClaimStrategy{oke.ClaimInTx, oke.ClaimFirst} {
		flow := fmt.Sprintf("stmt.deadline.%d", claim)
		opts := oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, Claim: claim}}
		app.Handle(oke.POST("/"+flow), oke.NewFlow(flow, opts,
			func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[struct{}], error) {
				tx, err := fx.Tx(ctx)
				if err == nil && in.At == "later" {
					_, err = tx.Exec(ctx, `INSERT INTO `+table+` (amount) VALUES (1)`)
				}
				if err == nil {
					err = sends[in.Send](ctx, tx)
				}
				errs <- err
				return oke.Response[struct{}]{}, err
			}))
	}
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })

	n := 0
	for _, claim := range []oke.ClaimStrategy{oke.ClaimInTx, oke.ClaimFirst} {
		for _, send := range []string{"exec", "query", "queryrow"} {
			for _, at := range []string{"first", "later"} {
				// On a loaded machine a claim made on its own (ClaimFirst)
				// may itself take longer than the timeout: the flow then
				// does not run, the answer is a 503 all the same, and the
				// case is tried again with a new key.
				var err error
				ran := false
				for try := 0; try < 5 && !ran; try++ {
					n++
					r := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/stmt.deadline.%d", claim),
						strings.NewReader(fmt.Sprintf(`{"Send":%q,"At":%q}`, send, at)))
					r.Header.Set("Idempotency-Key", fmt.Sprintf("stmt-deadline-key-%04d", n))
					r.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					app.ServeHTTP(w, r)
					if w.Code != http.StatusServiceUnavailable {
						t.Errorf("claim %v, %s as the %s statement: %d %s; want 503", claim, send, at, w.Code, w.Body)
					}
					select {
					case err = <-errs: // the flow ran (ServeHTTP returns after it)
						ran = true
					default:
					}
				}
				if !ran {
					t.Fatalf("claim %v, %s as the %s statement: the flow never ran in 5 tries", claim, send, at)
				}
				if !errors.Is(err, driver.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("claim %v, %s as the %s statement of the flow's transaction: %v; want a timeout (driver.ErrUnavailable, context.DeadlineExceeded)", claim, send, at, err)
				}
			}
		}
	}
}
