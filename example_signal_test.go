package oke_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// A durable flow waits for an approval: the request is answered 204 while
// the run is parked, and the signal — sent here with App.Signal, or over
// HTTP by a flow that calls fx.Signal — wakes it. The journal shows the
// wait and what it received.
func ExampleAwaitSignal() {
	type Approval struct {
		By string `json:"by"`
	}
	order := oke.NewFlow("orders.ship", oke.Options{Durable: true},
		func(ctx context.Context, in struct {
			Order string `json:"order"`
		}, fx *oke.Fx) (oke.Response[string], error) {
			a, ok, err := oke.AwaitSignal[Approval](ctx, "approval", 72*time.Hour)
			if err != nil {
				return oke.Response[string]{}, err // oke.ErrSleeping while it waits: 204
			}
			if !ok {
				return oke.OK(in.Order + " expired"), nil
			}
			return oke.OK(in.Order + " approved by " + a.By), nil
		})

	app := oke.New(oke.Config{PollInterval: 10 * time.Millisecond}) // the memory driver keeps a journal
	app.Handle(oke.POST("/orders"), order)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}
	defer app.Close(context.Background())

	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/orders", strings.NewReader(`{"order":"o_1"}`)))
	fmt.Println(w.Code)

	runs, _ := app.Journal().ListRuns(context.Background(), driver.RunFilter{}, 0)
	id := runs[0].ID
	if err := app.Signal(context.Background(), id, "approval", Approval{By: "ann"}, oke.SignalKey("approval-o_1")); err != nil {
		panic(err)
	}
	for {
		run, steps, _ := app.Journal().GetRun(context.Background(), id)
		if run.Status.Finished() {
			fmt.Println(run.Status, strings.TrimSpace(string(run.Result.Body)))
			for _, s := range steps {
				fmt.Println(s.Seq, s.Name)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	// Output:
	// 204
	// completed "o_1 approved by ann"
	// 1 approval
	// 2 approval (outcome)
}
