package client

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

func TestKeySentOnEveryMethodButGETAndHEAD(t *testing.T) {
	tests := []struct {
		method  string
		wantKey bool
	}{
		{http.MethodPost, true},
		{http.MethodPut, true},
		{http.MethodPatch, true},
		{http.MethodDelete, true},
		{"QUERY", true}, // QUERY is not GET
		{http.MethodGet, false},
		{http.MethodHead, false},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			f := setup(t, jsonReply(http.StatusOK, map[string]int{"n": 1}))
			var body []byte
			if tt.wantKey {
				body = []byte(`{"x":1}`)
			}
			resp, err := f.c.Do(context.Background(), tt.method, "/things", body)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			if reqs[0].HasKey != tt.wantKey {
				t.Fatalf("Idempotency-Key sent = %v (%q), want %v", reqs[0].HasKey, reqs[0].Key, tt.wantKey)
			}
			if resp.IdempotencyKey != reqs[0].Key {
				t.Errorf("Meta.IdempotencyKey = %q, server saw %q", resp.IdempotencyKey, reqs[0].Key)
			}
			if tt.wantKey {
				if err := ValidateKey(reqs[0].Key); err != nil {
					t.Errorf("minted key %q breaks the server's rule: %v", reqs[0].Key, err)
				}
				if reqs[0].Body != `{"x":1}` {
					t.Errorf("body = %q", reqs[0].Body)
				}
			}
		})
	}
}

func TestFreshKeyPerLogicalCall(t *testing.T) {
	f := setup(t, created)
	const calls = 5
	keys := map[string]bool{}
	for i := 0; i < calls; i++ {
		_, meta, err := post.Call(context.Background(), f.c, in1000)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		keys[meta.IdempotencyKey] = true
	}
	for _, r := range f.requests() {
		if !keys[r.Key] {
			t.Errorf("server saw key %q that no Meta reported", r.Key)
		}
	}
	if len(keys) != calls {
		t.Fatalf("%d calls used %d distinct keys, want %d: %v", calls, len(keys), calls, keys)
	}
}

func TestFreshKeyPerLogicalCallConcurrently(t *testing.T) {
	f := setup(t, created)
	const calls = 20
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := post.Call(context.Background(), f.c, in1000); err != nil {
				t.Errorf("call: %v", err)
			}
		}()
	}
	wg.Wait()
	keys := map[string]bool{}
	for _, r := range f.requests() {
		keys[r.Key] = true
	}
	if len(keys) != calls {
		t.Fatalf("%d concurrent calls used %d distinct keys", calls, len(keys))
	}
}

func TestCallerKeyHonoured(t *testing.T) {
	const key = "checkout-attempt-9f3a2c"
	f := setup(t, script(unavailable, created), WithRetry(Retry{MaxAttempts: 3}))
	_, meta, err := post.Call(context.Background(), f.c, in1000, Key(key))
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if meta.IdempotencyKey != key {
		t.Errorf("Meta.IdempotencyKey = %q, want %q", meta.IdempotencyKey, key)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Key != key {
			t.Errorf("attempt %d sent key %q, want %q", i+1, r.Key, key)
		}
	}
}

func TestCallerKeyReusedAcrossCalls(t *testing.T) {
	f := setup(t, created)
	key := NewKey()
	for i := 0; i < 2; i++ {
		if _, _, err := post.Call(context.Background(), f.c, in1000, Key(key)); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range f.requests() {
		if r.Key != key {
			t.Errorf("call %d sent %q, want %q", i+1, r.Key, key)
		}
	}
}

func TestNoKeySendsNone(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, "QUERY"} {
		t.Run(method, func(t *testing.T) {
			f := setup(t, created)
			_, meta, err := Call[chargeIn, charge](context.Background(), f.c, method, "/charges", in1000, NoKey())
			if err != nil {
				t.Fatal(err)
			}
			if r := f.requests()[0]; r.HasKey {
				t.Errorf("NoKey sent Idempotency-Key %q", r.Key)
			}
			if meta.IdempotencyKey != "" {
				t.Errorf("Meta.IdempotencyKey = %q, want empty", meta.IdempotencyKey)
			}
		})
	}
}

func TestInvalidCallerKeyRejectedBeforeSending(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"empty", "", false},
		{"15 characters", strings.Repeat("k", 15), false},
		{"16 characters", strings.Repeat("k", 16), true},
		{"255 characters", strings.Repeat("k", 255), true},
		{"256 characters", strings.Repeat("k", 256), false},
		{"inner space and tilde are printable", "~~~~~~~ ~~~~~~~~", true},
		{"leading space would be stripped in transit", " checkout-attempt-9f3a2c", false},
		{"trailing space would be stripped in transit", "checkout-attempt-9f3a2c ", false},
		{"newline", "checkout-attempt\n9f3a2c", false},
		{"tab", "checkout-attempt\t9f3a2c", false},
		{"DEL 0x7f", "checkout-attempt\x7f9f3a2c", false},
		{"non-ASCII", "checkout-attempt-é9f3a2c", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateKey(tt.key); (err == nil) != tt.ok {
				t.Fatalf("ValidateKey(%q) = %v, want ok=%v", tt.key, err, tt.ok)
			}
			f := setup(t, created)
			_, meta, err := post.Call(context.Background(), f.c, in1000, Key(tt.key))
			sent := len(f.requests())
			if tt.ok {
				if err != nil || sent != 1 || f.requests()[0].Key != tt.key {
					t.Fatalf("valid key: err=%v, sent=%d", err, sent)
				}
				return
			}
			if !errors.Is(err, ErrKeyInvalid) {
				t.Fatalf("err = %v, want one matching ErrKeyInvalid", err)
			}
			var e *Error
			if errors.As(err, &e) {
				t.Errorf("client-side rejection is an *Error (%v); no response exists", e)
			}
			if sent != 0 || meta.Attempts != 0 {
				t.Errorf("sent %d requests (Meta.Attempts %d), want 0", sent, meta.Attempts)
			}
		})
	}
}

func TestKeyAndNoKeyConflict(t *testing.T) {
	f := setup(t, created)
	if _, _, err := post.Call(context.Background(), f.c, in1000, Key(NewKey()), NoKey()); err == nil {
		t.Fatal("Key and NoKey together: no error")
	}
	if _, _, err := post.Call(context.Background(), f.c, in1000, Key(NewKey()), Key(NewKey())); err == nil {
		t.Fatal("two different Keys: no error")
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("sent %d requests", n)
	}
}

func TestIdempotencyKeyHeaderOnlyThroughKey(t *testing.T) {
	if _, err := New("http://x.test", WithHeader("idempotency-key", "k")); err == nil {
		t.Error("WithHeader(Idempotency-Key): no error")
	}
	f := setup(t, created)
	_, _, err := post.Call(context.Background(), f.c, in1000, Header("Idempotency-Key", strings.Repeat("k", 20)))
	if err == nil {
		t.Error("Header(Idempotency-Key): no error")
	}
}

func TestIdempotentReplayedExposed(t *testing.T) {
	tests := []struct {
		name   string
		header []string
		want   bool
	}{
		{"live answer", nil, false},
		{"replayed answer", []string{HeaderReplayed, "true"}, true},
		{"header is case-insensitive", []string{HeaderReplayed, "True"}, true},
		{"false is not replayed", []string{HeaderReplayed, "false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, jsonReply(http.StatusCreated, charge{ID: "ch_1"}, tt.header...))
			_, meta, err := post.Call(context.Background(), f.c, in1000)
			if err != nil {
				t.Fatal(err)
			}
			if meta.IdempotentReplayed != tt.want {
				t.Errorf("Meta.IdempotentReplayed = %v, want %v", meta.IdempotentReplayed, tt.want)
			}
		})
	}
}

func TestNewKeyIsUUIDv4(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		k := NewKey()
		if !re.MatchString(k) {
			t.Fatalf("NewKey() = %q, not a UUIDv4", k)
		}
		if seen[k] {
			t.Fatalf("NewKey() repeated %q", k)
		}
		seen[k] = true
	}
}
