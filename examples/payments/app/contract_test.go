package app_test

import (
	"strings"
	"testing"

	"github.com/okengine/oke"
	"github.com/okengine/oke/examples/payments/app"
)

// TestContractIsFresh: the demo registers the contract oke extract
// generated (oke_contract_gen.go), every flow it runs matches it, and the
// header is honored from the effects its code has. payments.charge, whose
// one effect is its INSERT in the charge's transaction, holds its claim in
// that transaction on Postgres (one commit per charge) and claims first
// elsewhere; with -claim-first it claims first everywhere.
func TestContractIsFresh(t *testing.T) {
	for _, claimFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "claim first"}[claimFirst], func(t *testing.T) { testContractIsFresh(t, claimFirst) })
	}
}

func testContractIsFresh(t *testing.T, claimFirst bool) {
	e := setup(t, func(c *app.Config) { c.ClaimFirst = claimFirst })
	var out struct{ Flows []oke.FlowInfo }
	e.do("GET", "/_oke/flows", "").decode(t, &out)
	if len(out.Flows) == 0 {
		t.Fatal("no flows")
	}
	for _, f := range out.Flows {
		if f.Contract != "fresh" || f.EffectsFrom != "contract" || f.Source == "" {
			t.Errorf("flow %s: contract %q (%s), effects from %q, source %q; want a fresh contract (run go generate ./examples/payments/app)",
				f.Name, f.Contract, f.ContractProblem, f.EffectsFrom, f.Source)
		}
		if f.Name != "payments.charge" {
			continue
		}
		want := "first"
		if strings.HasPrefix(t.Name(), "TestPostgres/") && !claimFirst {
			want = "in_tx"
		}
		if f.Claim != want || f.Mode != "required" || f.TTL != "24h" || !f.Honored {
			t.Errorf("payments.charge (claim-first %v): %+v, want claim %q", claimFirst, f, want)
		}
	}
}

// TestHeaderFromWhatTheCodeDoes: issue 13 over HTTP. payments.quote is a
// POST that only reads and declares no effects: oke extract inferred [read],
// so the app ignores its Idempotency-Key — the same key with two bodies is
// two live answers, not a 422. demo.note writes through a helper
// (insertNote): extract followed the store into it, and the header is
// honored — the second body under the key is a 422.
func TestHeaderFromWhatTheCodeDoes(t *testing.T) {
	e := setup(t)
	key := newKey()
	for _, amount := range []string{"1000", "2000"} {
		r := e.do("POST", "/quotes", `{"amount":`+amount+`,"currency":"usd"}`, "Idempotency-Key", key)
		r.want(t, 200, "")
		if r.replayed() || !strings.Contains(string(r.Body), `"amount":`+amount) {
			t.Fatalf("quote of %s under one key: %s (replayed %v), want a live quote", amount, r.Body, r.replayed())
		}
	}
	e.do("POST", "/notes", `{"text":"a"}`, "Idempotency-Key", key).want(t, 201, "")
	e.do("POST", "/notes", `{"text":"b"}`, "Idempotency-Key", key).want(t, 422, "IdempotencyKeyReused")
}
