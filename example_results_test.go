package oke_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/okengine/oke"
)

// A durable flow that sleeps answers 204 at once, naming its run in
// Oke-Run-Id. A retry with the same Idempotency-Key replays that 204; with
// "Prefer: wait=N" it is held until the run ends and gets the run's final
// answer. From Go, App.AwaitRun waits for the same answer by run ID.
func ExampleApp_AwaitRun() {
	ship := oke.NewFlow("orders.ship", oke.Options{Durable: true},
		func(ctx context.Context, in struct {
			Order string `json:"order"`
		}, fx *oke.Fx) (oke.Response[string], error) {
			if err := oke.Sleep(ctx, "wait for the courier", 200*time.Millisecond); err != nil {
				return oke.Response[string]{}, err // oke.ErrSleeping: parked, 204
			}
			label, err := oke.Step(ctx, "label", func(ctx context.Context) (string, error) {
				return "shipped " + in.Order, nil
			})
			if err != nil {
				return oke.Response[string]{}, err
			}
			return oke.Created(label, "/shipments/"+in.Order), nil
		})

	app := oke.New(oke.Config{}) // the memory driver keeps a journal
	app.Handle(oke.POST("/shipments"), ship)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}
	defer app.Close(context.Background())
	post := func(hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/shipments", strings.NewReader(`{"order":"o_1"}`))
		r.Header.Set("Idempotency-Key", "ship-attempt-000001")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}

	first := post()
	runID := first.Header().Get(oke.HeaderRunID)
	fmt.Println("first:", first.Code, strings.HasPrefix(runID, "run_"))
	fmt.Println("retry:", post().Code)

	w := post("Prefer", "wait=10")
	fmt.Println("retry, waiting:", w.Code, strings.TrimSpace(w.Body.String()), w.Header().Get("Location"),
		w.Header().Get("Preference-Applied"))

	res, err := app.AwaitRun(context.Background(), runID)
	if err != nil {
		panic(err)
	}
	var label string
	if err := res.Decode(&label); err != nil {
		panic(err)
	}
	fmt.Println("AwaitRun:", res.Status, label)
	// Output:
	// first: 204 true
	// retry: 204
	// retry, waiting: 201 "shipped o_1" /shipments/o_1 wait=10
	// AwaitRun: 201 shipped o_1
}
