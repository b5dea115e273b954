package oke_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/okengine/oke"
)

type ChargeIn struct {
	Amount   int64  `json:"amount" minimum:"1"`
	Currency string `json:"currency" enum:"usd,eur"`
}

type Charge struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// A retried POST with the same Idempotency-Key runs the flow once; the retry
// replays the stored response.
func Example() {
	charges := 0
	charge := oke.NewFlow("payments.charge", oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in ChargeIn, fx *oke.Fx) (oke.Response[Charge], error) {
			charges++ // a real flow writes through fx.Store(db)
			c := Charge{ID: fmt.Sprintf("ch_%d", charges), Amount: in.Amount, Currency: in.Currency}
			return oke.Created(c, "/charges/"+c.ID), nil
		})

	app := oke.New(oke.Config{}) // memory driver
	defer app.Close(context.Background())
	app.Handle(oke.POST("/charges"), charge)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}

	for i := 0; i < 2; i++ {
		r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"amount":1000,"currency":"usd"}`))
		r.Header.Set("Idempotency-Key", "checkout-attempt-9f3a2c")
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Location"), w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String()))
	}
	fmt.Println("charges made:", charges)
	// Output:
	// 201 /charges/ch_1  {"id":"ch_1","amount":1000,"currency":"usd"}
	// 201 /charges/ch_1 true {"id":"ch_1","amount":1000,"currency":"usd"}
	// charges made: 1
}

// Start refuses options that cannot work, naming the flow and the fix.
func ExampleApp_Start() {
	list := oke.NewFlow("payments.list", oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[[]Charge], error) {
			return oke.OK([]Charge{}), nil
		})
	app := oke.New(oke.Config{})
	defer app.Close(context.Background())
	app.Handle(oke.GET("/charges"), list)
	fmt.Println(app.Start(context.Background()))
	// Output:
	// oke: 1 problem(s) in the flows' contract:
	//   - flow "payments.list": option Idempotency is Required, but binding GET /charges is a GET, which never honors Idempotency-Key; fix: bind it with POST (or QUERY), or drop Required
}

// A declared failure is stored and replayed as itself.
func ExampleFx_Fail() {
	pay := oke.NewFlow("payments.pay", oke.Options{},
		func(ctx context.Context, in ChargeIn, fx *oke.Fx) (oke.Response[Charge], error) {
			return oke.Response[Charge]{}, fx.Fail(402, "PaymentDeclined", "The card was declined.")
		})
	app := oke.New(oke.Config{})
	defer app.Close(context.Background())
	app.Handle(oke.POST("/pay"), pay)
	for i := 0; i < 2; i++ {
		r := httptest.NewRequest("POST", "/pay", strings.NewReader(`{"amount":1,"currency":"usd"}`))
		r.Header.Set("Idempotency-Key", "pay-attempt-000000001")
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// 402  {"error":{"code":"PaymentDeclined","message":"The card was declined."}}
	// 402 true {"error":{"code":"PaymentDeclined","message":"The card was declined."}}
}
