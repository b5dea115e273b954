package oke_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"

	"github.com/okengine/oke"
)

// A flow writes through its transaction, Fx.Tx; oke commits it when the flow
// succeeds and rolls it back when the flow fails. On the Postgres driver the
// stored response commits in that same transaction (exactly once); here, on
// the memory driver with SQLite as Config.DB, it commits just before the
// response is stored.
func ExampleFx_Tx() {
	dir, _ := os.MkdirTemp("", "oke-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	defer db.Close()
	db.Exec(`CREATE TABLE charges (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)`)

	app := oke.New(oke.Config{DB: db})
	defer app.Close(context.Background())
	app.Handle(oke.POST("/charges"), oke.NewFlow("payments.charge", oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in ChargeIn, fx *oke.Fx) (oke.Response[int64], error) {
			tx, err := fx.Tx(ctx)
			if err != nil {
				return oke.Response[int64]{}, err
			}
			res, err := tx.Exec(ctx, `INSERT INTO charges (amount) VALUES (?)`, in.Amount)
			if err != nil {
				return oke.Response[int64]{}, err
			}
			if in.Amount > 10_000 {
				// A declared failure: stored and replayed, and the INSERT
				// above is rolled back.
				return oke.Response[int64]{}, fx.Fail(402, "AmountTooLarge", "Charges are limited to 10 000.")
			}
			id, _ := res.LastInsertId()
			return oke.Created(id, ""), nil
		}))

	post := func(key, body string) {
		r := httptest.NewRequest("POST", "/charges", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))
	}
	post("example-key-0001", `{"amount":500,"currency":"usd"}`)
	post("example-key-0001", `{"amount":500,"currency":"usd"}`) // replayed
	post("example-key-0002", `{"amount":50000,"currency":"usd"}`)

	var n int
	db.QueryRow(`SELECT count(*) FROM charges`).Scan(&n)
	fmt.Println("charges:", n)
	// Output:
	// 201 1
	// 201 1
	// 402 {"error":{"code":"AmountTooLarge","message":"Charges are limited to 10 000."}}
	// charges: 1
}
