package oke_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// A durable flow's steps are saved in the journal; a saved step is never
// run again in that run.
func ExampleStep() {
	refund := oke.NewFlow("payments.refund", oke.Options{Durable: true},
		func(ctx context.Context, in struct {
			ChargeID string `json:"chargeId"`
		}, fx *oke.Fx) (oke.Response[string], error) {
			amount, err := oke.Step(ctx, "look up charge", func(ctx context.Context) (int, error) {
				return 1000, nil // a real flow reads its database here
			})
			if err != nil {
				return oke.Response[string]{}, err
			}
			_, err = oke.Step(ctx, "provider refund", func(ctx context.Context) (string, error) {
				// A provider call here carries oke.StepKey(ctx), the same on every attempt.
				return "re_" + in.ChargeID, nil
			})
			if err != nil {
				return oke.Response[string]{}, err
			}
			return oke.Created(fmt.Sprintf("refunded %d", amount), ""), nil
		})

	app := oke.New(oke.Config{}) // the memory driver keeps a journal
	defer app.Close(context.Background())
	app.Handle(oke.POST("/refunds"), refund)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}
	defer app.Close(context.Background())

	r := httptest.NewRequest("POST", "/refunds", strings.NewReader(`{"chargeId":"ch_1"}`))
	r.Header.Set("Idempotency-Key", "refund-attempt-000001")
	w := httptest.NewRecorder()
	app.ServeHTTP(w, r)
	fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))

	runs, _ := app.Journal().ListRuns(context.Background(), driver.RunFilter{}, 0)
	_, steps, _ := app.Journal().GetRun(context.Background(), runs[0].ID)
	fmt.Println(runs[0].Flow, runs[0].Status)
	for _, s := range steps {
		fmt.Println(s.Seq, s.Name, string(s.Result), "attempts:", s.Attempts)
	}
	// Output:
	// 201 "refunded 1000"
	// payments.refund completed
	// 1 look up charge 1000 attempts: 1
	// 2 provider refund "re_ch_1" attempts: 1
}
