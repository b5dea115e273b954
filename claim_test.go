package oke_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/okengine/oke"
)

// On a driver that cannot hold a claim in a transaction (here memory), a
// flow whose claim would be held in its transaction (ClaimInTx) is claimed
// up front, as with ClaimFirst: a replay does not start its function.
func TestClaimInTxOnADriverWithoutTransactionsClaimsUpFront(t *testing.T) {
	for _, mode := range []oke.Idempotency{{Mode: oke.ModeRequired, Claim: oke.ClaimInTx}, {Mode: oke.ModeRequired, Claim: oke.ClaimFirst}, oke.Required} {
		t.Run(mode.String(), func(t *testing.T) { testClaimsUpFront(t, mode) })
	}
}

func testClaimsUpFront(t *testing.T, mode oke.Idempotency) {
	var started atomic.Int64
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/charges"), oke.NewFlow("d.charge",
			oke.Options{Idempotency: mode},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[amountIn], error) {
				started.Add(1)
				if err := fx.Emit(ctx, "charged", in); err != nil {
					return oke.Response[amountIn]{}, err
				}
				return oke.Created(in, "/charges/1"), nil
			}))
	})
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":5}`))
		r.Header.Set("Idempotency-Key", "deferred-up-front-key-01")
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	if w := post(); w.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	if w := post(); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s, want the replay", w.Code, w.Body)
	}
	if n := started.Load(); n != 1 {
		t.Errorf("the function started %d times, want 1", n)
	}
}
