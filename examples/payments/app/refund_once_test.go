package app_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/okengine/oke/examples/payments/app"
)

// providerRefunds is what the fake provider refunded (GET /_provider/refunds).
func (e *env) providerRefunds() []app.ProviderRefund {
	e.t.Helper()
	var list app.ProviderRefundList
	r := e.do("GET", app.ProviderPath, "")
	r.want(e.t, 200, "")
	r.decode(e.t, &list)
	return list.Refunds
}

// wantOneRefund fails unless charge c has exactly one refund row and the
// provider refunded it once, on one request.
func (e *env) wantOneRefund(c app.Charge) {
	e.t.Helper()
	var n int
	if err := e.srv.DB().QueryRow(`SELECT count(*) FROM refunds WHERE charge_id = $1`, c.ID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	if n != 1 {
		e.t.Fatalf("%d refund rows for charge %s, want 1", n, c.ID)
	}
	var calls, requests int
	for _, p := range e.providerRefunds() {
		if p.ChargeID == c.ID {
			calls++
			requests += p.Requests
		}
	}
	if calls != 1 || requests != 1 {
		e.t.Fatalf("the provider refunded charge %s %d times on %d requests, want once on one", c.ID, calls, requests)
	}
}

// A charge is refunded at most once (DESIGN.md 6.1): a second refund of the
// same charge, with any Idempotency-Key or none, is the declared failure
// 409 AlreadyRefunded — the refund run claims "refund:<chargeId>" — and
// nothing more is refunded or written.
func TestRefundAtMostOncePerCharge(t *testing.T) {
	again := []struct {
		name string
		hdr  func() []string // the second request's headers
	}{
		{"a second refund with another key is 409 AlreadyRefunded",
			func() []string { return []string{"Idempotency-Key", newKey()} }},
		{"a second refund without a key is 409 AlreadyRefunded",
			func() []string { return nil }},
		{"a second refund by another principal of the tenant is 409 AlreadyRefunded",
			func() []string {
				return []string{"Idempotency-Key", newKey(), "Authorization", "Bearer user:other"}
			}},
	}
	for _, tc := range again {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			c := e.charge(5000)
			body := fmt.Sprintf(`{"chargeId":%q}`, c.ID)
			e.do("POST", "/refunds", body, "Idempotency-Key", newKey()).want(t, 201, "")
			for range 3 {
				r := e.do("POST", "/refunds", body, tc.hdr()...)
				r.want(t, 409, "AlreadyRefunded")
				if !strings.Contains(r.errorMessage(t), c.ID) {
					t.Fatalf("message %q does not name the charge", r.errorMessage(t))
				}
			}
			e.wantOneRefund(c)
		})
	}

	t.Run("a retry with the first refund's key still replays its 201", func(t *testing.T) {
		e := setup(t)
		c := e.charge(5000)
		body := fmt.Sprintf(`{"chargeId":%q}`, c.ID)
		key := newKey()
		first := e.do("POST", "/refunds", body, "Idempotency-Key", key)
		first.want(t, 201, "")
		e.do("POST", "/refunds", body, "Idempotency-Key", newKey()).want(t, 409, "AlreadyRefunded")
		r := e.do("POST", "/refunds", body, "Idempotency-Key", key)
		r.want(t, 201, "")
		if !r.replayed() || string(r.Body) != string(first.Body) {
			t.Fatalf("retry: replayed=%v %s, want a replay of %s", r.replayed(), r.Body, first.Body)
		}
		e.wantOneRefund(c)
	})

	t.Run("a 409 AlreadyRefunded is stored: a retry of its key replays it", func(t *testing.T) {
		e := setup(t)
		c := e.charge(5000)
		body := fmt.Sprintf(`{"chargeId":%q}`, c.ID)
		e.do("POST", "/refunds", body, "Idempotency-Key", newKey()).want(t, 201, "")
		key := newKey()
		first := e.do("POST", "/refunds", body, "Idempotency-Key", key)
		first.want(t, 409, "AlreadyRefunded")
		r := e.do("POST", "/refunds", body, "Idempotency-Key", key)
		r.want(t, 409, "AlreadyRefunded")
		if !r.replayed() || string(r.Body) != string(first.Body) {
			t.Fatalf("retry: replayed=%v %s, want a replay of %s", r.replayed(), r.Body, first.Body)
		}
	})

	t.Run("a charge refunded by an older version (a refund row, no claim) is 409 and calls no provider", func(t *testing.T) {
		e := setup(t)
		c := e.charge(5000)
		if _, err := e.srv.DB().Exec(`INSERT INTO refunds (id, charge_id, amount, provider_id) VALUES ('re_older', $1, $2, 'pr_older')`, c.ID, c.Amount); err != nil {
			t.Fatal(err)
		}
		e.do("POST", "/refunds", fmt.Sprintf(`{"chargeId":%q}`, c.ID), "Idempotency-Key", newKey()).want(t, 409, "AlreadyRefunded")
		if n := len(e.providerRefunds()); n != 0 {
			t.Fatalf("the provider refunded %d times, want 0", n)
		}
	})

	t.Run("a replay of the completed refund run refunds nothing: 409", func(t *testing.T) {
		e := setup(t, fastScheduler)
		c := e.charge(5000)
		e.do("POST", "/refunds", fmt.Sprintf(`{"chargeId":%q}`, c.ID), "Idempotency-Key", newKey()).want(t, 201, "")
		runs := e.runsOf("payments.refund")
		if len(runs) != 1 {
			t.Fatalf("%d refund runs, want 1", len(runs))
		}
		r := e.do("POST", "/_oke/runs/"+runs[0].ID+"/replay", "")
		r.want(t, 202, "")
		var replay struct{ ID string }
		r.decode(t, &replay)
		waitFor(t, func() bool { return e.run(replay.ID).Status == "failed" })
		if res := e.run(replay.ID).Result; res == nil || res.Status != 409 {
			t.Fatalf("the replay's result %+v, want 409", res)
		}
		e.wantOneRefund(c)
	})

	t.Run("concurrent refunds with fresh keys: one 201, the rest 409 AlreadyRefunded, one refund, one provider call", func(t *testing.T) {
		const n = 12
		e := setup(t)
		c := e.charge(5000)
		body := fmt.Sprintf(`{"chargeId":%q}`, c.ID)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			answers [n]reply
			errs    [n]error
		)
		for i := range n {
			wg.Go(func() {
				<-start
				answers[i], errs[i] = post(e.url, "/refunds", body, "Idempotency-Key", newKey())
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for i, r := range answers {
			if errs[i] != nil {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			switch r.Status {
			case 201:
				created++
			case 409:
				r.want(t, 409, "AlreadyRefunded")
			default:
				t.Fatalf("request %d: %d %s, want 201 or 409 AlreadyRefunded", i, r.Status, r.Body)
			}
		}
		if created != 1 {
			t.Fatalf("%d of %d concurrent refunds answered 201, want exactly 1", created, n)
		}
		e.wantOneRefund(c)
		if got := e.count("refunds"); got != 1 {
			t.Fatalf("%d refund rows, want 1", got)
		}
		// Which rule stopped each loser: the claim (its lookup found no
		// refund yet) or the lookup (the winner's refund was written).
		var byClaim, byLookup int
		for _, run := range e.runsOf("payments.refund") {
			if run.Status != "failed" {
				continue
			}
			if steps := e.run(run.ID).Steps; len(steps) > 0 && steps[0].Failure != nil {
				byLookup++
			} else {
				byClaim++
			}
		}
		t.Logf("%d concurrent refunds: 1 refunded, %d lost the claim, %d found the refund in their lookup", n, byClaim, byLookup)
	})
}

// Data made by older versions of the demo, which refunded a charge as often
// as asked: the demo still opens on it, says which rule the database
// cannot enforce yet, and enforces it once the data allows.
func TestRefundOnceOnOlderData(t *testing.T) {
	var logs syncBuffer
	cfg := newConfig(t, func(c *app.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})

	// An older version's data: no unique index, a charge refunded twice.
	e, closeA := openEnv(t, cfg)
	c := e.charge(5000)
	for _, stmt := range []string{
		`DROP INDEX refunds_one_per_charge`,
		`INSERT INTO refunds (id, charge_id, amount) VALUES ('re_old1', '` + c.ID + `', 5000)`,
		`INSERT INTO refunds (id, charge_id, amount) VALUES ('re_old2', '` + c.ID + `', 5000)`,
	} {
		if _, err := e.srv.DB().Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	closeA()
	if strings.Contains(logs.String(), "refunds_one_per_charge") {
		t.Fatalf("a warning before the data had double refunds:\n%s", logs.String())
	}

	t.Run("it opens, warns that the index must wait, and refuses a third refund", func(t *testing.T) {
		e, closeB := openEnv(t, cfg)
		defer closeB()
		if l := logs.String(); !strings.Contains(l, "refunds_one_per_charge") || !strings.Contains(l, "charges=1") {
			t.Fatalf("no warning naming the index and the one charge:\n%s", l)
		}
		e.do("POST", "/refunds", fmt.Sprintf(`{"chargeId":%q}`, c.ID), "Idempotency-Key", newKey()).want(t, 409, "AlreadyRefunded")
		if _, err := e.srv.DB().Exec(`DELETE FROM refunds WHERE id = 're_old2'`); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("once each charge keeps one refund, the database refuses a second one", func(t *testing.T) {
		e, closeC := openEnv(t, cfg)
		defer closeC()
		_, err := e.srv.DB().Exec(`INSERT INTO refunds (id, charge_id, amount) VALUES ('re_old3', $1, 5000)`, c.ID)
		if err == nil {
			t.Fatal("a second refund row of a charge was accepted")
		}
		if !strings.Contains(strings.ToLower(err.Error()), "unique") {
			t.Fatalf("insert a second refund row: %v, want a unique violation", err)
		}
	})
}

// errorMessage returns the message of an error envelope.
func (r reply) errorMessage(t *testing.T) string {
	t.Helper()
	var env envelope
	r.decode(t, &env)
	return env.Error.Message
}
