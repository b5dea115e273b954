package app

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/okengine/oke"
)

// RefundIn is the body of POST /refunds.
type RefundIn struct {
	ChargeID string `json:"chargeId" minLength:"1" maxLength:"200"` // the charge to refund in full, "ch_…"
}

// Refund is a refund as the API shows it.
type Refund struct {
	ID         string `json:"id"` // "re_" and a UUID, drawn in a step of its own
	ChargeID   string `json:"chargeId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
	ProviderID string `json:"providerId"` // the provider's id for it ("pr_…")
	CreatedAt  string `json:"createdAt"`  // RFC 3339, UTC, milliseconds
}

// ErrAlreadyRefunded is payments.refund's declared failure for a charge
// that already has its refund: a charge is refunded at most once, whatever
// Idempotency-Key (or none) the second request carries.
var ErrAlreadyRefunded = oke.Fail(http.StatusConflict, "AlreadyRefunded",
	"This charge is already refunded: a charge is refunded at most once.")

// alreadyRefunded is ErrAlreadyRefunded naming the charge.
func alreadyRefunded(chargeID string) *oke.Error {
	return ErrAlreadyRefunded.WithMessage("Charge %q is already refunded: a charge is refunded at most once.", chargeID)
}

// refundFlow is payments.refund, a durable flow whose every effect is a
// step, following the rules of durable steps:
//
//  1. look up the charge, in the caller's tenant — a missing one, or
//     another tenant's, is a declared 404 (the same answer for both), and a
//     charge that already has a refund row is a declared 409
//     AlreadyRefunded; either is saved like a result, so the run (and a
//     retried key) answers it again;
//  2. claim the business key "refund:<chargeId>" (oke.Claim): the first run
//     that asks wins, and keeps winning on every pick-up of its own; every
//     other run — a second refund with another key or none, however close
//     in time — loses, and answers 409 AlreadyRefunded before anything is
//     called or written;
//  3. draw the refund id (oke.NewID: a generated id gets a step of its own);
//  4. call the provider — fx.Fetch inside a step sends oke.StepKey as the
//     Idempotency-Key, the same on every attempt of the step, so a provider
//     that dedupes on it refunds once even when a crash makes the step run
//     again;
//  5. write the refund — INSERT … ON CONFLICT (id) DO NOTHING with the id of
//     step 3, so a second attempt adds nothing (and the unique index on
//     refunds.charge_id, where migrate could make it, refuses a second
//     refund of a charge outright);
//  6. emit refund.created — inside a step, so an OnEvent flow starts once.
//
// It answers 201 with the refund and Location: /refunds/{id}.
//
// Step 1's refund check covers what the claim alone would not: refunds
// made by versions of the demo that did not claim. A replay of a completed
// run (the console's, the CLI's) is a new run, which loses the claim and
// sees the refund: it answers 409 and refunds nothing.
func (s *Server) refundFlow() *oke.Flow[RefundIn, Refund] {
	return oke.NewFlow("payments.refund", oke.Options{
		Durable:     true,
		Description: "Refund a charge in full, once, durably: look up the charge, claim it, draw the refund id, call the provider, write the refund, emit refund.created.",
	}, func(ctx context.Context, in RefundIn, fx *oke.Fx) (oke.Response[Refund], error) {
		tenant := fx.Identity().Tenant
		charge, err := oke.Step(ctx, "look up the charge", func(ctx context.Context) (Charge, error) {
			var (
				c      Charge
				refund sql.NullString
			)
			err := fx.Store(s.rdb).QueryRow(ctx,
				`SELECT c.id, c.amount, c.currency, c.created_at,
				        (SELECT r.id FROM refunds r WHERE r.charge_id = c.id LIMIT 1)
				 FROM charges c WHERE c.id = $1 AND c.tenant = $2`, in.ChargeID, tenant).
				Scan(&c.ID, &c.Amount, &c.Currency, &c.CreatedAt, &refund)
			if errors.Is(err, sql.ErrNoRows) {
				return Charge{}, chargeNotFound(in.ChargeID)
			}
			if err != nil {
				return Charge{}, fmt.Errorf("look up charge %q: %w", in.ChargeID, err)
			}
			if refund.Valid {
				return Charge{}, alreadyRefunded(c.ID)
			}
			return c, nil
		})
		if err != nil {
			return oke.Response[Refund]{}, err
		}
		won, err := oke.Claim(ctx, "refund:"+charge.ID)
		if err != nil {
			return oke.Response[Refund]{}, err
		}
		if !won {
			return oke.Response[Refund]{}, alreadyRefunded(charge.ID)
		}
		uuid, err := oke.NewID(ctx, "refund id")
		if err != nil {
			return oke.Response[Refund]{}, err
		}
		id := "re_" + uuid
		prov, err := oke.Step(ctx, "call the provider", func(ctx context.Context) (ProviderRefund, error) {
			return s.callProvider(ctx, fx, ProviderRefundIn{ChargeID: charge.ID, Amount: charge.Amount,
				Currency: charge.Currency, Reference: id})
		}, oke.Retry(providerRetry))
		if err != nil {
			return oke.Response[Refund]{}, err
		}
		refund, err := oke.Step(ctx, "write the refund", func(ctx context.Context) (Refund, error) {
			st := fx.Store(s.db)
			if _, err := st.Exec(ctx,
				`INSERT INTO refunds (id, charge_id, amount, provider_id) VALUES ($1, $2, $3, $4)
				 ON CONFLICT (id) DO NOTHING`, id, charge.ID, charge.Amount, prov.ID); err != nil {
				return Refund{}, fmt.Errorf("insert refund %s: %w", id, err)
			}
			r, err := s.readRefund(ctx, st, id, tenant)
			if err != nil {
				return Refund{}, fmt.Errorf("read refund %s back: %w", id, err)
			}
			return r, nil
		})
		if err != nil {
			return oke.Response[Refund]{}, err
		}
		if _, err := oke.Step(ctx, "emit refund.created", func(ctx context.Context) (bool, error) {
			return true, fx.Emit(ctx, "refund.created", refund)
		}); err != nil {
			return oke.Response[Refund]{}, err
		}
		return oke.Created(refund, "/refunds/"+refund.ID), nil
	})
}

// providerRetry is the provider call's retry policy: a provider that
// answers 5xx for a while (a restart, its own database failing over) must
// not fail a refund for good, as the default's three attempts within a
// second would. Its first wait is already longer than Config.RetryInline,
// so a failed call parks the run at once (the request is answered, 503
// OutcomeUnknown, instead of waiting out the outage) and the scheduler
// retries it: 9 attempts over about a minute (2 s doubling to 20 s). A
// retry with the refund's key, Prefer: wait, or GET /refunds/{id} gives the
// refund.
var providerRetry = oke.RetryPolicy{MaxAttempts: 9, InitialBackoff: 2 * time.Second, MaxBackoff: 20 * time.Second}

// callProvider asks the provider to refund, with fx.Fetch: inside a step it
// carries the step's stable Idempotency-Key.
func (s *Server) callProvider(ctx context.Context, fx *oke.Fx, in ProviderRefundIn) (ProviderRefund, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return ProviderRefund{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.providerURL, bytes.NewReader(body))
	if err != nil {
		return ProviderRefund{}, fmt.Errorf("call the refund provider: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := fx.Fetch(req)
	if err != nil {
		return ProviderRefund{}, fmt.Errorf("call the refund provider: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ProviderRefund{}, fmt.Errorf("call the refund provider: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return ProviderRefund{}, fmt.Errorf("call the refund provider: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var out ProviderRefund
	if err := json.Unmarshal(b, &out); err != nil || out.ID == "" {
		return ProviderRefund{}, fmt.Errorf("call the refund provider: unexpected answer %q", b)
	}
	return out, nil
}

// readRefund reads one refund of tenant's charges, with its charge's
// currency: sql.ErrNoRows when tenant has no such refund.
func (s *Server) readRefund(ctx context.Context, st *oke.Store, id, tenant string) (Refund, error) {
	var r Refund
	err := st.QueryRow(ctx,
		`SELECT r.id, r.charge_id, r.amount, c.currency, r.provider_id, r.created_at
		 FROM refunds r JOIN charges c ON c.id = r.charge_id WHERE r.id = $1 AND c.tenant = $2`, id, tenant).
		Scan(&r.ID, &r.ChargeID, &r.Amount, &r.Currency, &r.ProviderID, &r.CreatedAt)
	return r, err
}

// getRefundFlow is payments.getRefund: one refund of the caller's tenant's
// charges, or 404 NotFound (another tenant's refund gets the same 404 as one
// that does not exist).
func (s *Server) getRefundFlow() *oke.Flow[GetIn, Refund] {
	return oke.NewFlow("payments.getRefund", oke.Options{
		Effects:     []oke.Effect{oke.EffectRead},
		Description: "Read one of the caller's tenant's refunds.",
	}, func(ctx context.Context, in GetIn, fx *oke.Fx) (oke.Response[Refund], error) {
		r, err := s.readRefund(ctx, fx.Store(s.rdb), in.ID, fx.Identity().Tenant)
		if errors.Is(err, sql.ErrNoRows) {
			return oke.Response[Refund]{}, oke.ErrNotFound.WithMessage("No refund has id %s.", oke.Quote(in.ID))
		}
		if err != nil {
			return oke.Response[Refund]{}, fmt.Errorf("get refund %q: %w", in.ID, err)
		}
		return oke.OK(r), nil
	})
}
