package admin_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
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

// TestDeleteRowRefusesARowInFlight: the rule itself (which the CLI's -data
// source uses), on every driver: ErrRowInProgress for a running row whose
// lease is not over, deleted with force; a completed row and a running one
// whose lease lapsed are deleted; a missing row is ErrNotFound.
func TestDeleteRowRefusesARowInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) driver.Driver
	}{
		{"memory", func(t *testing.T) driver.Driver { return memory.New() }},
		{"file", func(t *testing.T) driver.Driver {
			d, err := file.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			return d
		}},
		{"postgres", func(t *testing.T) driver.Driver {
			_, dsn := pgtest.NewDatabase(t, "oke_admin_delete")
			c := pgtest.Charge(t, pgtest.DriverConns(1))
			d, err := postgres.Open(context.Background(), c.DSN(pgtest.WithPoolSize(dsn, 1)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if err := d.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.open(t)
			ctx := context.Background()
			claim := func(key string) driver.Key {
				k := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: key}
				res, err := d.Claim(ctx, driver.ClaimRequest{Key: k, Fingerprint: "fp", Owner: "owner-" + key, Lease: time.Hour, TTL: 24 * time.Hour})
				if err != nil || !res.Claimed {
					t.Fatalf("claim %s: %+v %v", key, res, err)
				}
				return k
			}
			k := claim("in-flight")
			err := admin.DeleteRow(ctx, d, k, false, time.Now())
			var inFlight *admin.RowInProgressError
			if !errors.Is(err, admin.ErrRowInProgress) || !errors.As(err, &inFlight) || inFlight.Key != k || !strings.Contains(err.Error(), "force") {
				t.Fatalf("DeleteRow of a row in flight: %v", err)
			}
			if row, err := d.Get(ctx, k); err != nil || row.Owner != "owner-in-flight" {
				t.Fatalf("after the refusal: %+v %v", row, err)
			}
			if err := admin.DeleteRow(ctx, d, k, true, time.Now()); err != nil {
				t.Fatalf("forced: %v", err)
			}
			if err := admin.DeleteRow(ctx, d, k, false, time.Now()); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("a missing row: %v", err)
			}
			done := claim("completed")
			if err := d.Complete(ctx, done, "owner-completed", driver.Response{Status: 201}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := admin.DeleteRow(ctx, d, done, false, time.Now()); err != nil {
				t.Fatalf("a completed row: %v", err)
			}
			// A lease of 10 ms, on the store's clock: refused while it
			// holds, deleted once it has lapsed (awaited by asking again).
			lapsed := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "lapsed"}
			if _, err := d.Claim(ctx, driver.ClaimRequest{Key: lapsed, Fingerprint: "fp", Owner: "gone", Lease: 10 * time.Millisecond, TTL: 24 * time.Hour}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				err := admin.DeleteRow(ctx, d, lapsed, false, time.Now())
				if err == nil {
					break
				}
				if !errors.Is(err, admin.ErrRowInProgress) || time.Now().After(deadline) {
					t.Fatalf("a row whose 10 ms lease lapsed: %v", err)
				}
			}
			if _, err := d.Get(ctx, lapsed); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("the lapsed row is still there: %v", err)
			}
		})
	}
}

// rowDriver is a driver with Delete but not DeleteIdle: DeleteRow's
// fallback (a look-up, then a fenced Release or a Delete).
type rowDriver interface {
	driver.Driver
	driver.RowDeleter
}

// staleGet is such a driver whose first Get shows a row as its old holder
// left it: a request took it over between the admin's look-up and its
// delete.
type staleGet struct {
	rowDriver
	once  sync.Once
	stale driver.Row
}

func (s *staleGet) Get(ctx context.Context, k driver.Key) (driver.Row, error) {
	var row driver.Row
	first := false
	s.once.Do(func() { row, first = s.stale, true })
	if first {
		return row, nil
	}
	return s.rowDriver.Get(ctx, k)
}

// TestDeleteRowOfALapsedRowTakenOver: on a driver without
// driver.IdleRowDeleter, a running row whose lease had lapsed when DeleteRow
// looked, but that another request took over before the delete, is refused
// as in flight (the delete is fenced by the holder it
// saw), and the new holder keeps it.
func TestDeleteRowOfALapsedRowTakenOver(t *testing.T) {
	m := memory.New()
	ctx := context.Background()
	k := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "taken-over"}
	if _, err := m.Claim(ctx, driver.ClaimRequest{Key: k, Fingerprint: "fp", Owner: "new-holder", Lease: time.Hour, TTL: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	d := &staleGet{rowDriver: m, stale: driver.Row{Key: k, State: driver.Running, Owner: "old-holder", LeaseUntil: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour)}}
	if err := admin.DeleteRow(ctx, d, k, false, now); !errors.Is(err, admin.ErrRowInProgress) {
		t.Fatalf("DeleteRow of a row taken over meanwhile: %v, want ErrRowInProgress", err)
	}
	if row, err := m.Get(ctx, k); err != nil || row.Owner != "new-holder" {
		t.Fatalf("the new holder lost its row: %+v %v", row, err)
	}
}
