package pgpipe

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/internal/deadline"
)

// A Tie is a store call's deadline tied to its connection's socket
// (deadline.Attach), so that pgconn has no context to watch: Untie it once
// the call's results are read, before the connection is used again.
type Tie struct {
	bound context.Context
	pc    *pgx.Conn
}

// TieDeadline ties ctx's deadline to pc's socket when ctx is a deadline
// of oke's that can be tied; it returns the context to run the call on (ctx
// itself when not tied) and the Tie.
func TieDeadline(ctx context.Context, pc *pgx.Conn) (context.Context, Tie) {
	q, ok := deadline.Attach(ctx, pc.PgConn().Conn())
	if !ok {
		return ctx, Tie{}
	}
	return q, Tie{bound: ctx, pc: pc}
}

// Untie unties the deadline. When the deadline cut the socket (its
// deadline is in the past; a message may have been cut in two) the
// connection is closed, so that neither pgxpool nor database/sql hands it
// out again. The call's error stays what the call said: a result that was
// read is true, and a call cut before its answer failed with a timeout
// (an outcome the caller cannot know).
func (t Tie) Untie() {
	if t.pc != nil && deadline.Detach(t.bound, t.pc.PgConn().Conn()) {
		_ = t.pc.Close(context.Background())
	}
}
