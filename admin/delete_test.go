package admin_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
)

// claimRow makes a running row held by owner on e's memory driver, its lease
// ending lease from the driver's clock moved by shift (a negative shift
// makes a row whose lease has already lapsed).
func (e *apiEnv) claimRow(key, owner string, shift, lease time.Duration) driver.Key {
	e.t.Helper()
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "adm.secret", Key: key}
	e.clock.add(shift)
	defer e.clock.add(-shift)
	res, err := e.d.Claim(context.Background(), driver.ClaimRequest{Key: k, Fingerprint: "fp", Owner: owner, Lease: lease, TTL: 24 * time.Hour})
	if err != nil || !res.Claimed {
		e.t.Fatalf("claim %s: %+v %v", key, res, err)
	}
	return k
}

func rowPath(k driver.Key) string {
	return "/_oke/idempotency/row?" + url.Values{"tenant": {k.Tenant}, "principal": {k.Principal}, "flow": {k.Flow}, "key": {k.Key}}.Encode()
}

// TestAdminDeleteOfARowInFlight: issue 21 defect 10 — an admin delete of a
// row still in flight (running, lease not over) is 409 RowInProgress with
// the envelope, the row untouched and its holder still able to complete;
// with force=1 it is deleted (the holder fenced out); a completed row and a
// running row whose lease lapsed are deleted as before.
func TestAdminDeleteOfARowInFlight(t *testing.T) {
	e := setupAPI(t)
	ctx := context.Background()

	held := e.claimRow("in-flight-key", "holder-1", 0, time.Hour)
	body := e.wantError("DELETE", rowPath(held), "", 409, "RowInProgress")
	if !strings.Contains(body, "force=1") || !strings.Contains(body, "second execution") {
		t.Fatalf("the refusal does not say why or how to force it: %s", body)
	}
	if row, err := e.d.Get(ctx, held); err != nil || row.State != driver.Running || row.Owner != "holder-1" {
		t.Fatalf("after a refused delete the row is %+v %v, want it still held by holder-1", row, err)
	}
	e.wantError("DELETE", rowPath(held)+"&force=maybe", "", 400, "InvalidInput")
	e.decode("DELETE", rowPath(held)+"&force=1", "", 200, nil)
	if _, err := e.d.Get(ctx, held); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("a forced delete left the row: %v", err)
	}
	if err := e.d.Complete(ctx, held, "holder-1", driver.Response{Status: 201}, time.Hour); !errors.Is(err, driver.ErrNotOwner) {
		t.Fatalf("the fenced-out holder could still complete: %v", err)
	}

	// A completed row: deleted without force, as before.
	done := e.claimRow("completed-key", "holder-2", 0, time.Hour)
	if err := e.d.Complete(ctx, done, "holder-2", driver.Response{Status: 201}, time.Hour); err != nil {
		t.Fatal(err)
	}
	e.decode("DELETE", rowPath(done), "", 200, nil)
	e.wantError("DELETE", rowPath(done), "", 404, "NotFound")

	// A running row whose lease lapsed an hour ago: not in flight, deleted.
	lapsed := e.claimRow("lapsed-key", "holder-3", -2*time.Hour, time.Hour)
	e.decode("DELETE", rowPath(lapsed), "", 200, nil)
	if _, err := e.d.Get(ctx, lapsed); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("the lapsed row was not deleted: %v", err)
	}
}

// TestDeleteRowRefusesARowInFlight: the rule itself (which the CLI's
// -data source uses): ErrRowInProgress without force, deleted with it.
func TestDeleteRowRefusesARowInFlight(t *testing.T) {
	e := setupAPI(t)
	ctx := context.Background()
	k := e.claimRow("rule-key", "holder", 0, time.Hour)
	err := admin.DeleteRow(ctx, e.d, k, false, time.Now())
	var inFlight *admin.RowInProgressError
	if !errors.Is(err, admin.ErrRowInProgress) || !errors.As(err, &inFlight) || inFlight.Key != k || !strings.Contains(err.Error(), "force") {
		t.Fatalf("DeleteRow of a row in flight: %v", err)
	}
	if err := admin.DeleteRow(ctx, e.d, k, true, time.Now()); err != nil {
		t.Fatalf("forced: %v", err)
	}
	if err := admin.DeleteRow(ctx, e.d, k, false, time.Now()); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("a missing row: %v", err)
	}
}
