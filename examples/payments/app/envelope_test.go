package app_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

// Every error answer of the demo is the JSON envelope
// {"error":{"code":…,"message":…}} with the HTTP status (DESIGN.md 6 and
// 6.1): the flows', the router's 404 and 405, and those of the handlers the
// demo mounts itself (/healthz, /metrics, the fake provider). The admin API
// under /_oke/ has tests of its own. Answers net/http gives before any
// handler runs (431 for oversized headers, 400 for a request that is not
// HTTP) are plain text: no handler sees them.
func TestEveryErrorAnswerIsTheEnvelope(t *testing.T) {
	e := setup(t)
	c := e.charge(500)
	refunded := fmt.Sprintf(`{"chargeId":%q}`, c.ID)
	e.do("POST", "/refunds", refunded, "Idempotency-Key", newKey()).want(t, 201, "")
	provKey := newKey()
	provBody := `{"chargeId":"ch_x","amount":5,"currency":"usd","reference":"re_x"}`
	e.do("POST", app.ProviderPath, provBody, "Idempotency-Key", provKey).want(t, 200, "")

	cases := []struct {
		name         string
		method, path string
		body         string
		hdr          []string
		status       int
		code         string
	}{
		// The router.
		{"an unknown path is 404 NotFound", "GET", "/nope", "", nil, 404, "NotFound"},
		{"an unknown path under a route is 404 NotFound", "GET", "/charges/a/b", "", nil, 404, "NotFound"},
		{"another method on a flow's route is 405 MethodNotAllowed", "DELETE", "/charges", "", nil, 405, "MethodNotAllowed"},
		{"POST /healthz is 405 MethodNotAllowed", "POST", "/healthz", "", nil, 405, "MethodNotAllowed"},
		{"PUT /metrics is 405 MethodNotAllowed", "PUT", "/metrics", "", nil, 405, "MethodNotAllowed"},
		// Input.
		{"malformed JSON is 400 MalformedJSON", "POST", "/charges", `{"amount":`, []string{"Idempotency-Key", newKey()}, 400, "MalformedJSON"},
		{"a JSON value of the wrong type is 400 InvalidInput", "POST", "/notes", `{"text":1}`, nil, 400, "InvalidInput"},
		{"an unknown field is 400 UnknownField", "POST", "/notes", `{"text":"a","x":1}`, nil, 400, "UnknownField"},
		{"a value out of range is 400 ValidationFailed", "POST", "/slow", `{"ms":-1}`, nil, 400, "ValidationFailed"},
		{"a query parameter that is not a number is 400 InvalidInput", "GET", "/charges?limit=x", "", nil, 400, "InvalidInput"},
		{"a body over the limit is 413", "POST", "/notes", `{"text":"` + strings.Repeat("a", 2<<20) + `"}`, nil, 413, "PayloadTooLarge"},
		// Identity.
		{"Bearer bad is 401 Unauthorized", "GET", "/charges", "", []string{"Authorization", "Bearer bad"}, 401, "Unauthorized"},
		{"a bad X-Tenant is 400 InvalidTenant", "GET", "/charges", "", []string{"X-Tenant", "a b"}, 400, "InvalidTenant"},
		// Idempotency.
		{"a missing key on a required flow is 400 IdempotencyKeyMissing", "POST", "/charges", `{"amount":1,"currency":"usd"}`, nil, 400, "IdempotencyKeyMissing"},
		{"a short key is 400 IdempotencyKeyInvalid", "POST", "/charges", `{"amount":1,"currency":"usd"}`, []string{"Idempotency-Key", "short"}, 400, "IdempotencyKeyInvalid"},
		// Flows' own failures.
		{"an unknown charge is 404 NotFound", "GET", "/charges/" + unknownCharge, "", nil, 404, "NotFound"},
		{"a second refund is 409 AlreadyRefunded", "POST", "/refunds", refunded, nil, 409, "AlreadyRefunded"},
		{"a declared failure is its own status and code", "POST", "/fail", `{"when":"declared"}`, nil, 402, "PaymentDeclined"},
		{"a failure is 500 InternalError", "POST", "/fail", `{"when":"before"}`, nil, 500, "InternalError"},
		// The fake provider, mounted with HandleHTTP.
		{"the provider without an Idempotency-Key is 400", "POST", app.ProviderPath, provBody, nil, 400, "IdempotencyKeyMissing"},
		{"the provider with bad input is 400 InvalidInput", "POST", app.ProviderPath, `{"chargeId":""}`, []string{"Idempotency-Key", newKey()}, 400, "InvalidInput"},
		{"the provider with malformed JSON is 400 InvalidInput", "POST", app.ProviderPath, `{`, []string{"Idempotency-Key", newKey()}, 400, "InvalidInput"},
		{"the provider's key with another body is 422 IdempotencyKeyReused", "POST", app.ProviderPath, strings.Replace(provBody, `"amount":5`, `"amount":6`, 1), []string{"Idempotency-Key", provKey}, 422, "IdempotencyKeyReused"},
		{"another method on the provider is 405 MethodNotAllowed", "DELETE", app.ProviderPath, "", nil, 405, "MethodNotAllowed"},
		{"PUT on the provider is 405 MethodNotAllowed", "PUT", app.ProviderPath, provBody, nil, 405, "MethodNotAllowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.body, tc.hdr...)
			r.want(t, tc.status, tc.code) // want checks the envelope: Content-Type, code and message
			if tc.status == 405 && r.Header.Get("Allow") == "" {
				t.Fatalf("405 without an Allow header")
			}
		})
	}
}
