package oke_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// Two steps run at the same time and are journaled in the order they were
// started, whichever finishes first.
func ExampleGo() {
	quote := oke.NewFlow("shop.quote", oke.Options{Durable: true},
		func(ctx context.Context, in struct {
			Item string `json:"item"`
		}, fx *oke.Fx) (oke.Response[string], error) {
			price := oke.Go(ctx, "price", func(ctx context.Context) (int, error) {
				return 1200, nil // a real flow asks its pricing service here
			})
			stock := oke.Go(ctx, "stock", func(ctx context.Context) (int, error) {
				return 7, nil // … and its warehouse here, at the same time
			})
			if err := oke.WaitAll(ctx, price, stock); err != nil {
				return oke.Response[string]{}, err
			}
			p, _ := price.Wait(ctx)
			n, _ := stock.Wait(ctx)
			return oke.OK(fmt.Sprintf("%s: %d cents, %d left", in.Item, p, n)), nil
		})

	app := oke.New(oke.Config{})
	app.Handle(oke.POST("/quotes"), quote)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}
	defer app.Close(context.Background())

	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/quotes", strings.NewReader(`{"item":"lamp"}`)))
	fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))

	runs, _ := app.Journal().ListRuns(context.Background(), driver.RunFilter{}, 0)
	_, steps, _ := app.Journal().GetRun(context.Background(), runs[0].ID)
	for _, s := range steps {
		fmt.Println(s.Seq, s.Name, string(s.Result))
	}
	// Output:
	// 200 "lamp: 1200 cents, 7 left"
	// 1 price 1200
	// 2 stock 7
}
