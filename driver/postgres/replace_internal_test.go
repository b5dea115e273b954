package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/pgtest"
)

// TestMayReplaceSQLIsMayReplace: the replace rule in SQL (mayReplaceSQL)
// answers as driver.MayReplace does, for every row state, lease, expiry
// and fingerprint around the database's now() (the boundaries included:
// a lease or TTL that ends at now() has ended). Takeover is a replacement
// of a row that has not expired (expiredSQL), as claimSQL carries the run.
func TestMayReplaceSQLIsMayReplace(t *testing.T) {
	ctx := t.Context()
	tx, err := pgtest.AdminPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var now time.Time // now() is the transaction's: the same in every statement below
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	q := `SELECT ` + mayReplaceSQL("t", "$5") + `, ` + expiredSQL("t") + `
		FROM (SELECT $1::smallint AS state, $2::timestamptz AS lease_until, $3::timestamptz AS expires_at,
			$4::text AS fingerprint) AS t`
	offsets := []time.Duration{-time.Hour, -time.Second, 0, time.Second, time.Hour}
	cases := 0
	for _, state := range []driver.State{driver.Running, driver.Completed} {
		leases := append([]*time.Duration{nil}, ptrs(offsets)...)
		for _, lease := range leases {
			if (state == driver.Running) != (lease != nil) {
				continue // a Running row has a lease; a Completed row has none
			}
			for _, exp := range offsets {
				for _, rowFP := range []string{"fp-a", "fp-b"} {
					row := driver.Row{State: state, Fingerprint: rowFP, ExpiresAt: now.Add(exp)}
					leaseArg := pgtype.Timestamptz{}
					if lease != nil {
						row.LeaseUntil = now.Add(*lease)
						leaseArg = pgtype.Timestamptz{Time: row.LeaseUntil, Valid: true}
					}
					name := fmt.Sprintf("%s/lease%v/expires%v/%s", state, fmtOffset(lease), exp, rowFP)
					wantOK, wantTakeover := driver.MayReplace(&row, "fp-a", now)
					var ok, expired bool
					if err := tx.QueryRow(ctx, q, int16(state), leaseArg, row.ExpiresAt, rowFP, "fp-a").Scan(&ok, &expired); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if ok != wantOK || (ok && !expired) != wantTakeover {
						t.Errorf("%s: SQL says replace %v, takeover %v; driver.MayReplace says %v, %v",
							name, ok, ok && !expired, wantOK, wantTakeover)
					}
					cases++
				}
			}
		}
	}
	if cases != (5+1)*5*2 {
		t.Fatalf("ran %d cases", cases)
	}
	if err := tx.Rollback(ctx); err != nil && err != pgx.ErrTxClosed {
		t.Fatal(err)
	}
}

func ptrs(ds []time.Duration) []*time.Duration {
	out := make([]*time.Duration, len(ds))
	for i := range ds {
		out[i] = &ds[i]
	}
	return out
}

func fmtOffset(d *time.Duration) string {
	if d == nil {
		return "none"
	}
	return d.String()
}
