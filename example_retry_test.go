package oke_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// A step whose function returns a plain error runs again by its retry
// policy; the attempts are saved with the step. (Waits this short are spent
// in process: the request gets the run's answer.)
func ExampleRetry() {
	calls := 0
	notify := oke.NewFlow("orders.notify", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
			id, err := oke.Step(ctx, "send email", func(ctx context.Context) (string, error) {
				calls++
				if calls < 3 {
					return "", errors.New("smtp: connection reset") // transient: retried
				}
				return "msg_1", nil
			}, oke.Retry(oke.RetryPolicy{MaxAttempts: 5, InitialBackoff: 10 * time.Millisecond}))
			if err != nil {
				return oke.Response[string]{}, err
			}
			return oke.Created(id, ""), nil
		})

	app := oke.New(oke.Config{})
	defer app.Close(context.Background())
	app.Handle(oke.POST("/notify"), notify)
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}

	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/notify", strings.NewReader(`{}`)))
	fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))

	runs, _ := app.Journal().ListRuns(context.Background(), driver.RunFilter{}, 0)
	_, steps, _ := app.Journal().GetRun(context.Background(), runs[0].ID)
	fmt.Println(steps[0].Name, "attempts:", steps[0].Attempts)
	// Output:
	// 201 "msg_1"
	// send email attempts: 3
}

// Backoff shows a policy's waits; u is the jitter's draw (0.5: none).
func ExampleRetryPolicy_Backoff() {
	p := oke.RetryPolicy{InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: 10 * time.Second, Jitter: 0.1}
	for attempt := 1; attempt <= 5; attempt++ {
		fmt.Println(attempt, p.Backoff(attempt, 0.5), p.Backoff(attempt, 0), p.Backoff(attempt, 1))
	}
	// Output:
	// 1 1s 900ms 1.1s
	// 2 2s 1.8s 2.2s
	// 3 4s 3.6s 4.4s
	// 4 8s 7.2s 8.8s
	// 5 10s 9s 11s
}
