package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/okengine/oke/client"
)

// An Operation is a route with its flow's key rule, as `oke gen client`
// writes one per method: a flow that requires a key refuses NoKey before
// anything is sent; one that ignores the header refuses Key.
func ExampleInvoke() {
	srv := paymentsServer()
	defer srv.Close()
	c, _ := client.New(srv.URL)
	ctx := context.Background()

	charge := client.Operation{Flow: "payments.charge", Method: "POST", Path: "/charges", Key: client.KeyRequired}
	get := client.Operation{Flow: "payments.get", Method: "GET", Path: "/charges/{id}", Key: client.KeyIgnored}

	ch, meta, err := client.Invoke[ChargeIn, Charge](ctx, c, charge, ChargeIn{Amount: 1000, Currency: "usd"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Status, ch.ID, len(meta.IdempotencyKey))

	_, meta, err = client.Invoke[ChargeIn, Charge](ctx, c, charge, ChargeIn{Amount: 1000, Currency: "usd"}, client.NoKey())
	fmt.Println(errors.Is(err, client.ErrKeyMissing), meta.Attempts)
	fmt.Println(err)

	got, _, err := client.Invoke[struct{}, Charge](ctx, c, get, struct{}{}, client.PathParam("id", ch.ID))
	fmt.Println(got.ID, err)
	_, _, err = client.Invoke[struct{}, Charge](ctx, c, get, struct{}{}, client.PathParam("id", ch.ID), client.Key(client.NewKey()))
	fmt.Println(err != nil)
	// Output:
	// 201 ch_1 36
	// true 0
	// oke client: POST /charges: flow payments.charge requires an Idempotency-Key, so client.NoKey() is refused: drop it (a fresh key is sent) or pass the call's key with client.Key
	// ch_1 <nil>
	// true
}

// A retry of a 409 IdempotencyInProgress asks the server to hold it until
// the first call with the key finishes (Prefer: wait=N): here a stand-in
// server holds it, then answers the first call's stored response.
func ExampleRetry_preferWait() {
	var (
		mu      sync.Mutex
		running = map[string]chan struct{}{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		done, busy := running[key]
		if !busy {
			done = make(chan struct{})
			running[key] = done
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case !busy: // the first call: it takes a while
			time.Sleep(50 * time.Millisecond)
			close(done)
			w.WriteHeader(201)
			io.WriteString(w, `{"id":"ch_1","amount":1000,"currency":"usd"}`)
		case r.Header.Get("Prefer") == "": // no wait asked: the usual 409
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(409)
			io.WriteString(w, `{"error":{"code":"IdempotencyInProgress","message":"This Idempotency-Key is still running. Retry after the given delay."}}`)
		default: // held until the first call finishes, then its answer
			<-done
			w.Header().Set("Preference-Applied", r.Header.Get("Prefer"))
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(201)
			io.WriteString(w, `{"id":"ch_1","amount":1000,"currency":"usd"}`)
		}
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, client.WithRetry(client.Retry{MaxAttempts: 3, PreferWait: 10 * time.Second}))
	ctx := context.Background()
	key := client.NewKey()

	first := make(chan error)
	go func() {
		_, _, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000, Currency: "usd"}, client.Key(key))
		first <- err
	}()
	for { // until the first call runs
		mu.Lock()
		_, started := running[key]
		mu.Unlock()
		if started {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ch, meta, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000, Currency: "usd"}, client.Key(key))
	if err != nil || <-first != nil {
		log.Fatal(err)
	}
	fmt.Println(ch.ID, meta.Attempts, "attempts; waited:", meta.Waited, "replayed:", meta.IdempotentReplayed)
	// Output:
	// ch_1 2 attempts; waited: true replayed: true
}
