package oke_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/okengine/oke"
)

type fuzzIn struct {
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Tags     []string          `json:"tags"`
	Meta     map[string]string `json:"meta"`
	Nested   *struct {
		N float64 `json:"n"`
	} `json:"nested"`
}

// FuzzDecodeBody: any body either decodes (and then its canonical form is
// stable: sending the echoed input back under the same key replays) or gets
// a 400/413 JSON envelope; nothing panics and nothing else comes back.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"amount":1,"currency":"usd"}`, ``, `null`, `{}`, `[]`, `{"amount":"1"}`, `{"amount":1e400}`,
		`{"tags":["a","b"],"meta":{"z":"1","a":"2"},"nested":{"n":1.5}}`, `{"amount":1}{"amount":2}`,
		`{"unknown":1}`, `{"amount":`, "\xff", `{"currency":"\u00e9\ud800"}`, ` {"amount" : 2 } `,
		// Strict JSON (DESIGN.md 6.1): duplicates, case-only matches, bad UTF-8.
		`{"amount":1,"amount":2}`, `{"meta":{"a":"1","a":"2"}}`, `{"nested":{"n":1,"n":2}}`,
		`{"amount":1,"AMOUNT":2}`, `{"Currency":"usd"}`, `{"nested":{"N":1}}`, `{"meta":{"a":"1","A":"2"}}`,
		"{\"currency\":\"\xff\"}", "{\"tags\":[\"\xed\xa0\x80\"]}", `{"currency":"\udc00"}`, `{"currency":"\ud83d\ude00"}`,
		`{"amount":1,"\u0061mount":2}`,
	} {
		f.Add([]byte(s))
	}
	var n atomic.Int64
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	f.Cleanup(func() { app.Close(context.Background()) })
	app.Handle(oke.POST("/echo"), oke.NewFlow("fuzz.echo", oke.Options{},
		func(_ context.Context, in fuzzIn, _ *oke.Fx) (oke.Response[fuzzIn], error) { return oke.OK(in), nil }))
	if err := app.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		key := fmt.Sprintf("fuzz-key-%016d", n.Add(1))
		w := do(app, "POST", "/echo", string(body), "Idempotency-Key", key)
		switch w.Code {
		case 200:
			if !utf8.Valid(body) {
				t.Fatalf("accepted invalid UTF-8: %q", body)
			}
			if k := duplicateKey(body); k != "" {
				t.Fatalf("accepted the duplicated key %q: %q", k, body)
			}
			echo := w.Body.String()
			var back fuzzIn
			if err := json.Unmarshal([]byte(echo), &back); err != nil {
				t.Fatalf("echo is not JSON: %q", echo)
			}
			// The canonical re-encoding is the same request: it replays.
			w2 := do(app, "POST", "/echo", echo, "Idempotency-Key", key)
			if w2.Code != 200 || w2.Header().Get("Idempotent-Replayed") != "true" || w2.Body.String() != echo {
				t.Fatalf("canonical form of %q did not replay: %d %q", body, w2.Code, w2.Body)
			}
		case 400, 413:
			var env struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
				t.Fatalf("error without an envelope: %q", w.Body)
			}
		default:
			t.Fatalf("body %q: status %d %q", body, w.Code, w.Body)
		}
	})
}

// duplicateKey is the fuzz target's reference for strict JSON: the first
// key that appears twice in one object of body, found with encoding/json's
// token stream (independent of the decoder under test).
func duplicateKey(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		obj  bool
		key  bool // the next string token is a key
		seen map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.obj && top.key
		if top != nil && top.obj {
			top.key = !top.key
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{obj: true, key: true, seen: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if isKey {
				if top.seen[v] {
					return v
				}
				top.seen[v] = true
			}
		}
	}
}
