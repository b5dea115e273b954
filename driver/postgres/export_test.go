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

// LegacyLockKey is the advisory lock an older oke's claim held in a
// transaction took on key, exclusive, whatever its schema.
var LegacyLockKey = legacyLockKey

// LegacyRequestLockKey is the advisory lock an older oke's claim held in a
// transaction took on key and fingerprint fp, shared, whatever its schema.
func LegacyRequestLockKey(key driver.Key, fp string) int64 {
	return hashParts(nil, key.Tenant, key.Principal, key.Flow, key.Key, fp)
}

// WaitsHeard is how many keys d knows some instance waits for (the "w:"
// messages its listener heard and has not seen completed yet).
func WaitsHeard(d *Driver) int64 { return d.watch.keys.nHeard.Load() }

// ClaimFunction is the name of the claim function the driver calls.
const ClaimFunction = claimFunction
