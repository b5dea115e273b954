package extract_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/okengine/oke"
	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/extract"
)

// openAPIDocs are the checked-in OpenAPI documents the tests validate.
var openAPIDocs = []string{"../examples/payments/openapi.json", "testdata/golden/flows.openapi.json"}

func loadOpenAPI(t *testing.T, name string) *openapi3.T {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("kin-openapi cannot load %s: %v", name, err)
	}
	return doc
}

// The OpenAPI documents are valid OpenAPI 3.1 for an independent
// validator, kin-openapi (which checks 3.1 documents, their JSON Schema
// 2020-12 keywords included).
func TestOpenAPIValidates(t *testing.T) {
	for _, name := range openAPIDocs {
		t.Run(name, func(t *testing.T) {
			doc := loadOpenAPI(t, name)
			if !doc.IsOpenAPI31OrLater() {
				t.Fatalf("openapi %q: not 3.1", doc.OpenAPI)
			}
			if err := doc.Validate(context.Background()); err != nil {
				t.Fatalf("kin-openapi: %v", err)
			}
		})
	}
}

// What the demo sends validates against the schemas of its document.
func TestOpenAPISchemasMatchTheGoTypes(t *testing.T) {
	doc := loadOpenAPI(t, "../examples/payments/openapi.json")
	cases := []struct {
		schema string
		value  any
	}{
		{"Charge", app.Charge{ID: "ch_1", Amount: 1000, Currency: "usd", CreatedAt: "2026-01-01T00:00:00.000Z"}},
		{"ChargeList", app.ChargeList{Charges: []app.Charge{{ID: "ch_1"}}}},
		{"ChargeList", app.ChargeList{}}, // a nil slice is null
		{"ChargeIn", app.ChargeIn{Amount: 1, Currency: "usd"}},
		{"Refund", app.Refund{ID: "re_1"}},
		{"WebhookAck", app.WebhookAck{Received: true, ID: "evt_1"}},
		{"PipelineLog", app.PipelineLog{Tag: "t", Steps: []app.PipelineStep{{Step: 1, Executions: 1}}}},
		{"oke.Error", map[string]any{"error": map[string]any{"code": "IdempotencyKeyReused", "message": "This Idempotency-Key was already used with a different request."}}},
	}
	for _, tc := range cases {
		ref := doc.Components.Schemas[tc.schema]
		if ref == nil {
			t.Fatalf("no schema %s", tc.schema)
		}
		b, _ := json.Marshal(tc.value)
		var v any
		json.Unmarshal(b, &v)
		if err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s %s: %v", tc.schema, b, err)
		}
	}
	// And what it does not accept, it rejects: what oke's decoder refuses
	// (a wrong type, a missing required field, an unknown field, a value a
	// validation tag forbids).
	for _, tc := range []struct {
		schema string
		body   string
	}{
		{"Charge", `{"id":1}`},
		{"ChargeIn", `{"amount":1}`},
		{"ChargeIn", `{"amount":1,"currency":"usd","extra":true}`},
		{"ChargeIn", `{"amount":0,"currency":"usd"}`},
		{"ChargeIn", `{"amount":1,"currency":"us"}`},
		{"PipelineIn", `{"tag":"","steps":1,"stepMs":0}`},
		{"PipelineIn", `{"tag":"t","steps":1001,"stepMs":0}`},
		{"FailIn", `{"when":"never"}`},
	} {
		var v any
		json.Unmarshal([]byte(tc.body), &v)
		if err := doc.Components.Schemas[tc.schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err == nil {
			t.Errorf("%s accepts %s", tc.schema, tc.body)
		}
	}
}

// The headers, parameters and extensions of honored operations.
func TestOpenAPIIdempotency(t *testing.T) {
	doc := loadOpenAPI(t, "testdata/golden/flows.openapi.json")
	op := doc.Paths.Find("/tx-only").Post
	if op.OperationID != "fixture.txOnly" {
		t.Fatalf("operationId %q", op.OperationID)
	}
	var key *openapi3.Parameter
	for _, p := range op.Parameters {
		if p.Value.Name == "Idempotency-Key" {
			key = p.Value
		}
	}
	if key == nil || !key.Required || key.In != "header" || key.Schema.Value.Pattern != extract.KeyPattern ||
		*key.Schema.Value.MaxLength != 255 || key.Schema.Value.MinLength != 16 {
		t.Fatalf("Idempotency-Key of a required flow: %+v", key)
	}
	ext, _ := json.Marshal(op.Extensions["x-oke-idempotency"])
	if string(ext) != `{"mode":"required","scope":["tenant","principal","flow"],"ttl":"24h"}` {
		t.Errorf("x-oke-idempotency %s", ext)
	}
	created := op.Responses.Value("201").Value
	if created.Headers["Idempotent-Replayed"] == nil || created.Headers["Location"] == nil {
		t.Errorf("201 headers %v", created.Headers)
	}
	for _, code := range []string{"400", "409", "422", "503"} {
		if op.Responses.Value(code) == nil {
			t.Errorf("no %s response", code)
		}
	}
	if op.Responses.Value("409").Value.Headers["Retry-After"] == nil {
		t.Error("409 has no Retry-After")
	}
	// A read-only POST honors nothing: no key, no 409 or 422.
	ro := doc.Paths.Find("/read-only").Post
	for _, p := range ro.Parameters {
		if p.Value.Name == "Idempotency-Key" {
			t.Error("a read-only POST declares Idempotency-Key")
		}
	}
	if ro.Responses.Value("409") != nil || ro.Extensions["x-oke-idempotency"] != nil {
		t.Error("a read-only POST declares 409 or x-oke-idempotency")
	}
	// A flow with two operations gets suffixed ids.
	if id := doc.Paths.Find("/rpc/fixture.callee").Post.OperationID; id != "fixture.callee.rpc" {
		t.Errorf("rpc operationId %q", id)
	}
	if id := doc.Paths.Find("/hooks/provider").Post.OperationID; id != "fixture.callee.POST" {
		t.Errorf("webhook operationId %q", id)
	}
	// GET inputs are query parameters; {name} segments path parameters.
	get := doc.Paths.Find("/items/{id}").Get
	names := map[string]string{}
	for _, p := range get.Parameters {
		names[p.Value.Name] = p.Value.In
	}
	if names["id"] != "path" || names["count"] != "query" {
		t.Errorf("GET /items/{id} parameters %v", names)
	}
}

// A client generated from the demo's OpenAPI document by an independent
// generator, oapi-codegen, compiles.
func TestOpenAPIClientCompiles(t *testing.T) {
	methods := map[string][]string{ // some of the client's methods, one per operation
		openAPIDocs[0]: {"PaymentsCharge(", "PaymentsList(", "PaymentsGet(", "PaymentsRefund(", "DemoWebhook(", "DemoEvents("},
		openAPIDocs[1]: {"FixtureTxOnly(", "FixtureCalleeRpc(", "FixtureCalleePOST(", "FixtureReadGET(", "FixtureReadGET2("},
	}
	for _, name := range openAPIDocs {
		t.Run(name, func(t *testing.T) {
			doc := loadOpenAPI(t, name)
			src, err := codegen.Generate(doc, codegen.Configuration{
				PackageName: "client",
				Generate:    codegen.GenerateOptions{Client: true, Models: true},
			})
			if err != nil {
				t.Fatalf("oapi-codegen: %v", err)
			}
			for _, m := range methods[name] {
				if !strings.Contains(src, "func (c *Client) "+m) {
					t.Errorf("the generated client has no method %s", m)
				}
			}
			buildClient(t, src)
		})
	}
}

// buildClient writes a generated client to a module of its own and builds
// it, with this module's go.sum (its dependencies are already in the
// module cache).
func buildClient(t *testing.T, src string) {
	t.Helper()
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(moduleRoot(t), "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := "module example.com/client\n\ngo 1.24\n\nrequire github.com/oapi-codegen/runtime " + oapiRuntime + "\n"
	for name, b := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "client.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// oapiRuntime is the version of the package oapi-codegen's clients import:
// the client module gets it (and its dependencies) from the module cache,
// or the Go module proxy the first time.
const oapiRuntime = "v1.9.0"

// extract's table of oke's error values is oke's.
func TestOkeErrorsTable(t *testing.T) {
	real := map[string]*oke.Error{
		"ErrIdempotencyKeyMissing": oke.ErrIdempotencyKeyMissing, "ErrIdempotencyKeyInvalid": oke.ErrIdempotencyKeyInvalid,
		"ErrIdempotencyKeyReused": oke.ErrIdempotencyKeyReused, "ErrIdempotencyInProgress": oke.ErrIdempotencyInProgress,
		"ErrInternal": oke.ErrInternal, "ErrStoreUnavailable": oke.ErrStoreUnavailable, "ErrOutcomeUnknown": oke.ErrOutcomeUnknown,
		"ErrUnavailable": oke.ErrUnavailable, "ErrResponseNotStored": oke.ErrResponseNotStored, "ErrUnauthorized": oke.ErrUnauthorized,
		"ErrForbidden": oke.ErrForbidden, "ErrPayloadTooLarge": oke.ErrPayloadTooLarge, "ErrUnsupportedMediaType": oke.ErrUnsupportedMediaType,
		"ErrNotFound": oke.ErrNotFound, "ErrShuttingDown": oke.ErrShuttingDown, "ErrRunCancelled": oke.ErrRunCancelled,
	}
	table := extract.OkeErrors()
	if len(table) != len(real) {
		t.Errorf("extract knows %d of oke's errors, the test %d", len(table), len(real))
	}
	for name, e := range real {
		if got := table[name]; got.Status != e.Status || got.Code != e.Code {
			t.Errorf("%s: extract says %d %s, oke %d %s", name, got.Status, got.Code, e.Status, e.Code)
		}
	}
}

// Every status an operation answers is listed with its own codes: the
// flow's declared failures (through helpers, package variables and oke's
// values), the input's, the key's, the gate's; no 2xx the flow never sends
// (a method value, a defer, a flow that only fails); a route bound behind a
// condition is left out; replayable answers carry Idempotent-Replayed.
func TestOpenAPIStatuses(t *testing.T) {
	res := runIn(t, "", "./testdata/answers")
	files, err := res.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var doc *openapi3.T
	for name, b := range files {
		if strings.HasSuffix(name, extract.OpenAPIFile) {
			if doc, err = openapi3.NewLoader().LoadFromData(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("kin-openapi: %v", err)
	}
	codes := func(op *openapi3.Operation, status string) []string {
		r := op.Responses.Value(status)
		if r == nil {
			return nil
		}
		s := r.Value.Content["application/json"].Schema.Value.Properties["error"].Value.Properties["code"].Value
		var out []string
		for _, e := range s.Enum {
			out = append(out, e.(string))
		}
		return out
	}
	statuses := func(op *openapi3.Operation) []string {
		var out []string
		for k := range op.Responses.Map() {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	created := doc.Paths.Find("/answers").Post
	if got := statuses(created); !slices.Equal(got, []string{"201", "400", "409", "410", "413", "415", "422", "431", "500", "503"}) {
		t.Errorf("POST /answers statuses %v", got)
	}
	if got := codes(created, "409"); !slices.Equal(got, []string{"AlreadyDone", "IdempotencyInProgress"}) {
		t.Errorf("POST /answers 409 codes %v", got)
	}
	fails := doc.Paths.Find("/only-fails").Post
	for _, tc := range []struct{ status, code string }{{"402", "PaymentDeclined"}, {"404", "NotFound"}, {"410", "ItemGone"}} {
		if !slices.Contains(codes(fails, tc.status), tc.code) {
			t.Errorf("POST /only-fails %s codes %v, want %s", tc.status, codes(fails, tc.status), tc.code)
		}
		if fails.Responses.Value(tc.status).Value.Headers["Idempotent-Replayed"] == nil {
			t.Errorf("POST /only-fails %s: a stored failure without Idempotent-Replayed", tc.status)
		}
	}
	for k := range fails.Responses.Map() {
		if strings.HasPrefix(k, "2") || k == "default" {
			t.Errorf("POST /only-fails answers %s", k)
		}
	}
	if doc.Paths.Find("/extra") != nil {
		t.Error("a binding made inside an if is in the document")
	}
	if got := codes(created, "503"); !slices.Contains(got, "OutcomeUnknown") || created.Responses.Value("503").Value.Headers["Retry-After"] == nil {
		t.Errorf("503 %v without OutcomeUnknown or Retry-After", got)
	}
}

// The demo's document: /refunds' 409 names both AlreadyRefunded and
// IdempotencyInProgress, its 404 is replayable, /export is NDJSON, the
// gate's credentials are security schemes and X-Tenant a header parameter,
// and the -unprotected route is not there.
func TestOpenAPIDemo(t *testing.T) {
	doc := loadOpenAPI(t, openAPIDocs[0])
	refund := doc.Paths.Find("/refunds").Post
	var got []string
	for _, e := range refund.Responses.Value("409").Value.Content["application/json"].Schema.Value.Properties["error"].Value.Properties["code"].Value.Enum {
		got = append(got, e.(string))
	}
	if !slices.Contains(got, "AlreadyRefunded") || !slices.Contains(got, "IdempotencyInProgress") {
		t.Errorf("POST /refunds 409 codes %v", got)
	}
	if refund.Responses.Value("404").Value.Headers["Idempotent-Replayed"] == nil {
		t.Error("POST /refunds 404 has no Idempotent-Replayed")
	}
	if doc.Paths.Find("/export").Post.Responses.Value("200").Value.Content["application/x-ndjson"] == nil {
		t.Error("POST /export is not application/x-ndjson")
	}
	if doc.Components.SecuritySchemes["bearer"] == nil || doc.Components.SecuritySchemes["apiKey"] == nil {
		t.Errorf("security schemes %v", doc.Components.SecuritySchemes)
	}
	if doc.Components.Parameters["header.X-Tenant"] == nil {
		t.Error("no X-Tenant parameter")
	}
	if doc.Paths.Find(app.UnprotectedChargesPath) != nil {
		t.Error("the -unprotected route is in the default document")
	}
	if doc.Paths.Find("/webhooks/provider").Post.Responses.Value("200").Value.Headers["Idempotent-Replayed"] == nil {
		t.Error("a webhook's redelivery header is not documented")
	}
}

// A flow with AllowUnknownFields takes other properties at every level, but
// not a key that matches a field only when case is ignored (the decoder
// refuses those still).
func TestOpenAPIAllowUnknownFields(t *testing.T) {
	res := runIn(t, "", "./testdata/answers")
	files, err := res.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var doc *openapi3.T
	for name, b := range files {
		if strings.HasSuffix(name, extract.OpenAPIFile) {
			if doc, err = openapi3.NewLoader().LoadFromData(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := doc.Paths.Find("/lenient").Post.RequestBody.Value.Content["application/json"].Schema.Value
	for body, ok := range map[string]bool{
		`{"kind":"a","inner":{"id":"x"}}`:                               true,
		`{"kind":"a","inner":{"id":"x","more":1},"extra":true}`:         true,
		`{"KIND":"a","kind":"a","inner":{"id":"x"}}`:                    false,
		`{"kind":"a","inner":{"id":"x","Id":"y"}}`:                      false,
		"{\"\u212aind\":\"a\",\"kind\":\"a\",\"inner\":{\"id\":\"x\"}}": false, // the Kelvin sign folds to k
		`{"kind":"a"}`: false, // inner is required
	} {
		var v any
		json.Unmarshal([]byte(body), &v)
		err := s.VisitJSON(v, openapi3.EnableJSONSchema2020())
		if (err == nil) != ok {
			t.Errorf("%s: accepted=%v, want %v (%v)", body, err == nil, ok, err)
		}
	}
}

// RoutablePattern says which values net/http's ServeMux routes to a
// pattern's {name}: the pattern and the mux agree on each value here.
func TestRoutablePattern(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /charges/{id}", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) })
	re := regexp.MustCompile(extract.RoutablePattern)
	for _, id := range []string{"/", ".", "..", "...", ".a", "a.", "a/..", "./", "//", "/a", "a/b", "%", " ", "\n", "ch_1", "é"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", "/charges/"+url.PathEscape(id), nil))
		if routed := w.Code == 200; routed != re.MatchString(id) {
			t.Errorf("%q: routed=%v, pattern says %v", id, routed, !routed)
		}
	}
	doc := loadOpenAPI(t, openAPIDocs[0])
	for _, p := range doc.Paths.Find("/charges/{id}").Get.Parameters {
		if p.Value.In == "path" && p.Value.Schema.Value.Pattern != extract.RoutablePattern {
			t.Errorf("path parameter %s: pattern %q", p.Value.Name, p.Value.Schema.Value.Pattern)
		}
	}
}
