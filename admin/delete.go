package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/okengine/oke/driver"
)

// ErrRowInProgress is what DeleteRow refuses, without force, to delete: a
// row held by a request that is still running (state running, its lease not
// over). Deleting it would free the key while the first execution goes on,
// so the next request with the key would start a second one beside it.
// errors.Is(err, ErrRowInProgress) holds for a *RowInProgressError.
var ErrRowInProgress = errors.New("the idempotency row is held by a request still running")

// RowInProgressError is DeleteRow's refusal of a row still in flight: the
// row's key and when its holder's lease ends (on the store's clock).
type RowInProgressError struct {
	Key        driver.Key
	LeaseUntil time.Time
	Now        time.Time
}

func (e *RowInProgressError) Error() string {
	return fmt.Sprintf("the row of %q (tenant %q, principal %q, flow %s) is held by a request still running (its lease ends in %s): "+
		"deleting it would let a second execution start beside the first; wait for it to finish, "+
		"or force the delete if you know its holder is gone",
		clip(e.Key.Key), clip(e.Key.Tenant), clip(e.Key.Principal), clip(e.Key.Flow), max(e.LeaseUntil.Sub(e.Now), 0).Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrRowInProgress) hold.
func (e *RowInProgressError) Is(target error) bool { return target == ErrRowInProgress }

// clip shortens a long key part in a message to its first 64 bytes.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}

// DeleteRow deletes the idempotency row with key, with the rule every admin
// delete follows (the API's DELETE /idempotency/row, the console's Delete
// button, oke idempotency delete): a row still in flight — running, its
// holder's lease not over at now — is refused with a *RowInProgressError
// (ErrRowInProgress) unless force is set. A completed row, an expired one
// and a running one whose lease has lapsed are deleted.
//
// On a driver with driver.IdleRowDeleter (oke's three) the check and the
// delete are one atomic step on the store's clock, and now only words the
// error. On another, DeleteRow looks the row up and judges it at now: a
// running row whose lease lapsed is deleted only if the same holder still
// has it (driver.Driver.Release, fenced by its owner), so a request that
// took the key over in between makes it a refusal; a completed row past its
// TTL that a new claim replaces in between would be deleted in flight.
//
// With force, the row is deleted whatever its state (driver.RowDeleter):
// its holder is fenced out (it can no longer store its response) but keeps
// running, and the next request with the key runs as new beside it — only
// for a holder you know is gone or stuck.
//
// ErrNotFound (driver) when no row has the key; d must implement
// driver.RowDeleter.
func DeleteRow(ctx context.Context, d driver.Driver, key driver.Key, force bool, now time.Time) error {
	del, ok := d.(driver.RowDeleter)
	if !ok {
		return errCannotDelete
	}
	if force {
		return del.Delete(ctx, key)
	}
	if idle, ok := d.(driver.IdleRowDeleter); ok {
		row, held, err := idle.DeleteIdle(ctx, key)
		if err == nil && held {
			return &RowInProgressError{Key: key, LeaseUntil: row.LeaseUntil, Now: now}
		}
		return err
	}
	row, err := d.Get(ctx, key)
	if err != nil {
		return err
	}
	if row.State != driver.Running {
		return del.Delete(ctx, key)
	}
	if now.Before(row.LeaseUntil) {
		return &RowInProgressError{Key: key, LeaseUntil: row.LeaseUntil, Now: now}
	}
	// Lapsed: delete it only while the holder we saw still has it.
	err = d.Release(ctx, key, row.Owner)
	if !errors.Is(err, driver.ErrNotOwner) {
		return err
	}
	cur, gerr := d.Get(ctx, key)
	switch {
	case errors.Is(gerr, driver.ErrNotFound):
		return driver.ErrNotFound // deleted meanwhile (its holder released it, or another delete)
	case gerr != nil:
		return gerr
	case cur.State == driver.Running:
		return &RowInProgressError{Key: key, LeaseUntil: cur.LeaseUntil, Now: now}
	}
	// Completed meanwhile by its late holder: a finished row, deleted as any.
	return del.Delete(ctx, key)
}

var errCannotDelete = errors.New("this app's driver cannot delete a row (it does not implement driver.RowDeleter)")
