package postgres

import (
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

// PgConn returns the pgx connection under a connection of Driver.DB, as
// (*sql.Conn).Raw hands it out.
func PgConn(dc any) *pgconn.PgConn { return dc.(*pgpipe.Conn).Conn.Conn().PgConn() }

// LockKey is the advisory lock a claim held in a transaction on d's
// schema takes on key, exclusive.
func LockKey(d *Driver, key driver.Key) int64 { return d.lockKey(key) }

// LegacyLockKey is the advisory lock an oke before v0.1.0 took on key for
// a claim held in a transaction, exclusive, whatever its schema (v0.1.0
// took it shared as well).
func LegacyLockKey(key driver.Key) int64 {
	return hashParts(nil, key.Tenant, key.Principal, key.Flow, key.Key)
}

// RequestLockKey is the advisory lock a claim held in a transaction on d's
// schema takes on key and fingerprint fp, shared.
func RequestLockKey(d *Driver, key driver.Key, fp string) int64 {
	return d.locks(key, fp).request
}

// LegacyRequestLockKey is the advisory lock an oke before v0.1.0 took on
// key and fingerprint fp, shared, whatever its schema (v0.1.0 as well).
func LegacyRequestLockKey(key driver.Key, fp string) int64 {
	return hashParts(nil, key.Tenant, key.Principal, key.Flow, key.Key, fp)
}

// WaitsHeard is how many keys d knows some instance waits for (the "w:"
// messages its listener heard and has not seen completed yet).
func WaitsHeard(d *Driver) int64 { return d.watch.keys.nHeard.Load() }

// ClaimFunction is the name of the claim function the driver calls.
const ClaimFunction = claimFunction
