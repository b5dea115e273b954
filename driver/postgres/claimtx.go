package postgres

import (
	"context"
	"errors"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

var _ driver.TxClaimer = (*Driver)(nil)

// claimPrelude is the pgpipe.Prelude of a transaction begun by
// BeginClaimed: it sends the transaction's claim (t's), held by the
// transaction, ahead of the BEGIN and the first statement, in one pipeline,
// one round trip (see heldclaim.go):
//
//	lock · lookup · guard · BEGIN · query · Sync
//
// The lock or the guard fails unless the claim goes to the flow; the
// server then skips the BEGIN and the query (an error skips the rest of a
// pipeline up to its next Sync), so no transaction opens and nothing of
// the flow's runs, and the prelude refuses the transaction with what t
// says. Otherwise the BEGIN
// turns the implicit transaction the claim's statements opened into the
// flow's, and held is the claim it holds until it ends: its completion
// stores the response (CommitComplete).
//
// No claim goes ahead of the BEGIN when the claim had been made already
// and went to the flow, or when the statement cannot go in its pipeline
// (pgpipe.ErrNotSent): the claim is then made here in a round trip of its
// own (not held: a claim as Claim makes it), and the statement goes with
// its BEGIN as in any transaction.
type claimPrelude struct {
	d    *Driver
	t    driver.ClaimTicket
	held *heldClaim
	// locks are the advisory lock keys of the claim sendHeld sent, which
	// its statement reads through pointers.
	locks heldLocks
}

// Before implements pgpipe.Prelude.
func (p *claimPrelude) Before(ctx context.Context, pipe *pgpipe.Pipeline) error {
	req, ok, err := p.t.Take()
	if !ok {
		return err // nil: made already, and it went to the flow
	}
	return p.sendHeld(ctx, pipe, req)
}

// claimAlone makes the claim of req in a round trip of its own and tells
// t; an error is the refusal t gives.
func (p *claimPrelude) claimAlone(ctx context.Context, req driver.ClaimRequest) error {
	res, err := p.d.Claim(ctx, req)
	return p.t.Done(res, err)
}

// claimFailed tells t that its claim could not be made or read (err), and
// returns the refusal t gives.
func (p *claimPrelude) claimFailed(err error) error {
	if err = p.t.Done(driver.ClaimResult{}, err); err == nil { // unreachable: a failed claim never goes to the flow
		err = errors.New("postgres: claim: the claim failed, yet it went to the flow")
	}
	return err
}
