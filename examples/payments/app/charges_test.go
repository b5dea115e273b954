package app_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

var chargeID = regexp.MustCompile(`^ch_[0-9a-f]{24}$`)

// POST /charges: payments.charge, Idempotency-Key required.
func TestPostCharges(t *testing.T) {
	t.Run("creates a charge: 201, the charge JSON with id, Location /charges/{id}", func(t *testing.T) {
		e := setup(t)
		r := e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", newKey())
		r.want(t, 201, "")
		var body map[string]any
		r.decode(t, &body)
		id, _ := body["id"].(string)
		if !chargeID.MatchString(id) {
			t.Fatalf("id = %q, want ch_ and 24 hex digits (body %s)", id, r.Body)
		}
		if body["amount"] != 1000.0 || body["currency"] != "usd" {
			t.Fatalf("body = %s, want amount 1000 and currency usd", r.Body)
		}
		if _, ok := body["createdAt"].(string); !ok {
			t.Fatalf("body = %s, want a createdAt", r.Body)
		}
		if got, want := r.Header.Get("Location"), "/charges/"+id; got != want {
			t.Fatalf("Location = %q, want %q", got, want)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type = %q, want application/json", ct)
		}
		if r.replayed() {
			t.Fatal("a first call is marked Idempotent-Replayed")
		}
		if n := e.count("charges"); n != 1 {
			t.Fatalf("%d charges in the database, want 1", n)
		}
	})

	// Requests that are refused before the flow runs: nothing is stored or
	// written.
	refused := []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   string
	}{
		{"a missing Idempotency-Key is 400 IdempotencyKeyMissing",
			`{"amount":1000,"currency":"usd"}`, nil, 400, "IdempotencyKeyMissing"},
		{"a key shorter than 16 characters is 400 IdempotencyKeyInvalid",
			`{"amount":1000,"currency":"usd"}`, []string{"Idempotency-Key", "short-key"}, 400, "IdempotencyKeyInvalid"},
		{"a key with a non-ASCII character is 400 IdempotencyKeyInvalid",
			`{"amount":1000,"currency":"usd"}`, []string{"Idempotency-Key", "key-with-é-0000000000"}, 400, "IdempotencyKeyInvalid"},
		{"a key longer than 255 characters is 400 IdempotencyKeyInvalid",
			`{"amount":1000,"currency":"usd"}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "IdempotencyKeyInvalid"},
		{"amount 0 is 400 ValidationFailed",
			`{"amount":0,"currency":"usd"}`, []string{"Idempotency-Key", newKey()}, 400, "ValidationFailed"},
		{"a negative amount is 400 ValidationFailed",
			`{"amount":-5,"currency":"usd"}`, []string{"Idempotency-Key", newKey()}, 400, "ValidationFailed"},
		{"a missing amount is 400 ValidationFailed",
			`{"currency":"usd"}`, []string{"Idempotency-Key", newKey()}, 400, "ValidationFailed"},
		{"a two-letter currency is 400 ValidationFailed",
			`{"amount":1000,"currency":"us"}`, []string{"Idempotency-Key", newKey()}, 400, "ValidationFailed"},
		{"a currency with digits is 400 ValidationFailed",
			`{"amount":1000,"currency":"us1"}`, []string{"Idempotency-Key", newKey()}, 400, "ValidationFailed"},
		{"a missing currency is 400 ValidationFailed",
			`{"amount":1000}`, []string{"Idempotency-Key", newKey()}, 400, "ValidationFailed"},
		{"an amount that is not an integer is 400 InvalidInput",
			`{"amount":"10","currency":"usd"}`, []string{"Idempotency-Key", newKey()}, 400, "InvalidInput"},
		{"an unknown field is 400 UnknownField",
			`{"amount":1000,"currency":"usd","capture":true}`, []string{"Idempotency-Key", newKey()}, 400, "UnknownField"},
		{"malformed JSON is 400 MalformedJSON",
			`{"amount":1000,`, []string{"Idempotency-Key", newKey()}, 400, "MalformedJSON"},
		{"Authorization: Bearer bad is 401 Unauthorized",
			`{"amount":1000,"currency":"usd"}`, []string{"Idempotency-Key", newKey(), "Authorization", "Bearer bad"}, 401, "Unauthorized"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.do("POST", "/charges", tc.body, tc.hdr...).want(t, tc.status, tc.code)
			if n := e.count("charges"); n != 0 {
				t.Fatalf("%d charges in the database, want 0", n)
			}
			if n := e.executions("payments.charge"); n != 0 {
				t.Fatalf("payments.charge ran %v times, want 0", n)
			}
		})
	}

	// Rules that take several requests.
	t.Run("a retry with the same key replays the first answer with Idempotent-Replayed: true", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		first := e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key)
		first.want(t, 201, "")
		again := e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key)
		again.want(t, 201, "")
		if !again.replayed() {
			t.Fatalf("retry headers %v: want Idempotent-Replayed: true", again.Header)
		}
		if string(again.Body) != string(first.Body) {
			t.Fatalf("replayed body %s, want the first %s", again.Body, first.Body)
		}
		if again.Header.Get("Location") != first.Header.Get("Location") {
			t.Fatalf("replayed Location %q, want %q", again.Header.Get("Location"), first.Header.Get("Location"))
		}
		if n := e.count("charges"); n != 1 {
			t.Fatalf("%d charges in the database, want 1", n)
		}
	})
	t.Run("key order, whitespace and the currency's case do not change the request", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key).want(t, 201, "")
		r := e.do("POST", "/charges", ` { "currency" : "USD", "amount" : 1000 } `, "Idempotency-Key", key)
		r.want(t, 201, "")
		if !r.replayed() {
			t.Fatal("the same request written differently was not replayed")
		}
	})
	t.Run("the same key with another body is 422 IdempotencyKeyReused", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key).want(t, 201, "")
		e.do("POST", "/charges", `{"amount":2000,"currency":"usd"}`, "Idempotency-Key", key).want(t, 422, "IdempotencyKeyReused")
		if n := e.count("charges"); n != 1 {
			t.Fatalf("%d charges in the database, want 1", n)
		}
	})
	t.Run("the same key from different principals and tenants is different charges", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		callers := [][]string{
			nil, // anon
			{"Authorization", "Bearer user:alice"},
			{"Authorization", "Bearer user:bob"},
			{"X-API-Key", "alice"},
			{"Authorization", "Bearer user:alice", "X-Tenant", "acme"},
		}
		ids := map[string]bool{}
		for _, hdr := range callers {
			r := e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, append([]string{"Idempotency-Key", key}, hdr...)...)
			r.want(t, 201, "")
			if r.replayed() {
				t.Fatalf("caller %q got another caller's replay", hdr)
			}
			var c app.Charge
			r.decode(t, &c)
			ids[c.ID] = true
		}
		if len(ids) != len(callers) {
			t.Fatalf("%d distinct charges for %d callers", len(ids), len(callers))
		}
	})
	t.Run("a 401 stores nothing: the same key then runs", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key, "Authorization", "Bearer bad").want(t, 401, "Unauthorized")
		r := e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key, "Authorization", "Bearer user:1")
		r.want(t, 201, "")
		if r.replayed() {
			t.Fatal("the call after a 401 was a replay")
		}
	})
	t.Run("a validation failure stores nothing: the same key then runs", func(t *testing.T) {
		e := setup(t)
		key := newKey()
		e.do("POST", "/charges", `{"amount":0,"currency":"usd"}`, "Idempotency-Key", key).want(t, 400, "ValidationFailed")
		r := e.do("POST", "/charges", `{"amount":1000,"currency":"usd"}`, "Idempotency-Key", key)
		r.want(t, 201, "")
		if r.replayed() {
			t.Fatal("the call after a 400 was a replay")
		}
	})
}

// GET /charges and GET /charges/{id}: payments.list and payments.get.
func TestGetCharges(t *testing.T) {
	e := setup(t)
	// Before any charge (on the same demo: under TestPostgres a second one
	// would hold a second share of the connection budget).
	t.Run("an empty list is [] not null", func(t *testing.T) {
		r := e.do("GET", "/charges", "")
		r.want(t, 200, "")
		if got := strings.TrimSpace(string(r.Body)); got != `{"charges":[]}` {
			t.Fatalf("body = %s, want {\"charges\":[]}", got)
		}
	})
	a := e.charge(100)
	b := e.charge(200, "Authorization", "Bearer user:1")

	t.Run("GET /charges lists them newest first", func(t *testing.T) {
		r := e.do("GET", "/charges", "")
		r.want(t, 200, "")
		var list app.ChargeList
		r.decode(t, &list)
		if len(list.Charges) != 2 || list.Charges[0] != b || list.Charges[1] != a {
			t.Fatalf("charges = %+v, want [%+v %+v]", list.Charges, b, a)
		}
	})

	cases := []struct {
		name   string
		path   string
		hdr    []string
		status int
		code   string
		want   *app.Charge
	}{
		{"GET /charges/{id} returns the charge", "/charges/" + a.ID, nil, 200, "", &a},
		{"any principal of the tenant may read its charges", "/charges/" + b.ID, []string{"X-API-Key", "k"}, 200, "", &b},
		{"another tenant's charge is 404 NotFound (see TestChargesAreTheTenants)", "/charges/" + a.ID, []string{"X-Tenant", "acme"}, 404, "NotFound", nil},
		{"an unknown id is 404 NotFound", "/charges/ch_000000000000000000000000", nil, 404, "NotFound", nil},
		{"an Idempotency-Key on a GET is ignored", "/charges/" + a.ID, []string{"Idempotency-Key", newKey()}, 200, "", &a},
		{"Bearer bad is 401", "/charges/" + a.ID, []string{"Authorization", "Bearer bad"}, 401, "Unauthorized", nil},
		{"a limit over 1000 is 400", "/charges?limit=5000", nil, 400, "ValidationFailed", nil},
		{"a limit that is not a number is 400", "/charges?limit=x", nil, 400, "InvalidInput", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", tc.path, "", tc.hdr...)
			r.want(t, tc.status, tc.code)
			if tc.want != nil {
				var c app.Charge
				r.decode(t, &c)
				if c != *tc.want {
					t.Fatalf("charge = %+v, want %+v", c, *tc.want)
				}
			}
		})
	}

	t.Run("GET /charges?limit=1 returns the newest", func(t *testing.T) {
		var list app.ChargeList
		e.do("GET", "/charges?limit=1", "").decode(t, &list)
		if len(list.Charges) != 1 || list.Charges[0] != b {
			t.Fatalf("charges = %+v, want [%+v]", list.Charges, b)
		}
	})
}
