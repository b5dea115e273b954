package postgres

import (
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

// PgConn returns the pgx connection under a connection of Driver.DB, as
// (*sql.Conn).Raw hands it out.
func PgConn(dc any) *pgconn.PgConn { return dc.(*pgpipe.Conn).Conn.Conn().PgConn() }

// LockKey is the advisory lock a claim held in a transaction takes on key.
var LockKey = lockKey

// WaitsHeard is how many keys d knows some instance waits for (the "w:"
// messages its listener heard and has not seen completed yet).
func WaitsHeard(d *Driver) int64 { return d.watch.keys.nHeard.Load() }

// ClaimFunction is the name of the claim function the driver calls.
const ClaimFunction = claimFunction
