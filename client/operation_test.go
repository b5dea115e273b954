package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

var (
	opRequired = Operation{Flow: "payments.charge", Method: http.MethodPost, Path: "/charges", Key: KeyRequired}
	opAuto     = Operation{Flow: "payments.refund", Method: http.MethodPost, Path: "/refunds"}
	opIgnored  = Operation{Flow: "bench.unprotected", Method: http.MethodPost, Path: "/unprotected", Key: KeyIgnored}
	opReadOnly = Operation{Flow: "search.query", Method: http.MethodPost, Path: "/search", Key: KeyIgnored, ReadOnly: true}
	opGet      = Operation{Flow: "payments.get", Method: http.MethodGet, Path: "/charges/{id}", Key: KeyIgnored}
)

// Each key rule of the contract: what is sent, and what is refused before
// sending, naming the flow.
func TestOperationKeyRules(t *testing.T) {
	caller := "checkout-attempt-9f3a2c"
	tests := []struct {
		name    string
		op      Operation
		opts    []CallOption
		key     string // "fresh" for a fresh one
		wantErr string
		is      error
	}{
		{name: "required: a fresh key", op: opRequired, key: "fresh"},
		{name: "required: the caller's key", op: opRequired, opts: []CallOption{Key(caller)}, key: caller},
		{name: "required: NoKey is refused", op: opRequired, opts: []CallOption{NoKey()},
			wantErr: "oke client: POST /charges: flow payments.charge requires an Idempotency-Key, so client.NoKey() is refused", is: ErrKeyMissing},
		{name: "required: an invalid key is refused", op: opRequired, opts: []CallOption{Key("short")}, is: ErrKeyInvalid, wantErr: "invalid Idempotency-Key"},
		{name: "auto: a fresh key", op: opAuto, key: "fresh"},
		{name: "auto: the caller's key", op: opAuto, opts: []CallOption{Key(caller)}, key: caller},
		{name: "auto: NoKey sends none", op: opAuto, opts: []CallOption{NoKey()}},
		{name: "ignored: no key", op: opIgnored},
		{name: "ignored: NoKey is what happens anyway", op: opIgnored, opts: []CallOption{NoKey()}},
		{name: "ignored: Key is refused", op: opIgnored, opts: []CallOption{Key(caller)},
			wantErr: "flow bench.unprotected does not honor the Idempotency-Key header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, created)
			_, meta, err := Invoke[chargeIn, charge](context.Background(), f.c, tt.op, in1000, tt.opts...)
			reqs := f.requests()
			if tt.wantErr != "" || tt.is != nil {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || tt.is != nil && !errors.Is(err, tt.is) {
					t.Fatalf("err = %v, want %q (errors.Is %v)", err, tt.wantErr, tt.is)
				}
				if len(reqs) != 0 || meta.Attempts != 0 {
					t.Fatalf("sent %d requests", len(reqs))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := reqs[0]
			switch tt.key {
			case "":
				if r.HasKey || meta.IdempotencyKey != "" {
					t.Errorf("sent key %q, want none", r.Key)
				}
			case "fresh":
				if ValidateKey(r.Key) != nil || r.Key != meta.IdempotencyKey {
					t.Errorf("sent key %q (meta %q), want a fresh one", r.Key, meta.IdempotencyKey)
				}
			default:
				if r.Key != tt.key {
					t.Errorf("sent key %q, want %q", r.Key, tt.key)
				}
			}
			if r.Body != in1000JSON {
				t.Errorf("body %q", r.Body)
			}
		})
	}
}

// Without a key a POST is sent once (it could run twice), unless the
// flow only reads.
func TestOperationReadOnlyIsRetriedWithoutKey(t *testing.T) {
	for _, tt := range []struct {
		op   Operation
		want int
	}{{opIgnored, 1}, {opReadOnly, 3}} {
		f := setup(t, unavailable, retry3)
		_, meta, err := Invoke[chargeIn, charge](context.Background(), f.c, tt.op, in1000)
		if !errors.Is(err, &Error{Status: 503}) || meta.Attempts != tt.want || len(f.requests()) != tt.want {
			t.Errorf("%s: err %v, %d attempts, want 503 after %d", tt.op.Flow, err, meta.Attempts, tt.want)
		}
	}
}

func TestOperationErrorsNameTheFlow(t *testing.T) {
	f := setup(t, envelope(422, CodeKeyReused, ErrKeyReused.Message))
	_, _, err := Invoke[chargeIn, charge](context.Background(), f.c, opRequired, in1000)
	var e *Error
	if !errors.As(err, &e) || e.Flow != "payments.charge" || !errors.Is(err, ErrKeyReused) {
		t.Fatalf("err = %v, want a 422 *Error of payments.charge", err)
	}
	if want := "oke client: payments.charge: POST /charges: 422 IdempotencyKeyReused: " + ErrKeyReused.Message; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
}

func TestPathAndQueryValues(t *testing.T) {
	type id string
	seven, zero, no := 7, 0, false
	var nilInt *int
	tests := []struct {
		name    string
		path    string
		opts    []CallOption
		wantURI string
		wantErr string
	}{
		{name: "string", path: "/charges/{id}", opts: []CallOption{PathValue("id", "ch 1")}, wantURI: "/charges/ch%201"},
		{name: "named string", path: "/charges/{id}", opts: []CallOption{PathValue("id", id("ch_1"))}, wantURI: "/charges/ch_1"},
		{name: "integers, bool, float", path: "/p/{a}/{b}/{c}/{d}", opts: []CallOption{PathValue("a", int64(-3)), PathValue("b", uint8(9)), PathValue("c", true), PathValue("d", 2.5)}, wantURI: "/p/-3/9/true/2.5"},
		{name: "pointer", path: "/p/{n}", opts: []CallOption{PathValue("n", &seven)}, wantURI: "/p/7"},
		{name: "nil pointer", path: "/p/{n}", opts: []CallOption{PathValue("n", nilInt)}, wantErr: "path parameter {n} is a nil pointer"},
		{name: "not a scalar", path: "/p/{n}", opts: []CallOption{PathValue("n", []int{1})}, wantErr: "a []int cannot be written in a URL"},
		{name: "wildcard keeps its slashes", path: "/files/{path...}", opts: []CallOption{PathParam("path", "a b/c?/d")}, wantURI: "/files/a%20b/c%3F/d"},
		{name: "{$} is dropped", path: "/{$}", wantURI: "/"},
		{name: "zero values are not sent", path: "/charges", opts: []CallOption{QueryValue("limit", 0), QueryValue("q", ""), QueryValue("live", false), QueryValue("n", nilInt)}, wantURI: "/charges"},
		{name: "query values", path: "/charges", opts: []CallOption{QueryValue("limit", 10), QueryValue("q", "a&b"), QueryValue("live", true)}, wantURI: "/charges?limit=10&live=true&q=a%26b"},
		{name: "a pointer to zero is sent", path: "/charges", opts: []CallOption{QueryValue("limit", &zero), QueryValue("live", &no)}, wantURI: "/charges?limit=0&live=false"},
		{name: "a bad query value", path: "/charges", opts: []CallOption{QueryValue("m", map[string]int{"a": 1})}, wantErr: "query parameter m: a map[string]int cannot be written in a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, jsonReply(200, charge{ID: "ch_1"}))
			op := Operation{Flow: "x.get", Method: http.MethodGet, Path: tt.path, Key: KeyIgnored}
			_, _, err := Invoke[struct{}, charge](context.Background(), f.c, op, struct{}{}, tt.opts...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || len(f.requests()) != 0 {
					t.Fatalf("err = %v, %d requests; want %q and nothing sent", err, len(f.requests()), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.requests()[0].URI; got != tt.wantURI {
				t.Errorf("URI %q, want %q", got, tt.wantURI)
			}
		})
	}
}

func TestStreamHandsOverTheBody(t *testing.T) {
	lines := "{\"line\":1}\n{\"line\":2}\n"
	f := setup(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, lines)
	})
	op := Operation{Flow: "demo.export", Method: http.MethodPost, Path: "/export", Key: KeyIgnored}
	resp, meta, err := Stream(context.Background(), f.c, op, map[string]int{"lines": 2})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != lines {
		t.Fatalf("body %q (%v), want %q", b, err, lines)
	}
	if meta.Status != 200 || meta.Attempts != 1 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("meta %+v, header %v", meta, resp.Header)
	}
	r := f.requests()[0]
	if r.HasKey || r.Body != `{"lines":2}` || r.Header.Get("Accept") != "" {
		t.Errorf("request: key %v, body %q, Accept %q; want no key, the input, no Accept", r.HasKey, r.Body, r.Header.Get("Accept"))
	}
}

func TestStreamErrorAndRetry(t *testing.T) {
	f := setup(t, script(unavailable, envelope(404, "NotFound", "no such export")),
		WithRetry(Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	op := Operation{Flow: "demo.events", Method: http.MethodGet, Path: "/events", Key: KeyIgnored}
	resp, meta, err := Stream(context.Background(), f.c, op, struct{}{})
	var e *Error
	if resp != nil || !errors.As(err, &e) || e.Status != 404 || e.Code != "NotFound" || e.Flow != "demo.events" {
		t.Fatalf("resp %v, err %v: want no response and the 404 *Error", resp, err)
	}
	if meta.Attempts != 2 {
		t.Errorf("attempts %d, want 2 (the 503 retried, the 404 not)", meta.Attempts)
	}
}
