package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// TestReplayClaimWritesNothing: the claim of a completed, unexpired key (a
// replay) takes no row lock and gets no transaction id, so its commit needs
// no WAL flush — while a claim of a new key does get one.
func TestReplayClaimWritesNothing(t *testing.T) {
	d := schemaDriver(t, "replay")
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "replay-key-0000-a"}
	req := driver.ClaimRequest{Key: key, Fingerprint: "fp", Owner: "o1", Lease: time.Minute, TTL: time.Hour}

	// claim runs the claim statement in a transaction of its own and reports
	// whether that transaction was given an id (a write happened).
	claim := func(owner string) (claimed, wrote bool) {
		t.Helper()
		tx, err := d.pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		var c claimScan
		if err := tx.QueryRow(t.Context(), d.sql(claimSQL), key.Tenant, key.Principal, key.Flow, key.Key,
			req.Fingerprint, owner, micros(req.Lease), micros(req.TTL), "").Scan(c.dest()...); err != nil {
			t.Fatal(err)
		}
		var xid *string
		if err := tx.QueryRow(t.Context(), `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		_, claimed = c.up.row()
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		return claimed, xid != nil
	}
	if claimed, wrote := claim("o1"); !claimed || !wrote {
		t.Fatalf("claim of a new key: claimed=%v wrote=%v, want both", claimed, wrote)
	}
	if err := d.Complete(t.Context(), key, "o1", driver.Response{Status: 201, Body: []byte(`{}`)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if claimed, wrote := claim("o2"); claimed || wrote {
		t.Fatalf("claim of a completed key: claimed=%v wrote=%v, want a read that writes nothing", claimed, wrote)
	}
	res, err := d.Claim(t.Context(), req)
	if err != nil || res.Claimed || res.Row.State != driver.Completed || res.Row.Response == nil || res.Row.Response.Status != 201 {
		t.Fatalf("Claim of a completed key: %+v %v, want the completed row to replay", res, err)
	}
}
