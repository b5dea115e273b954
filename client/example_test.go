package client_test

import (
	"context"
	"encoding/json"
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

type ChargeIn struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type Charge struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// The API's routes, declared once with their types.
var (
	CreateCharge = client.Endpoint[ChargeIn, Charge]{Method: "POST", Path: "/charges"}
	GetCharge    = client.Endpoint[struct{}, Charge]{Method: "GET", Path: "/charges/{id}"}
)

// paymentsServer is a stand-in for an oke app: POST /charges requires an
// Idempotency-Key, replays a repeated key, and refuses a reused one;
// POST /flaky answers 503 twice per key before it succeeds.
func paymentsServer() *httptest.Server {
	type stored struct {
		body   string
		charge Charge
	}
	var (
		mu      sync.Mutex
		byKey   = map[string]stored{}
		byID    = map[string]Charge{}
		flakies = map[string]int{}
	)
	fail := func(w http.ResponseWriter, status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	answer := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			fail(w, 400, client.CodeKeyMissing, client.ErrKeyMissing.Message)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var in ChargeIn
		if json.Unmarshal(body, &in) != nil || in.Amount <= 0 {
			fail(w, 400, "InvalidInput", "amount must be > 0")
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if s, ok := byKey[key]; ok {
			if s.body != string(body) {
				fail(w, 422, client.CodeKeyReused, client.ErrKeyReused.Message)
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Location", "/charges/"+s.charge.ID)
			answer(w, 201, s.charge)
			return
		}
		c := Charge{ID: fmt.Sprintf("ch_%d", len(byID)+1), Amount: in.Amount, Currency: in.Currency}
		byKey[key], byID[c.ID] = stored{string(body), c}, c
		w.Header().Set("Location", "/charges/"+c.ID)
		answer(w, 201, c)
	})
	mux.HandleFunc("GET /charges/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		c, ok := byID[r.PathValue("id")]
		mu.Unlock()
		if !ok {
			fail(w, 404, "NotFound", "no such charge")
			return
		}
		answer(w, 200, c)
	})
	mux.HandleFunc("POST /flaky", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		key := r.Header.Get("Idempotency-Key")
		flakies[key]++
		n := flakies[key]
		mu.Unlock()
		if n <= 2 {
			fail(w, 503, "Unavailable", "try again")
			return
		}
		answer(w, 201, map[string]int{"attempt": n})
	})
	return httptest.NewServer(mux)
}

// A typed call: the client mints an Idempotency-Key, encodes the input and
// decodes the answer; a second call with the same key is replayed.
func Example() {
	srv := paymentsServer()
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithHeader("Authorization", "Bearer user:42"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	ch, meta, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000, Currency: "usd"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Status, meta.Location, ch.ID, ch.Amount, ch.Currency)
	fmt.Println("replayed:", meta.IdempotentReplayed)

	// The same logical call again (say, after a timeout): same key, same answer.
	again, meta, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000, Currency: "usd"},
		client.Key(meta.IdempotencyKey))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Status, again.ID, "replayed:", meta.IdempotentReplayed)

	got, _, err := GetCharge.Call(ctx, c, struct{}{}, client.PathParam("id", ch.ID))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fetched:", got.ID)
	// Output:
	// 201 /charges/ch_1 ch_1 1000 usd
	// replayed: false
	// 201 ch_1 replayed: true
	// fetched: ch_1
}

// Keep your own key across your own retries of one logical action, and
// mint a new one for a new action.
func ExampleKey() {
	srv := paymentsServer()
	defer srv.Close()
	c, _ := client.New(srv.URL)
	ctx := context.Background()

	key := "checkout-attempt-9f3a2c" // stored with the checkout, 16–255 printable ASCII
	for try := 1; try <= 2; try++ {
		ch, meta, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 500, Currency: "eur"}, client.Key(key))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(try, ch.ID, meta.IdempotencyKey, meta.IdempotentReplayed)
	}

	_, _, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 500, Currency: "eur"}, client.Key("too-short"))
	fmt.Println(errors.Is(err, client.ErrKeyInvalid))
	// Output:
	// 1 ch_1 checkout-attempt-9f3a2c false
	// 2 ch_1 checkout-attempt-9f3a2c true
	// true
}

// With a retry policy the client resends a 5xx (or a 409
// IdempotencyInProgress, or a network error) with the same key and body.
func ExampleWithRetry() {
	srv := paymentsServer()
	defer srv.Close()
	c, _ := client.New(srv.URL, client.WithRetry(client.Retry{
		MaxAttempts: 5,
		BaseDelay:   time.Millisecond, // tiny for the example; the default is 100ms
		MaxDelay:    5 * time.Millisecond,
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	out, meta, err := client.Call[struct{}, map[string]int](ctx, c, "POST", "/flaky", struct{}{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Status, "after", meta.Attempts, "attempts; server saw attempt", out["attempt"], "of one key")
	// Output:
	// 201 after 3 attempts; server saw attempt 3 of one key
}

// Errors are values: match the idempotency codes with errors.Is, read the
// rest from *client.Error.
func ExampleError() {
	srv := paymentsServer()
	defer srv.Close()
	c, _ := client.New(srv.URL)
	ctx := context.Background()
	key := client.NewKey()

	_, _, _ = CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000, Currency: "usd"}, client.Key(key))
	// Same key, different payload.
	_, _, err := CreateCharge.Call(ctx, c, ChargeIn{Amount: 2000, Currency: "usd"}, client.Key(key))
	fmt.Println(errors.Is(err, client.ErrKeyReused))

	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, e.Retryable())
		fmt.Println(e.Message)
	}

	_, _, err = CreateCharge.Call(ctx, c, ChargeIn{Amount: 1000}, client.NoKey())
	fmt.Println(err)
	// Output:
	// true
	// 422 IdempotencyKeyReused false
	// This Idempotency-Key was already used with a different request.
	// oke client: POST /charges: 400 IdempotencyKeyMissing: This call requires an Idempotency-Key header.
}

// Do is the untyped layer: bytes in, status, headers and bytes out.
func ExampleClient_Do() {
	srv := paymentsServer()
	defer srv.Close()
	c, _ := client.New(srv.URL)

	resp, err := c.Do(context.Background(), "POST", "/charges", []byte(`{"amount":700,"currency":"gbp"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, resp.Location, resp.Attempts, len(resp.IdempotencyKey))
	fmt.Print(string(resp.Body))
	// Output:
	// 201 /charges/ch_1 1 36
	// {"id":"ch_1","amount":700,"currency":"gbp"}
}
