package spectest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

// miniSpec is a small document for the test of the test: an honored POST
// with a strict body and a GET by id.
const miniSpec = `{
  "openapi": "3.1.0",
  "info": {"title": "mini", "version": "1"},
  "paths": {
    "/things": {"post": {
      "operationId": "things.create",
      "parameters": [{"name": "Idempotency-Key", "in": "header", "required": true,
        "schema": {"type": "string", "minLength": 16, "maxLength": 64, "pattern": "^[!-~]{16,64}$"}}],
      "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ThingIn"}}}},
      "responses": {
        "201": {"description": "created", "headers": {"Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}}},
          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
        "400": {"description": "bad", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        "415": {"description": "media type", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        "422": {"description": "key reused", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
      }}},
    "/things/{id}": {"get": {
      "operationId": "things.get",
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^t[0-9]{1,6}$"}}],
      "responses": {
        "200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
        "400": {"description": "bad", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
      }}}
  },
  "components": {"schemas": {
    "ThingIn": {"type": "object", "additionalProperties": false, "required": ["n"],
      "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10}, "s": {"type": "string", "maxLength": 3}}},
    "Thing": {"type": "object", "required": ["id", "n"], "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}},
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}}}}
  }}
}`

// lies are the ways miniServer can depart from miniSpec.
type lies struct {
	acceptUnknown   bool // an unknown field is accepted
	refuseTen       bool // n = 10, the documented maximum, is refused
	extraHeader     bool // every answer has an undocumented header
	wrongBody       bool // the 201's id is a number
	teapot          bool // GET answers 418, which is not documented
	noReplayHeader  bool // a replay lacks Idempotent-Replayed
	ignoreMediaType bool // a text/plain body is taken as JSON
}

// miniServer serves miniSpec honestly, but for the lies asked for.
func miniServer(t *testing.T, l lies) string {
	var (
		mu     sync.Mutex
		stored = map[string][2][]byte{} // key → body in, body out
		n      int
	)
	fail := func(w http.ResponseWriter, status int, code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q}}`, code)
	}
	keyRE := regexp.MustCompile(`^[!-~]{16,64}$`)
	idRE := regexp.MustCompile(`^t[0-9]{1,6}$`)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /things", func(w http.ResponseWriter, r *http.Request) {
		if l.extraHeader {
			w.Header().Set("X-Lie", "1")
		}
		body, _ := io.ReadAll(r.Body)
		if len(body) == 0 {
			fail(w, 400, "BodyMissing")
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" && !l.ignoreMediaType {
			fail(w, 415, "UnsupportedMediaType")
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if !keyRE.MatchString(key) {
			fail(w, 400, "IdempotencyKeyInvalid")
			return
		}
		in, ok := strictThing(body, l.acceptUnknown)
		if !ok || (l.refuseTen && in == 10) {
			fail(w, 400, "ValidationFailed")
			return
		}
		canon := []byte(fmt.Sprint(in, string(body)))
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if s, ok := stored[key]; ok {
			if !bytes.Equal(s[0], canon) {
				fail(w, 422, "IdempotencyKeyReused")
				return
			}
			if !l.noReplayHeader {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			w.WriteHeader(201)
			w.Write(s[1])
			return
		}
		n++
		out := fmt.Sprintf(`{"id":"t%d","n":%d}`, n, in)
		if l.wrongBody {
			out = fmt.Sprintf(`{"id":%d,"n":%d}`, n, in)
		}
		stored[key] = [2][]byte{canon, []byte(out)}
		w.WriteHeader(201)
		io.WriteString(w, out)
	})
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		if l.extraHeader {
			w.Header().Set("X-Lie", "1")
		}
		if l.teapot {
			fail(w, 418, "Teapot")
			return
		}
		if !idRE.MatchString(r.PathValue("id")) {
			fail(w, 400, "InvalidInput")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"n":1}`, r.PathValue("id"))
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

// strictThing decodes a ThingIn as miniSpec states it: an object, no
// duplicated or unknown key, n an integer in 1..10, s at most 3
// characters.
func strictThing(b []byte, acceptUnknown bool) (int64, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, false
	}
	seen := map[string]bool{}
	var n int64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, false
		}
		k := tok.(string)
		if seen[k] {
			return 0, false
		}
		seen[k] = true
		var v any
		if err := dec.Decode(&v); err != nil {
			return 0, false
		}
		switch k {
		case "n":
			num, ok := v.(json.Number)
			if !ok || strings.ContainsAny(string(num), ".eE") {
				return 0, false
			}
			x, err := num.Int64()
			if err != nil || x < 1 || x > 10 {
				return 0, false
			}
			n = x
		case "s":
			s, ok := v.(string)
			if !ok || utf8.RuneCountInString(s) > 3 {
				return 0, false
			}
		default:
			if !acceptUnknown {
				return 0, false
			}
		}
	}
	if _, err := dec.Token(); err != nil || !seen["n"] {
		return 0, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, false
	}
	return n, true
}

// The property checks find nothing on a server that keeps its document,
// and find each lie of one that does not: the test of the demo can fail,
// and for the right reason.
func TestDriveFindsEachLie(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(miniSpec))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		lies lies
		want string // a finding's key contains it ("" = no finding at all)
	}{
		{"an honest server", lies{}, ""},
		{"an unknown field accepted", lies{acceptUnknown: true}, "(additionalProperties: false)"},
		{"the documented maximum refused", lies{refuseTen: true}, "valid request refused 400"},
		{"an undocumented header", lies{extraHeader: true}, "header X-Lie"},
		{"a body off its schema", lies{wrongBody: true}, "status 201: response body doesn't match schema"},
		{"an undocumented status", lies{teapot: true}, "status 418"},
		{"a replay without Idempotent-Replayed", lies{noReplayHeader: true}, "replay"},
		{"a media type not refused", lies{ignoreMediaType: true}, "invalid Content-Type text/plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			found, _ := drive(t, doc, miniServer(t, tc.lies))
			var keys []string
			for _, f := range found.list() {
				keys = append(keys, f.op+": "+f.key)
			}
			if tc.want == "" {
				if len(keys) > 0 {
					t.Fatalf("findings on an honest server:\n%s", strings.Join(keys, "\n"))
				}
				return
			}
			for _, k := range keys {
				if strings.Contains(k, tc.want) {
					return
				}
			}
			t.Fatalf("no finding %q; found:\n%s", tc.want, strings.Join(keys, "\n"))
		})
	}
}
