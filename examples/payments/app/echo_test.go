package app_test

import (
	"strings"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

// issue 21 (10): no error answer echoes a client's 60 KB id, key, path or
// field name back in full — oke.Quote cuts what a message repeats to 64
// bytes (with the length), and an envelope's message is bounded whoever
// built it.
func TestErrorsDoNotEchoHugeInput(t *testing.T) {
	e := setup(t)
	big := strings.Repeat("x", 60<<10) // under -max-header-bytes (64 KB) with the request line
	field := strings.Repeat("f", 50<<10)
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
	}{
		{"GET /charges/{id}", "GET", "/charges/" + big, "", nil, 404},
		{"GET /refunds/{id}", "GET", "/refunds/" + big, "", nil, 404},
		{"POST /refund-requests/{id}/approve", "POST", "/refund-requests/" + big + "/approve", `{"approved":true}`, []string{"Idempotency-Key", newKey(), "Authorization", "Bearer user:alice"}, 400}, // its maxLength,
		{"the router's 404", "GET", "/nope/" + big, "", nil, 404},
		{"the router's 405 (a huge method)", strings.Repeat("M", 30<<10), "/charges", "", nil, 405},
		{"the fake provider's 404", "GET", app.ProviderPath + "/" + big, "", nil, 404},
		{"an unknown field", "POST", "/notes", `{"text":"a","` + field + `":1}`, []string{"Idempotency-Key", newKey()}, 400},
		{"a duplicated field", "POST", "/webhooks/provider", `{"id":"evt_1","type":"x","` + field + `":1,"` + field + `":2}`, nil, 400},
		{"a wrong type in a field", "POST", "/charges", `{"amount":"` + field + `","currency":"usd"}`, []string{"Idempotency-Key", newKey()}, 400},
		{"an Idempotency-Key far too long", "POST", "/charges", `{"amount":1,"currency":"usd"}`, []string{"Idempotency-Key", big}, 400},
		{"GET /_oke/runs/{id}", "GET", "/_oke/runs/" + big, "", nil, 404},
		{"POST /_oke/runs/{id}/replay", "POST", "/_oke/runs/" + big + "/replay", "", nil, 404},
		{"the admin API's 404", "DELETE", "/_oke/idempotency/" + big, "", nil, 404},
		{"the admin API's ?limit=", "GET", "/_oke/runs?limit=" + big, "", nil, 400},
		{"the admin API's ?order=", "GET", "/_oke/runs?order=" + big, "", nil, 400},
		{"the admin API's ?status=", "GET", "/_oke/runs?status=" + big, "", nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.body, tc.hdr...)
			if r.Status != tc.status || len(r.Body) >= 1<<10 {
				t.Fatalf("%d, %d bytes, want %d under 1 KB: %.300s", r.Status, len(r.Body), tc.status, r.Body)
			}
			r.errorCode(t) // the envelope, still
		})
	}
}
