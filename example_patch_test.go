package oke_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// A flow changed while runs were in flight: the new step is behind a patch.
// A new run saves the patch's marker and takes the new branch; a run that
// went past this point on the old code keeps to the else branch.
func ExamplePatched() {
	ship := oke.NewFlow("shop.ship", oke.Options{Durable: true},
		func(ctx context.Context, in struct {
			Order string `json:"order"`
		}, fx *oke.Fx) (oke.Response[string], error) {
			express, err := oke.Patched(ctx, "express-courier")
			if err != nil {
				return oke.Response[string]{}, err
			}
			how := "post"
			if express {
				how = "courier" // the new code
			}
			label, err := oke.Step(ctx, "label by "+how, func(ctx context.Context) (string, error) {
				return how + ":" + in.Order, nil
			})
			return oke.OK(label), err
		})

	app := oke.New(oke.Config{})
	app.Handle(oke.POST("/ship"), ship)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}
	defer app.Close(context.Background())

	r := httptest.NewRequest("POST", "/ship", strings.NewReader(`{"order":"o_1"}`))
	w := httptest.NewRecorder()
	app.ServeHTTP(w, r)
	fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))

	runs, _ := app.Journal().ListRuns(context.Background(), driver.RunFilter{}, 0)
	_, steps, _ := app.Journal().GetRun(context.Background(), runs[0].ID)
	for _, s := range steps {
		fmt.Println(s.Seq, s.Name)
	}
	// Output:
	// 200 "courier:o_1"
	// 1 oke.patch:express-courier
	// 2 label by courier
}
