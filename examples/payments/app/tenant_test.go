package app_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

// unknownCharge is a charge id no tenant has.
const unknownCharge = "ch_000000000000000000000000"

// Business data is the tenant's (DESIGN.md 6.1): a charge belongs to the
// tenant that made it; another tenant can neither list it, read it, refund
// it nor read its refund, and is told exactly what it would be told of an
// id that does not exist.
func TestChargesAreTheTenants(t *testing.T) {
	e := setup(t)
	acme := []string{"X-Tenant", "acme", "Authorization", "Bearer user:ann"}
	globex := []string{"X-Tenant", "globex", "Authorization", "Bearer user:ann"} // the same principal, another tenant
	a1 := e.charge(100, acme...)
	a2 := e.charge(200, acme...)
	g1 := e.charge(300, globex...)
	d1 := e.charge(400) // tenant default

	// acme's refund of a1, for the refund rows below.
	r := e.do("POST", "/refunds", fmt.Sprintf(`{"chargeId":%q}`, a1.ID), append([]string{"Idempotency-Key", newKey()}, acme...)...)
	r.want(t, 201, "")
	var refund app.Refund
	r.decode(t, &refund)

	t.Run("GET /charges lists the caller's tenant's charges only, newest first", func(t *testing.T) {
		cases := []struct {
			tenant string
			hdr    []string
			want   []app.Charge
		}{
			{"acme", acme, []app.Charge{a2, a1}},
			{"globex", globex, []app.Charge{g1}},
			{"default (no X-Tenant)", nil, []app.Charge{d1}},
			{"a tenant with no charges", []string{"X-Tenant", "initech"}, []app.Charge{}},
		}
		for _, tc := range cases {
			var list app.ChargeList
			r := e.do("GET", "/charges", "", tc.hdr...)
			r.want(t, 200, "")
			r.decode(t, &list)
			if fmt.Sprint(list.Charges) != fmt.Sprint(tc.want) {
				t.Errorf("tenant %s: charges %+v, want %+v", tc.tenant, list.Charges, tc.want)
			}
		}
	})

	// Each row asks for something of acme's as another tenant, and asks the
	// same of an id that does not exist: both answers must be the same 404,
	// byte for byte once the id in the message is swapped.
	hidden := []struct {
		name            string
		method, path    string // path: %s is the id when pathHasID
		body            string // %q is the id, when set
		id              string // acme's
		unknown         string // an id of the same kind that does not exist
		status          int
		code            string
		pathHasID       bool
		withIdempotency bool
	}{
		{name: "GET /charges/{id} of another tenant's charge is the 404 of an unknown charge",
			method: "GET", path: "/charges/%s", id: a2.ID, unknown: unknownCharge, status: 404, code: "NotFound", pathHasID: true},
		{name: "POST /refunds of another tenant's charge is the 404 of an unknown charge",
			method: "POST", path: "/refunds", body: `{"chargeId":%q}`, id: a2.ID, unknown: unknownCharge, status: 404, code: "NotFound", withIdempotency: true},
		{name: "POST /refunds of another tenant's refunded charge is the 404 of an unknown charge, not 409",
			method: "POST", path: "/refunds", body: `{"chargeId":%q}`, id: a1.ID, unknown: unknownCharge, status: 404, code: "NotFound", withIdempotency: true},
		{name: "GET /refunds/{id} of another tenant's refund is the 404 of an unknown refund",
			method: "GET", path: "/refunds/%s", id: refund.ID, unknown: "re_00000000-0000-4000-8000-000000000000", status: 404, code: "NotFound", pathHasID: true},
	}
	for _, tc := range hidden {
		t.Run(tc.name, func(t *testing.T) {
			ask := func(id string, hdr []string) reply {
				path, body := tc.path, ""
				if tc.pathHasID {
					path = fmt.Sprintf(tc.path, id)
				}
				if tc.body != "" {
					body = fmt.Sprintf(tc.body, id)
				}
				if tc.withIdempotency {
					hdr = append([]string{"Idempotency-Key", newKey()}, hdr...)
				}
				return e.do(tc.method, path, body, hdr...)
			}
			for _, other := range [][]string{globex, nil, {"X-Tenant", "initech", "X-API-Key", "k"}} {
				got := ask(tc.id, other)
				got.want(t, tc.status, tc.code)
				unknown := ask(tc.unknown, other)
				unknown.want(t, tc.status, tc.code)
				if swapped := strings.ReplaceAll(string(got.Body), tc.id, tc.unknown); swapped != string(unknown.Body) {
					t.Fatalf("as %q: the answer %s differs from an unknown id's %s", other, got.Body, unknown.Body)
				}
			}
		})
	}

	t.Run("another tenant's refund attempt claims nothing: the owner then refunds", func(t *testing.T) {
		body := fmt.Sprintf(`{"chargeId":%q}`, a2.ID)
		e.do("POST", "/refunds", body, "Idempotency-Key", newKey(), "X-Tenant", "globex").want(t, 404, "NotFound")
		r := e.do("POST", "/refunds", body, append([]string{"Idempotency-Key", newKey()}, acme...)...)
		r.want(t, 201, "")
		var rf app.Refund
		r.decode(t, &rf)
		if rf.ChargeID != a2.ID || rf.Amount != a2.Amount {
			t.Fatalf("refund %+v, want one of %+v", rf, a2)
		}
	})

	t.Run("the owning tenant reads its charge and its refund, whichever principal asks", func(t *testing.T) {
		for _, hdr := range [][]string{acme, {"X-Tenant", "acme"}, {"X-Tenant", "acme", "X-API-Key", "k"}} {
			var c app.Charge
			r := e.do("GET", "/charges/"+a1.ID, "", hdr...)
			r.want(t, 200, "")
			r.decode(t, &c)
			if c != a1 {
				t.Fatalf("as %q: charge %+v, want %+v", hdr, c, a1)
			}
			var rf app.Refund
			r = e.do("GET", "/refunds/"+refund.ID, "", hdr...)
			r.want(t, 200, "")
			r.decode(t, &rf)
			if rf != refund {
				t.Fatalf("as %q: refund %+v, want %+v", hdr, rf, refund)
			}
		}
	})
}
