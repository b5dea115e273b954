package oke_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/okengine/oke"
)

// strictIn's fields are all optional: these tests are about how keys and
// strings are read (TestRequiredFields is about which fields must be sent).
type strictIn struct {
	Amount   int64             `json:"amount,omitempty"`
	Currency string            `json:"currency,omitempty"`
	Meta     map[string]string `json:"meta,omitempty"`
	Items    []strictItem      `json:"items,omitempty"`
	Raw      json.RawMessage   `json:"raw,omitempty"`
	Any      any               `json:"any,omitempty"`
	strictEmbedded
}

type strictItem struct {
	SKU string `json:"sku,omitempty"`
}

type strictEmbedded struct {
	Note string `json:"note,omitempty"`
}

// TestStrictJSON: DESIGN.md 6.1 "Strict JSON" — a duplicated key, a key that
// matches a field only when case is ignored, or invalid UTF-8 inside a string
// is 400 with an error envelope and no idempotency code, and the flow never
// runs; what encoding/json accepts otherwise is accepted as before.
func TestStrictJSON(t *testing.T) {
	for _, lenient := range []bool{false, true} {
		runs := 0
		app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
		t.Cleanup(func() { app.Close(context.Background()) })
		app.Handle(oke.POST("/in"), oke.NewFlow("strict.in", oke.Options{AllowUnknownFields: lenient},
			func(_ context.Context, in strictIn, _ *oke.Fx) (oke.Response[strictIn], error) {
				runs++
				return oke.OK(in), nil
			}))
		if err := app.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, body, code string // code "" means accepted (200)
			in               string
		}{
			{"a plain body is accepted", `{"amount":1,"currency":"usd"}`, "", ""},
			{"a duplicated key is 400 DuplicateField", `{"amount":1,"amount":2}`, "DuplicateField", `"amount"`},
			{"a duplicated key far apart", `{"amount":1,"currency":"usd","meta":{},"items":[],"note":"x","any":1,"raw":1,"currency":"eur"}`, "DuplicateField", `"currency"`},
			{"a duplicated key in a nested struct", `{"items":[{"sku":"a"},{"sku":"a","sku":"b"}]}`, "DuplicateField", `"items[1].sku"`},
			{"a duplicated key in a map", `{"meta":{"a":"1","a":"2"}}`, "DuplicateField", `"meta.a"`},
			{"a duplicated key spelled with an escape", `{"amount":1,"\u0061mount":2}`, "DuplicateField", `"amount"`},
			{"a duplicated key under any", `{"any":{"x":1,"x":2}}`, "DuplicateField", `"any.x"`},
			{"a duplicated key under a RawMessage", `{"raw":{"x":1,"x":2}}`, "DuplicateField", `"raw.x"`},
			{"a key matching only by case is 400 UnknownField", `{"amount":1,"AMOUNT":2}`, "UnknownField", `"AMOUNT"`},
			{"a key matching only by case alone", `{"Amount":2}`, "UnknownField", `"Amount"`},
			{"a key matching an embedded field only by case", `{"NOTE":"x"}`, "UnknownField", `"NOTE"`},
			{"a key matching only by case in a nested struct", `{"items":[{"SKU":"a"}]}`, "UnknownField", `"items[0].SKU"`},
			{"a key matching only by Unicode case folding (Kelvin sign)", `{"items":[{"s\u212au":"a"}]}`, "UnknownField", `"items[0].sku"`},
			{"map keys may differ only by case", `{"meta":{"a":"1","A":"2"}}`, "", ""},
			{"invalid UTF-8 in a string is 400 MalformedJSON", "{\"currency\":\"us\xffd\"}", "MalformedJSON", "invalid UTF-8"},
			{"invalid UTF-8 in a key", "{\"meta\":{\"\xc3\":\"1\"}}", "MalformedJSON", "invalid UTF-8"},
			{"a lone high surrogate escape", `{"currency":"\ud800"}`, "MalformedJSON", "invalid UTF-8"},
			{"a lone low surrogate escape", `{"currency":"\udc00x"}`, "MalformedJSON", "invalid UTF-8"},
			{"a reversed surrogate pair", `{"currency":"\udc00\ud800"}`, "MalformedJSON", "invalid UTF-8"},
			{"invalid UTF-8 under any", "{\"any\":[\"\xed\xa0\x80\"]}", "MalformedJSON", "invalid UTF-8"},
			{"a valid surrogate pair is accepted", `{"currency":"\ud83d\ude00"}`, "", ""},
			{"U+FFFD written as such is accepted", `{"currency":"\ufffd` + "\xef\xbf\xbd" + `"}`, "", ""},
			{"multi-byte UTF-8 is accepted", `{"currency":"é€😀"}`, "", ""},
			{"escapes are accepted", `{"currency":"a\"b\\c\/d\n\t\u00e9"}`, "", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := runs
				w := do(app, "POST", "/in", tc.body, "Idempotency-Key", "strict-json-key-0001-"+tc.name)
				if tc.code == "" {
					if w.Code != 200 {
						t.Fatalf("lenient=%v: %d %s, want 200", lenient, w.Code, w.Body)
					}
					return
				}
				var env struct {
					Error struct{ Code, Message string } `json:"error"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
					t.Fatalf("not an envelope: %q", w.Body)
				}
				if w.Code != 400 || env.Error.Code != tc.code || !strings.Contains(env.Error.Message, tc.in) {
					t.Fatalf("lenient=%v: %d %s %q, want 400 %s mentioning %s", lenient, w.Code, env.Error.Code, env.Error.Message, tc.code, tc.in)
				}
				if runs != before {
					t.Fatal("the flow ran")
				}
			})
		}
	}
}

// TestStrictJSONDistinctBytesNeverShareAFingerprint: two bodies whose bytes
// differ only in invalid UTF-8 were once decoded to the same input (U+FFFD)
// and the second replayed the first; now neither runs, so a key can never
// replay an answer to another request.
func TestStrictJSONDistinctBytesNeverShareAFingerprint(t *testing.T) {
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	app.Handle(oke.POST("/in"), oke.NewFlow("strict.fp", oke.Options{},
		func(_ context.Context, in strictIn, _ *oke.Fx) (oke.Response[strictIn], error) {
			return oke.OK(in), nil
		}))
	key := "strict-json-fingerprint-key"
	for _, body := range []string{"{\"currency\":\"\xff\"}", "{\"currency\":\"\xfe\"}"} {
		if w := do(app, "POST", "/in", body, "Idempotency-Key", key); w.Code != 400 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%q: %d %s", body, w.Code, w.Body)
		}
	}
}

// TestPathParameterMustBeUTF8: a path value is part of the input and its
// fingerprint, so it is refused rather than repaired.
func TestPathParameterMustBeUTF8(t *testing.T) {
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	app.Handle(oke.POST("/items/{sku}"), oke.NewFlow("strict.path", oke.Options{},
		func(_ context.Context, in strictItem, _ *oke.Fx) (oke.Response[strictItem], error) {
			return oke.OK(in), nil
		}))
	if w := do(app, "POST", "/items/%FF", ""); w.Code != 400 || !strings.Contains(w.Body.String(), "UTF-8") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := do(app, "POST", "/items/%C3%A9", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"sku":"é"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
