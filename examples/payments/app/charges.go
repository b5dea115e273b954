package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/okengine/oke"
)

// ChargeIn is the body of POST /charges.
// Its rules are tags (oke's decoder checks them, and oke extract writes them
// into openapi.json).
type ChargeIn struct {
	Amount   int64  `json:"amount" minimum:"1"`               // in the currency's smallest unit (cents)
	Currency string `json:"currency" pattern:"^[A-Za-z]{3}$"` // a three-letter ISO 4217 code, e.g. "usd"
}

// Validate lower-cases the currency (what a tag cannot say), so "USD" and
// "usd" are the same request (and the same Idempotency-Key fingerprint).
func (in *ChargeIn) Validate() error {
	in.Currency = strings.ToLower(in.Currency)
	return nil
}

// Charge is a charge as the API shows it.
type Charge struct {
	ID        string `json:"id"` // "ch_" and 24 hex digits
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	CreatedAt string `json:"createdAt"` // RFC 3339, UTC, milliseconds
}

// ChargeList is the body of GET /charges.
type ChargeList struct {
	Charges []Charge `json:"charges"`
}

// ListIn holds GET /charges' query parameters.
type ListIn struct {
	Limit int `json:"limit,omitempty" minimum:"0" maximum:"1000"` // newest first; 0 means 100
}

// Validate fills the default limit.
func (in *ListIn) Validate() error {
	if in.Limit == 0 {
		in.Limit = 100
	}
	return nil
}

// GetIn holds GET /charges/{id}'s path parameter.
type GetIn struct {
	ID string `json:"id"`
}

// chargeFlow is payments.charge: it inserts a charge (Idempotency-Key
// required). Its one effect is that INSERT, in the flow's transaction, so
// oke extract finds it "txOnly" and, on Postgres, oke holds the key's claim
// in that transaction: one commit per charge (ClaimAuto picks ClaimInTx).
// Anything else it did — an fx.Emit, a provider call — would make it claim
// first.
func (s *Server) chargeFlow() *oke.Flow[ChargeIn, Charge] {
	return oke.NewFlow("payments.charge", oke.Options{
		Idempotency: oke.Required,
		Description: "Create a charge. Requires an Idempotency-Key; a retry replays the first answer.",
	}, s.charge)
}

// UnprotectedChargesPath is where -unprotected binds
// bench.chargeUnprotected.
const UnprotectedChargesPath = "/bench/unprotected-charges"

// unprotectedChargeFlow is bench.chargeUnprotected: payments.charge's
// handler with Idempotency-Key handling off, bound only with -unprotected,
// to measure what idempotency costs (scripts/loadbench).
func (s *Server) unprotectedChargeFlow() *oke.Flow[ChargeIn, Charge] {
	return oke.NewFlow("bench.chargeUnprotected", oke.Options{
		Idempotency: oke.Off,
		Description: "Benchmarks only: create a charge with no Idempotency-Key handling.",
	}, s.charge)
}

// charge inserts a charge of the caller's tenant in the flow's
// transaction.
func (s *Server) charge(ctx context.Context, in ChargeIn, fx *oke.Fx) (oke.Response[Charge], error) {
	var c Charge
	id := fx.Identity()
	// The flow's transaction: on Postgres the charge and the stored
	// response commit together, so a crash never leaves a charge whose
	// retry would charge again. On SQLite it commits just before the
	// response is stored.
	tx, err := fx.Tx(ctx)
	if err != nil {
		return oke.Response[Charge]{}, err
	}
	err = tx.QueryRow(ctx,
		`INSERT INTO charges (amount, currency, tenant, principal) VALUES ($1, $2, $3, $4)
		 RETURNING id, amount, currency, created_at`,
		in.Amount, in.Currency, id.Tenant, id.Principal).Scan(&c.ID, &c.Amount, &c.Currency, &c.CreatedAt)
	if err != nil {
		return oke.Response[Charge]{}, fmt.Errorf("insert charge: %w", err)
	}
	return oke.Created(c, "/charges/"+c.ID), nil
}

// listFlow is payments.list: the newest charges of the caller's tenant.
func (s *Server) listFlow() *oke.Flow[ListIn, ChargeList] {
	return oke.NewFlow("payments.list", oke.Options{
		Effects:     []oke.Effect{oke.EffectRead},
		Description: "List the caller's tenant's charges, newest first.",
	}, func(ctx context.Context, in ListIn, fx *oke.Fx) (oke.Response[ChargeList], error) {
		tenant := fx.Identity().Tenant
		var (
			rows *sql.Rows
			err  error
		)
		if s.dialect == postgresDialect {
			rows, err = fx.Store(s.rdb).Query(ctx, listChargesPostgres, tenant, in.Limit)
		} else {
			rows, err = fx.Store(s.rdb).Query(ctx, listChargesSQLite, tenant, in.Limit)
		}
		if err != nil {
			return oke.Response[ChargeList]{}, fmt.Errorf("list charges: %w", err)
		}
		defer rows.Close()
		out := ChargeList{Charges: []Charge{}}
		for rows.Next() {
			var c Charge
			if err := rows.Scan(&c.ID, &c.Amount, &c.Currency, &c.CreatedAt); err != nil {
				return oke.Response[ChargeList]{}, fmt.Errorf("list charges: %w", err)
			}
			out.Charges = append(out.Charges, c)
		}
		if err := rows.Err(); err != nil {
			return oke.Response[ChargeList]{}, fmt.Errorf("list charges: %w", err)
		}
		return oke.OK(out), nil
	})
}

// getFlow is payments.get: one charge of the caller's tenant, or 404
// NotFound — the same 404 for another tenant's charge as for one that does
// not exist, so that an id never tells whether it exists elsewhere.
func (s *Server) getFlow() *oke.Flow[GetIn, Charge] {
	return oke.NewFlow("payments.get", oke.Options{
		Effects:     []oke.Effect{oke.EffectRead},
		Description: "Read one of the caller's tenant's charges.",
	}, func(ctx context.Context, in GetIn, fx *oke.Fx) (oke.Response[Charge], error) {
		var c Charge
		err := fx.Store(s.rdb).QueryRow(ctx,
			`SELECT id, amount, currency, created_at FROM charges WHERE id = $1 AND tenant = $2`,
			in.ID, fx.Identity().Tenant).
			Scan(&c.ID, &c.Amount, &c.Currency, &c.CreatedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return oke.Response[Charge]{}, chargeNotFound(in.ID)
		}
		if err != nil {
			return oke.Response[Charge]{}, fmt.Errorf("get charge %s: %w", oke.Quote(in.ID), err)
		}
		return oke.OK(c), nil
	})
}

// chargeNotFound is the 404 for a charge the caller's tenant does not have:
// one that does not exist and another tenant's get the same answer.
func chargeNotFound(id string) *oke.Error {
	return oke.ErrNotFound.WithMessage("No charge has id %s.", oke.Quote(id))
}

// QuoteIn is the body of POST /quotes: a charge to price.
type QuoteIn = ChargeIn

// Quote is what a charge would cost in fees, for the caller's tenant.
type Quote struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Fee      int64  `json:"fee"`     // in the currency's smallest unit
	Charges  int64  `json:"charges"` // the tenant's charges so far: the volume its fee rate comes from
}

// quoteFlow is payments.quote, a POST that only reads: it prices a charge
// from the tenant's volume of charges and writes nothing. It declares no
// effects; oke extract infers [read] from its code, so the app ignores an
// Idempotency-Key on it (a second body under the same key is a fresh
// quote, not a 422).
func (s *Server) quoteFlow() *oke.Flow[QuoteIn, Quote] {
	return oke.NewFlow("payments.quote", oke.Options{
		Description: "Price a charge (fees by the tenant's volume). Reads only: an Idempotency-Key is ignored.",
	}, func(ctx context.Context, in QuoteIn, fx *oke.Fx) (oke.Response[Quote], error) {
		q := Quote{Amount: in.Amount, Currency: in.Currency}
		if err := fx.Store(s.rdb).QueryRow(ctx, `SELECT count(*) FROM charges WHERE tenant = $1`, fx.Identity().Tenant).Scan(&q.Charges); err != nil {
			return oke.Response[Quote]{}, fmt.Errorf("count charges: %w", err)
		}
		bps := int64(290) // 2.9 %, less with volume
		if q.Charges >= 100 {
			bps = 250
		}
		q.Fee = (in.Amount*bps + 9_999) / 10_000
		return oke.OK(q), nil
	})
}
