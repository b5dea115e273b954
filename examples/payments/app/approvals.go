package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// Refunds that wait for an approval: POST /refund-requests starts a durable
// run of payments.refundApproval, which waits for the signal "approval"
// (oke.AwaitSignal) — parked like a durable sleep, for up to
// RefundApprovalTimeout — and then starts the refund (payments.refund) or
// records the refusal. POST /refund-requests/{id}/approve sends the signal
// (fx.Signal), behind the app's gate.

// RefundApprovalTimeout is how long a refund request waits for its
// approval before it expires.
const RefundApprovalTimeout = 72 * time.Hour

// RefundRequestIn is the body of POST /refund-requests.
type RefundRequestIn struct {
	ChargeID string `json:"chargeId" minLength:"1" maxLength:"200"` // the charge to refund in full, "ch_…"
	Reason   string `json:"reason,omitempty" maxLength:"500"`       // why, for the approver
}

// RefundRequest is a refund request as POST /refund-requests answers it.
type RefundRequest struct {
	ID       string `json:"id"` // the run that waits for the approval ("run_…")
	ChargeID string `json:"chargeId"`
	Status   string `json:"status"` // "pending"
}

// refundRequestFlow is payments.refundRequest: it starts the run that
// waits for the approval and answers 202 with its id (the id to approve).
// A retry with the same
// Idempotency-Key replays the answer: the run starts once.
func (s *Server) refundRequestFlow(approval *oke.Flow[RefundRequestIn, RefundDecision]) *oke.Flow[RefundRequestIn, RefundRequest] {
	return oke.NewFlow("payments.refundRequest", oke.Options{
		Description: "Ask for a refund that an approver must approve: starts a durable run that waits for the approval signal.",
	}, func(ctx context.Context, in RefundRequestIn, fx *oke.Fx) (oke.Response[RefundRequest], error) {
		id, err := oke.Run(ctx, fx, approval, in)
		if err != nil {
			return oke.Response[RefundRequest]{}, err
		}
		return oke.Accepted(RefundRequest{ID: id, ChargeID: in.ChargeID, Status: "pending"}), nil
	})
}

// Approval is the payload of the signal "approval".
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"` // the approver's principal
	Note     string `json:"note,omitempty"`
}

// RefundDecision is how a refund request ended: the final result of its run.
type RefundDecision struct {
	ChargeID  string `json:"chargeId"`
	Status    string `json:"status"` // "approved" (the refund started), "refused" or "expired"
	By        string `json:"by,omitempty"`
	Note      string `json:"note,omitempty"`
	RefundRun string `json:"refundRun,omitempty"` // approved: the run of payments.refund it started
}

// refundApprovalFlow is payments.refundApproval, the durable run of a
// refund request: it looks the charge up in the requester's tenant (a
// missing one is a declared 404), waits for the signal "approval", and
// then, approved, starts payments.refund for the charge (in a step: once),
// or ends refused, or — no approval within RefundApprovalTimeout — expired.
// The run's journal shows the wait, its deadline, and the approval it got.
func (s *Server) refundApprovalFlow(refund *oke.Flow[RefundIn, Refund]) *oke.Flow[RefundRequestIn, RefundDecision] {
	return oke.NewFlow("payments.refundApproval", oke.Options{
		Durable:     true,
		Description: "Wait for a refund's approval (the signal \"approval\"), then start the refund, or end refused or expired.",
	}, func(ctx context.Context, in RefundRequestIn, fx *oke.Fx) (oke.Response[RefundDecision], error) {
		tenant := fx.Identity().Tenant
		if _, err := oke.Step(ctx, "look up the charge", func(ctx context.Context) (string, error) {
			var id string
			err := fx.Store(s.rdb).QueryRow(ctx, `SELECT id FROM charges WHERE id = $1 AND tenant = $2`,
				in.ChargeID, tenant).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return "", chargeNotFound(in.ChargeID)
			}
			if err != nil {
				return "", fmt.Errorf("look up charge %q: %w", in.ChargeID, err)
			}
			return id, nil
		}); err != nil {
			return oke.Response[RefundDecision]{}, err
		}
		a, ok, err := oke.AwaitSignal[Approval](ctx, "approval", RefundApprovalTimeout)
		if err != nil {
			return oke.Response[RefundDecision]{}, err // oke.ErrSleeping while it waits
		}
		d := RefundDecision{ChargeID: in.ChargeID, Status: "expired"}
		switch {
		case !ok:
		case !a.Approved:
			d.Status, d.By, d.Note = "refused", a.By, a.Note
		default:
			d.Status, d.By, d.Note = "approved", a.By, a.Note
			d.RefundRun, err = oke.Step(ctx, "start the refund", func(ctx context.Context) (string, error) {
				return oke.Run(ctx, fx, refund, RefundIn{ChargeID: in.ChargeID})
			})
			if err != nil {
				return oke.Response[RefundDecision]{}, err
			}
		}
		return oke.OK(d), nil
	})
}

// ApproveIn is the body of POST /refund-requests/{id}/approve.
type ApproveIn struct {
	ID       string `json:"id" minLength:"1" maxLength:"200"` // the request's id, from the path
	Approved bool   `json:"approved"`                         // false refuses the refund
	Note     string `json:"note,omitempty" maxLength:"500"`
}

// Approved is the answer of POST /refund-requests/{id}/approve.
type Approved struct {
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
}

// ErrNotApprover is payments.approveRefund's 403 for a caller who is not a
// user (an API key, anon).
var ErrNotApprover = oke.Fail(http.StatusForbidden, "Forbidden", "Only a user (Authorization: Bearer user:ID) may approve a refund.")

// ErrRequestDecided is payments.approveRefund's 409 for a request that has
// ended: approved, refused or expired.
var ErrRequestDecided = oke.Fail(http.StatusConflict, "RequestDecided", "This refund request has ended (approved, refused or expired).")

// requestNotFound is the 404 for a refund request the caller's tenant does
// not have (or that does not exist: the same answer).
func requestNotFound(id string) *oke.Error {
	return oke.ErrNotFound.WithMessage("No refund request has id %s.", oke.Quote(id))
}

// approveFlow is payments.approveRefund: it sends the signal "approval" to
// the request's run. Who may: a user (Authorization: Bearer user:…) of the
// request's tenant — an API key or anon is 403 (before anything is sent),
// and a request of another tenant is 404, as if it did not exist
// (oke.SignalAuthorize replaces the default rule, that only the run's own
// caller may signal it). An Idempotency-Key dedupes the signal too: a retry
// delivers it once. A request that has ended is 409 RequestDecided.
func (s *Server) approveFlow() *oke.Flow[ApproveIn, Approved] {
	return oke.NewFlow("payments.approveRefund", oke.Options{
		Description: "Approve (or refuse) a refund request: sends the signal \"approval\" to its waiting run.",
	}, func(ctx context.Context, in ApproveIn, fx *oke.Fx) (oke.Response[Approved], error) {
		id := fx.Identity()
		if !strings.HasPrefix(id.Principal, "user:") {
			return oke.Response[Approved]{}, ErrNotApprover
		}
		err := fx.Signal(ctx, in.ID, "approval", Approval{Approved: in.Approved, By: id.Principal, Note: in.Note},
			oke.SignalAuthorize(func(ctx context.Context, sender oke.Identity, run driver.Run) error {
				if run.Flow != "payments.refundApproval" || run.Tenant != sender.Tenant {
					return oke.ErrSignalNoRun // another tenant's: as if it did not exist
				}
				return nil
			}))
		switch {
		case errors.Is(err, oke.ErrSignalNoRun):
			return oke.Response[Approved]{}, requestNotFound(in.ID)
		case errors.Is(err, oke.ErrSignalRunFinished):
			return oke.Response[Approved]{}, ErrRequestDecided
		case err != nil:
			return oke.Response[Approved]{}, err
		}
		return oke.Accepted(Approved{ID: in.ID, Approved: in.Approved}), nil
	})
}
