package main

import (
	"context"
	"database/sql"

	"github.com/okengine/oke/internal/nemesis"
)

// readRows reads the demo's business tables (the same on SQLite and
// Postgres): charges by amount, refunds by charge, and the fake
// provider's refunds by charge.
func readRows(ctx context.Context, db *sql.DB) (storeRows, error) {
	out := storeRows{charges: map[int64][]string{}, refunds: map[string][]string{}, provider: map[string]nemesis.ProviderCalls{}}
	rows, err := db.QueryContext(ctx, `SELECT id, amount FROM charges`)
	if err != nil {
		return out, err
	}
	for rows.Next() {
		var id string
		var amt int64
		if err := rows.Scan(&id, &amt); err != nil {
			rows.Close()
			return out, err
		}
		out.charges[amt] = append(out.charges[amt], id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	rows, err = db.QueryContext(ctx, `SELECT id, charge_id FROM refunds`)
	if err != nil {
		return out, err
	}
	for rows.Next() {
		var id, charge string
		if err := rows.Scan(&id, &charge); err != nil {
			rows.Close()
			return out, err
		}
		out.refunds[charge] = append(out.refunds[charge], id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	rows, err = db.QueryContext(ctx, `SELECT charge_id, count(*), sum(requests) FROM provider_refunds GROUP BY charge_id`)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var charge string
		var n, reqs int64
		if err := rows.Scan(&charge, &n, &reqs); err != nil {
			return out, err
		}
		out.provider[charge] = nemesis.ProviderCalls{Refunds: int(n), Requests: int(reqs)}
	}
	return out, rows.Err()
}
