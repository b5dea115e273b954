package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// seen is one request as the test server received it.
type seen struct {
	Method string
	URI    string // path and query as sent
	Key    string
	HasKey bool
	Body   string
	Header http.Header
}

// fixture is a client wired to a test server that records every request and
// a sleep hook that records every wait instead of waiting.
type fixture struct {
	c   *Client
	url string

	mu    sync.Mutex
	reqs  []seen
	waits []time.Duration
}

func (f *fixture) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fixture) slept() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

// reply answers the n-th request the server receives (n counts from 1).
type reply func(n int, w http.ResponseWriter, r *http.Request)

// setup starts a server answering with h and returns a client for it. Waits
// between attempts are recorded, not slept; jitter is fixed at 0.5.
func setup(t *testing.T, h reply, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, hasKey := r.Header[HeaderIdempotencyKey]
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{
			Method: r.Method, URI: r.URL.RequestURI(),
			Key: r.Header.Get(HeaderIdempotencyKey), HasKey: hasKey,
			Body: string(body), Header: r.Header.Clone(),
		})
		n := len(f.reqs)
		f.mu.Unlock()
		h(n, w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		f.mu.Lock()
		f.waits = append(f.waits, d)
		f.mu.Unlock()
		return ctx.Err()
	}
	c.rand = func() float64 { return 0.5 }
	f.c, f.url = c, srv.URL
	return f
}

// script answers request n with replies[n-1]; the last reply repeats.
func script(replies ...reply) reply {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		replies[min(n, len(replies))-1](n, w, r)
	}
}

// jsonReply answers status with body as JSON; hdr is name, value pairs.
func jsonReply(status int, body any, hdr ...string) reply {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		if body == nil {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
}

// envelope answers with the oke error envelope.
func envelope(status int, code, msg string, hdr ...string) reply {
	return jsonReply(status, map[string]any{"error": map[string]string{"code": code, "message": msg}}, hdr...)
}

// created answers 201 with a charge and its Location.
var created = jsonReply(http.StatusCreated, map[string]any{"id": "ch_1", "amount": 1000}, "Location", "/charges/ch_1")

// hangUp reads nothing more and closes the connection without an answer: a
// network error for the client.
func hangUp(_ int, w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(fmt.Sprintf("hijack: %v", err))
	}
	_ = conn.Close()
}

var (
	inProgress  = envelope(http.StatusConflict, CodeInProgress, ErrInProgress.Message, "Retry-After", "3")
	unavailable = envelope(http.StatusServiceUnavailable, "Unavailable", "store unavailable")
)

// noKeepAlive is an HTTP client whose Transport never reuses connections, so
// net/http itself never resends a request: every attempt the server counts is
// one the oke client made.
func noKeepAlive() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

type chargeIn struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type charge struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

var post = Endpoint[chargeIn, charge]{Method: http.MethodPost, Path: "/charges"}

var in1000 = chargeIn{Amount: 1000, Currency: "usd"}

const in1000JSON = `{"amount":1000,"currency":"usd"}`
