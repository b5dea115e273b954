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

	"github.com/okengine/oke"
)

// RefundIn is the body of POST /refunds.
type RefundIn struct {
	ChargeID string `json:"chargeId"` // the charge to refund in full
}

// Validate checks the input.
func (in RefundIn) Validate() error {
	if in.ChargeID == "" || len(in.ChargeID) > 200 {
		return fmt.Errorf(`chargeId must name a charge (e.g. "ch_…"), got %q`, in.ChargeID)
	}
	return nil
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

// refundFlow is payments.refund, a durable flow whose every effect is a
// step, following the rules of durable steps:
//
//  1. look up the charge — a missing one is a declared 404, saved like a
//     result, so the run (and a retried key) answers 404 again;
//  2. draw the refund id (oke.NewID: a generated id gets a step of its own);
//  3. call the provider — fx.Fetch inside a step sends oke.StepKey as the
//     Idempotency-Key, the same on every attempt of the step, so a provider
//     that dedupes on it refunds once even when a crash makes the step run
//     again;
//  4. write the refund — INSERT … ON CONFLICT (id) DO NOTHING with the id of
//     step 2, so a second attempt adds nothing;
//  5. emit refund.created — inside a step, so an OnEvent flow starts once.
//
// It answers 201 with the refund and Location: /refunds/{id}.
func (s *Server) refundFlow() *oke.Flow[RefundIn, Refund] {
	return oke.NewFlow("payments.refund", oke.Options{
		Durable:     true,
		Description: "Refund a charge in full, durably: look up the charge, draw the refund id, call the provider, write the refund, emit refund.created.",
	}, func(ctx context.Context, in RefundIn, fx *oke.Fx) (oke.Response[Refund], error) {
		charge, err := oke.Step(ctx, "look up the charge", func(ctx context.Context) (Charge, error) {
			var c Charge
			err := fx.Store(s.rdb).QueryRow(ctx,
				`SELECT id, amount, currency, created_at FROM charges WHERE id = $1`, in.ChargeID).
				Scan(&c.ID, &c.Amount, &c.Currency, &c.CreatedAt)
			if errors.Is(err, sql.ErrNoRows) {
				return Charge{}, oke.ErrNotFound.WithMessage("No charge has id %q.", in.ChargeID)
			}
			if err != nil {
				return Charge{}, fmt.Errorf("look up charge %q: %w", in.ChargeID, err)
			}
			return c, nil
		})
		if err != nil {
			return oke.Response[Refund]{}, err
		}
		uuid, err := oke.NewID(ctx, "refund id")
		if err != nil {
			return oke.Response[Refund]{}, err
		}
		id := "re_" + uuid
		prov, err := oke.Step(ctx, "call the provider", func(ctx context.Context) (ProviderRefund, error) {
			return s.callProvider(ctx, fx, ProviderRefundIn{ChargeID: charge.ID, Amount: charge.Amount,
				Currency: charge.Currency, Reference: id})
		})
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
			r, err := s.readRefund(ctx, st, id)
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

// readRefund reads one refund with its charge's currency.
func (s *Server) readRefund(ctx context.Context, st *oke.Store, id string) (Refund, error) {
	var r Refund
	err := st.QueryRow(ctx,
		`SELECT r.id, r.charge_id, r.amount, c.currency, r.provider_id, r.created_at
		 FROM refunds r JOIN charges c ON c.id = r.charge_id WHERE r.id = $1`, id).
		Scan(&r.ID, &r.ChargeID, &r.Amount, &r.Currency, &r.ProviderID, &r.CreatedAt)
	return r, err
}

// getRefundFlow is payments.getRefund: one refund, or 404 NotFound.
func (s *Server) getRefundFlow() *oke.Flow[GetIn, Refund] {
	return oke.NewFlow("payments.getRefund", oke.Options{
		Effects:     []oke.Effect{oke.EffectRead},
		Description: "Read one refund.",
	}, func(ctx context.Context, in GetIn, fx *oke.Fx) (oke.Response[Refund], error) {
		r, err := s.readRefund(ctx, fx.Store(s.rdb), in.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return oke.Response[Refund]{}, oke.ErrNotFound.WithMessage("No refund has id %q.", in.ID)
		}
		if err != nil {
			return oke.Response[Refund]{}, fmt.Errorf("get refund %q: %w", in.ID, err)
		}
		return oke.OK(r), nil
	})
}
