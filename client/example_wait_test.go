package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/okengine/oke/client"
)

type ShipIn struct {
	Order string `json:"order"`
}

var Ship = client.Endpoint[ShipIn, string]{Method: "POST", Path: "/shipments"}

// shippingServer is a stand-in for an oke app with a durable flow that
// sleeps: the first call with a key parks its run (204, Oke-Run-Id); a
// retry with the key and Prefer: wait is held until the run ends and gets
// its final answer (here the run ends at once).
func shippingServer() *httptest.Server {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		again := seen[key]
		seen[key] = true
		mu.Unlock()
		prefer := r.Header.Get("Prefer")
		switch {
		case !again: // the run parks
			w.Header().Set("Oke-Run-Id", "run_1")
			w.WriteHeader(http.StatusNoContent)
		case strings.HasPrefix(prefer, "wait="): // held until the run ends
			w.Header().Set("Preference-Applied", prefer)
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `"shipped o_1"`+"\n")
		default: // spec 004: the stored 204
			w.Header().Set("Oke-Run-Id", "run_1")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusNoContent)
		}
	}))
}

// A durable flow's parked answer is ErrPending, not a zero value; Wait
// gets the run's final answer, by the call's key.
func ExampleWait() {
	srv := shippingServer()
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	_, meta, err := Ship.Call(ctx, c, ShipIn{Order: "o_1"})
	fmt.Println(errors.Is(err, client.ErrPending), meta.Pending, meta.RunID)

	// The same call again, with its key, waiting for the final answer.
	label, meta, err := Ship.Call(ctx, c, ShipIn{Order: "o_1"}, client.Key(meta.IdempotencyKey), client.Wait(time.Minute))
	fmt.Println(label, meta.Status, meta.Waited, err)
	// Output:
	// true true run_1
	// shipped o_1 201 true <nil>
}
