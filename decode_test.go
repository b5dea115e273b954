package oke_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/okengine/oke"
)

type requiredIn struct {
	ID       string       `json:"id"` // filled by the path on POST /r/{id}
	Amount   int64        `json:"amount"`
	Note     string       `json:"note,omitempty"`
	Limit    *int         `json:"limit"`
	Items    []requiredIt `json:"items,omitempty"`
	Tags     []int        `json:"tags,omitempty"`
	Optional *requiredIt  `json:"optional,omitempty"`
}

type requiredIt struct {
	SKU string `json:"sku"`
	Qty *int   `json:"qty"`
}

type optionalIn struct {
	Lines int `json:"lines,omitempty"`
}

// TestRequiredFields: a field is required exactly when its type is not a
// pointer and its json tag has no omitempty — the rule of the OpenAPI
// document's "required" — and a body without it is 400 ValidationFailed
// naming it; null is refused where it would mean the zero value.
func TestRequiredFields(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/r/{id}"), oke.NewFlow("req.r", oke.Options{Effects: []oke.Effect{}},
			func(_ context.Context, in requiredIn, _ *oke.Fx) (oke.Response[requiredIn], error) {
				return oke.OK(in), nil
			}))
		app.Handle(oke.POST("/plain"), oke.NewFlow("req.plain", oke.Options{Effects: []oke.Effect{}},
			func(_ context.Context, in requiredIn, _ *oke.Fx) (oke.Response[requiredIn], error) {
				return oke.OK(in), nil
			}))
		app.Handle(oke.GET("/q"), oke.NewFlow("req.q", oke.Options{},
			func(_ context.Context, in requiredIn, _ *oke.Fx) (oke.Response[requiredIn], error) {
				return oke.OK(in), nil
			}))
		app.Handle(oke.POST("/opt"), oke.NewFlow("req.opt", oke.Options{Effects: []oke.Effect{}},
			func(_ context.Context, in optionalIn, _ *oke.Fx) (oke.Response[optionalIn], error) {
				return oke.OK(in), nil
			}))
	})
	for _, tc := range []struct {
		name, method, path, body string
		code, in                 string // code "" means 200
	}{
		{"every required field sent", "POST", "/plain", `{"id":"a","amount":1}`, "", ""},
		{"a missing non-pointer field is 400", "POST", "/plain", `{"id":"a"}`, "ValidationFailed", `"amount" is required`},
		{"the first missing field is named", "POST", "/plain", `{}`, "ValidationFailed", `"id" is required`},
		{"an empty body lacks the required fields", "POST", "/plain", ``, "ValidationFailed", `"id" is required`},
		{"a path parameter fills its field", "POST", "/r/x", `{"amount":1}`, "", ""},
		{"an empty body still lacks the others", "POST", "/r/x", ``, "ValidationFailed", `"amount" is required`},
		{"pointer and omitempty fields are optional", "POST", "/plain", `{"id":"a","amount":0}`, "", ""},
		{"a required field of a nested object", "POST", "/plain", `{"id":"a","amount":1,"items":[{"sku":"s"},{"qty":1}]}`, "ValidationFailed", `"items[1].sku" is required`},
		{"an optional nested object, when sent, needs its fields", "POST", "/plain", `{"id":"a","amount":1,"optional":{}}`, "ValidationFailed", `"optional.sku" is required`},
		{"a GET needs no field", "GET", "/q", ``, "", ""},
		{"null for a non-pointer field is 400", "POST", "/plain", `{"id":"a","amount":null}`, "InvalidInput", `"amount" is null`},
		{"null for a pointer field is accepted", "POST", "/plain", `{"id":"a","amount":1,"limit":null}`, "", ""},
		{"null for a slice is accepted", "POST", "/plain", `{"id":"a","amount":1,"tags":null}`, "", ""},
		{"null as an item of []int is 400", "POST", "/plain", `{"id":"a","amount":1,"tags":[1,null]}`, "InvalidInput", `"tags[1]" is null`},
		{"a null body is 400", "POST", "/plain", `null`, "InvalidInput", "is null"},
		{"a type with no required field takes an empty body", "POST", "/opt", ``, "", ""},
		{"an integer written 1.0 is an integer", "POST", "/plain", `{"id":"a","amount":1.0,"tags":[2e0,3.00]}`, "", ""},
		{"an integer written 1e2 is an integer", "POST", "/plain", `{"id":"a","amount":1e2}`, "", ""},
		{"1.5 is not an integer", "POST", "/plain", `{"id":"a","amount":1.5}`, "InvalidInput", `"amount"`},
		{"1e30 does not fit an int64", "POST", "/plain", `{"id":"a","amount":1e30}`, "InvalidInput", `"amount"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(app, tc.method, tc.path, tc.body)
			if tc.code == "" {
				if w.Code != 200 {
					t.Fatalf("%d %s, want 200", w.Code, w.Body)
				}
				return
			}
			var env struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			json.Unmarshal(w.Body.Bytes(), &env)
			if w.Code != 400 || env.Error.Code != tc.code || !strings.Contains(env.Error.Message, tc.in) {
				t.Fatalf("%d %s, want 400 %s with %s", w.Code, w.Body, tc.code, tc.in)
			}
		})
	}
}

type taggedIn struct {
	Amount   int64    `json:"amount" minimum:"1" maximum:"1000000"`
	Ratio    float64  `json:"ratio,omitempty" exclusiveMinimum:"0" exclusiveMaximum:"1"`
	Currency string   `json:"currency" enum:"usd,eur"`
	Tag      string   `json:"tag,omitempty" minLength:"2" maxLength:"3"`
	Code     string   `json:"code,omitempty" pattern:"^[A-Z]{2}[0-9]+$"`
	Email    string   `json:"email,omitempty" format:"email"`
	At       string   `json:"at,omitempty" format:"date-time"`
	Level    int      `json:"level,omitempty" enum:"1,2,3"`
	Labels   []string `json:"labels,omitempty" minItems:"1" maxItems:"2" enum:"a,b"`
	Limit    *int     `json:"limit" minimum:"1"`
}

// TestValidationTags: huma-style validation tags are checked on the JSON as
// sent (and on URL parameters); a violation is 400 ValidationFailed naming
// the field and the rule; an absent optional field or a null pointer is
// not checked.
func TestValidationTags(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/t"), oke.NewFlow("tags.t", oke.Options{Effects: []oke.Effect{}},
			func(_ context.Context, in taggedIn, _ *oke.Fx) (oke.Response[taggedIn], error) {
				return oke.OK(in), nil
			}))
		app.Handle(oke.GET("/t"), oke.NewFlow("tags.get", oke.Options{},
			func(_ context.Context, in taggedIn, _ *oke.Fx) (oke.Response[taggedIn], error) {
				return oke.OK(in), nil
			}))
	})
	const ok = `"amount":5,"currency":"usd"`
	for _, tc := range []struct {
		name, method, path, body string
		in                       string // "" means 200
	}{
		{"a body within every rule", "POST", "/t", `{` + ok + `,"ratio":0.5,"tag":"ab","code":"AB12","email":"a@b.example","at":"2026-01-02T03:04:05Z","level":2,"labels":["a","b"],"limit":3}`, ""},
		{"absent optional fields are not checked", "POST", "/t", `{` + ok + `}`, ""},
		{"a null pointer is not checked", "POST", "/t", `{` + ok + `,"limit":null}`, ""},
		{"minimum", "POST", "/t", `{"amount":0,"currency":"usd"}`, `"amount" must be at least 1`},
		{"maximum", "POST", "/t", `{"amount":1000001,"currency":"usd"}`, `"amount" must be at most 1000000`},
		{"exclusiveMinimum", "POST", "/t", `{` + ok + `,"ratio":0}`, `"ratio" must be greater than 0`},
		{"exclusiveMaximum", "POST", "/t", `{` + ok + `,"ratio":1}`, `"ratio" must be less than 1`},
		{"enum of strings", "POST", "/t", `{"amount":5,"currency":"USD"}`, `"currency" must be one of "usd", "eur"`},
		{"enum of integers", "POST", "/t", `{` + ok + `,"level":4}`, `"level" must be one of 1, 2, 3`},
		{"minLength counts characters", "POST", "/t", `{` + ok + `,"tag":"é"}`, `"tag" must be at least 2 characters`},
		{"maxLength counts characters", "POST", "/t", `{` + ok + `,"tag":"éééé"}`, `"tag" must be at most 3 characters`},
		{"three two-byte characters are three", "POST", "/t", `{` + ok + `,"tag":"ééé"}`, ""},
		{"pattern", "POST", "/t", `{` + ok + `,"code":"ab12"}`, `"code" must match the pattern ^[A-Z]{2}[0-9]+$`},
		{"format email", "POST", "/t", `{` + ok + `,"email":"nope"}`, `"email" must be in the format email`},
		{"format date-time", "POST", "/t", `{` + ok + `,"at":"2026-01-02"}`, `"at" must be in the format date-time`},
		{"minItems", "POST", "/t", `{` + ok + `,"labels":[]}`, `"labels" must have at least 1 items`},
		{"maxItems", "POST", "/t", `{` + ok + `,"labels":["a","b","a"]}`, `"labels" must have at most 2 items`},
		{"an array's other rules hold for each item", "POST", "/t", `{` + ok + `,"labels":["a","c"]}`, `"labels[1]" must be one of "a", "b"`},
		{"a pointer's rule holds when it is sent", "POST", "/t", `{` + ok + `,"limit":0}`, `"limit" must be at least 1`},
		{"a query parameter's rule", "GET", "/t?amount=0", ``, `parameter "amount" must be at least 1`},
		{"a query parameter within the rules", "GET", "/t?amount=3&currency=eur", ``, ""},
		{"a query integer written 3.0", "GET", "/t?amount=3.0", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(app, tc.method, tc.path, tc.body)
			if tc.in == "" {
				if w.Code != 200 {
					t.Fatalf("%d %s, want 200", w.Code, w.Body)
				}
				return
			}
			var env struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			json.Unmarshal(w.Body.Bytes(), &env)
			if w.Code != 400 || env.Error.Code != "ValidationFailed" || !strings.Contains(env.Error.Message, tc.in) {
				t.Fatalf("%d %s, want 400 ValidationFailed with %s", w.Code, w.Body, tc.in)
			}
		})
	}
}

type badMin struct {
	N int `json:"n" minimum:"one"`
}
type badPattern struct {
	Outer struct {
		S string `json:"s" pattern:"(["`
	} `json:"outer"`
}
type badKind struct {
	N int `json:"n" minLength:"1"`
}
type badFormat struct {
	S string `json:"s" format:"color"`
}
type badRange struct {
	N int `json:"n" minimum:"5" maximum:"1"`
}
type badItems struct {
	S string `json:"s" minItems:"1"`
}

// TestBadValidationTagsStopStart: a tag that does not parse is a start-up
// error naming the flow, the type, the field and the tag.
func TestBadValidationTagsStopStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    oke.Handler
		want []string
	}{
		{"an unparseable number", flowOf[badMin]("bad.min"), []string{`flow "bad.min"`, "oke_test.badMin", "field N (n)", `minimum:"one"`, "not a number"}},
		{"a bad regular expression in a nested type", flowOf[badPattern]("bad.pattern"), []string{`flow "bad.pattern"`, "field S (s)", "pattern", "not a regular expression"}},
		{"a string rule on an integer", flowOf[badKind]("bad.kind"), []string{"field N (n)", "minLength", "applies to a string, not to an integer"}},
		{"an unknown format", flowOf[badFormat]("bad.format"), []string{"field S (s)", `format:"color"`, "unknown format"}},
		{"an empty range", flowOf[badRange]("bad.range"), []string{"field N (n)", "no value is allowed"}},
		{"an array rule on a string", flowOf[badItems]("bad.items"), []string{"minItems", "applies to an array"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
			defer app.Close(context.Background())
			app.Handle(oke.POST("/x"), tc.h)
			err := app.Start(context.Background())
			if err == nil {
				t.Fatal("Start accepted a bad tag")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func flowOf[In any](name string) oke.Handler {
	return oke.NewFlow(name, oke.Options{}, func(context.Context, In, *oke.Fx) (oke.Response[struct{}], error) {
		return oke.NoContent[struct{}](), nil
	})
}
