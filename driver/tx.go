package driver

import (
	"context"
	"database/sql"
	"time"
)

// TxDriver is implemented by a driver that keeps its rows in a SQL database
// a flow can write its own tables to. oke then opens a flow's transaction
// (oke.Fx.Tx) on that database and stores the flow's outcome in the same
// transaction: the flow's writes and the stored response (or a durable
// step's saved result) commit together or not at all. That is what makes
// writes to the same database exactly-once, where writes anywhere else are
// at-least-once.
//
// Both methods are fenced like their plain counterparts: ErrNotOwner when
// owner no longer holds the row or run, and then the caller must roll tx
// back. Neither commits tx; nothing they write is durable until the caller
// commits it.
type TxDriver interface {
	Driver
	// DB returns a database/sql handle on the driver's database. The driver
	// owns it: callers must not close it.
	DB() *sql.DB
	// CompleteTx is Complete inside tx.
	CompleteTx(ctx context.Context, tx *sql.Tx, key Key, owner string, resp Response, ttl time.Duration) error
	// SaveStepTx is Journal.SaveStep inside tx.
	SaveStepTx(ctx context.Context, tx *sql.Tx, id, owner string, step Step) error
}
