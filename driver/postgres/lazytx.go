package postgres

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/okengine/oke/driver"
)

// A flow's transaction (oke.Fx.Tx) begins lazily: Begin only marks its
// connection, and the BEGIN goes to the server in one pipeline with the
// flow's first statement. A live keyed charge is then three round trips —
// the claim; BEGIN with the INSERT; the completion with the COMMIT — where a
// BEGIN of its own made four. What the flow can see is the same: Postgres
// takes a transaction's snapshot at its first statement, not at BEGIN, and
// the flow sends nothing in between. One thing moves: now() (the
// transaction's timestamp) is the time of that first statement, not of the
// Fx.Tx call.
//
// The connections of DB are pgx's database/sql connections (stdlib.Conn)
// wrapped in lazyConn. A connection with no BEGIN pending behaves exactly as
// pgx's.
//
// A transaction begun by BeginClaimed also carries an Idempotency-Key claim
// (oke.ClaimInTx): its first statement goes in one pipeline behind the
// claim, held in the transaction, and a live keyed charge is two round
// trips. See sendClaimed.

// openDB is DB's handle on pool: pgx's database/sql adapter, its
// connections wrapped in lazyConn. As with stdlib.OpenDBFromPool, the pool
// keeps the idle connections, not database/sql.
func openDB(d *Driver, pool *pgxpool.Pool) *sql.DB {
	db := sql.OpenDB(lazyConnector{stdlib.GetPoolConnector(pool), d})
	db.SetMaxIdleConns(0)
	return db
}

type lazyConnector struct {
	sqldriver.Connector
	d *Driver
}

func (c lazyConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("postgres: the pool's connection is a %T, not pgx's", dc)
	}
	return &lazyConn{Conn: sc, d: c.d}, nil
}

// lazyConn is a pgx database/sql connection whose transaction may be begun
// but not yet sent (pending): its next statement carries the BEGIN, and the
// claim of ticket ahead of it, if set.
type lazyConn struct {
	*stdlib.Conn
	d       *Driver
	pending bool
	ticket  driver.ClaimTicket // with pending: a claim to send ahead of the BEGIN
	// refused is set when the claim sent ahead did not go to the flow: no
	// transaction is open, and every statement but its end fails with it.
	refused error
	// held is the claim the open transaction holds (sendHeld), until it
	// ends: its completion stores the response (CommitComplete).
	held *heldClaim
	// Encoders of the claim's and the statement's arguments.
	claimArgs, stmtArgs pgx.ExtendedQueryBuilder
}

// maxClaimPrepared bounds the statements a connection prepares to send
// behind a claim (each stays prepared for the connection's life); past it,
// a new statement's claim goes in a round trip of its own.
const maxClaimPrepared = 256

// Begin implements driver.TxDriver: it opens the flow's transaction on
// conn, a connection of DB, without a round trip — the BEGIN goes with the
// first statement sent on conn (or not at all, if the transaction ends
// before any: it then has nothing to commit or roll back).
func (d *Driver) Begin(ctx context.Context, conn *sql.Conn) error {
	return d.begin(conn, nil)
}

// BeginClaimed implements driver.TxClaimer: Begin, with t's claim sent in
// the same pipeline as the first statement, ahead of the BEGIN.
func (d *Driver) BeginClaimed(ctx context.Context, conn *sql.Conn, t driver.ClaimTicket) error {
	return d.begin(conn, t)
}

func (d *Driver) begin(conn *sql.Conn, t driver.ClaimTicket) error {
	return conn.Raw(func(dc any) error {
		lc, ok := dc.(*lazyConn)
		if !ok {
			return fmt.Errorf("postgres: begin: the connection is a %T, not one of the driver's DB", dc)
		}
		if lc.pending || lc.refused != nil || lc.Conn.Conn().PgConn().TxStatus() != 'I' {
			return errors.New("postgres: begin: the connection is already in a transaction")
		}
		lc.pending, lc.ticket = true, t
		return nil
	})
}

// txEnd reports whether query only ends a transaction (COMMIT, ROLLBACK,
// END, ABORT): with BEGIN still pending there is nothing for it to end.
func txEnd(query string) bool {
	q := strings.TrimRight(strings.TrimSpace(query), "; \t\n")
	for _, w := range [...]string{"COMMIT", "ROLLBACK", "END", "ABORT"} {
		if strings.EqualFold(q, w) {
			return true
		}
	}
	return false
}

// ended handles a statement on a connection whose transaction is pending
// or was refused, when the statement only ends that transaction: there is
// none to end, and nothing is sent.
func (c *lazyConn) ended(query string) bool {
	if (!c.pending && c.refused == nil) || !txEnd(query) {
		return false
	}
	c.pending, c.ticket, c.refused, c.held = false, nil, nil, nil
	return true
}

// ExecContext sends query, pipelined behind a pending BEGIN.
func (c *lazyConn) ExecContext(ctx context.Context, query string, argsV []sqldriver.NamedValue) (sqldriver.Result, error) {
	if c.ended(query) {
		return sqldriver.RowsAffected(0), nil
	}
	if c.refused != nil {
		return nil, c.refused
	}
	if !c.pending {
		if c.held != nil && txEnd(query) {
			c.held = nil // the transaction ends, and its claim with it
		}
		return c.Conn.ExecContext(ctx, query, argsV)
	}
	br, err := c.sendFirst(ctx, query, argsV)
	if err != nil {
		return nil, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return sqldriver.RowsAffected(tag.RowsAffected()), nil
}

// QueryContext sends query, pipelined behind a pending BEGIN.
func (c *lazyConn) QueryContext(ctx context.Context, query string, argsV []sqldriver.NamedValue) (sqldriver.Rows, error) {
	if c.refused != nil { // its end goes through ExecContext, as database/sql's and oke's do
		return nil, c.refused
	}
	if !c.pending {
		return c.Conn.QueryContext(ctx, query, argsV)
	}
	br, err := c.sendFirst(ctx, query, argsV)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	// Read the first row now, as pgx's adapter does: a statement that
	// fails reports it here, not at the first Next.
	more := rows.Next()
	if err := rows.Err(); err != nil {
		rows.Close()
		br.Close()
		return nil, err
	}
	return &lazyRows{conn: c.Conn.Conn(), br: br, rows: rows, first: true, more: more}, nil
}

// ResetSession clears a BEGIN that was never sent: the connection is back
// in its pool with no transaction.
func (c *lazyConn) ResetSession(ctx context.Context) error {
	c.pending, c.ticket, c.refused, c.held = false, nil, nil, nil
	return c.Conn.ResetSession(ctx)
}

// begun are the results of a transaction's first statement, sent with its
// BEGIN: the statement's, read with Exec or Query, and Close, which reads
// the rest of the pipeline. pgx.BatchResults is one.
type begun interface {
	Exec() (pgconn.CommandTag, error)
	Query() (pgx.Rows, error)
	Close() error
}

func values(argsV []sqldriver.NamedValue) []any {
	args := make([]any, len(argsV))
	for i, a := range argsV {
		args[i] = a.Value
	}
	return args
}

// sendFirst sends the pending transaction's first statement: behind its
// claim (sendClaimed) when it carries one not made yet, else with its
// BEGIN (sendBegun).
func (c *lazyConn) sendFirst(ctx context.Context, query string, argsV []sqldriver.NamedValue) (begun, error) {
	args := values(argsV)
	if t := c.ticket; t != nil {
		c.ticket = nil
		br, err, sent := c.sendClaimed(ctx, t, query, args)
		if sent {
			return br, err
		}
	}
	return c.sendBegun(ctx, query, args)
}

// sendBegun sends BEGIN and query as one pipeline and reads BEGIN's
// result; the caller reads query's from the returned results and closes
// them. The BEGIN counts as sent once the pipeline is: should it have
// failed, the transaction's end is still sent and finds none (a warning in
// Postgres, not an error).
func (c *lazyConn) sendBegun(ctx context.Context, query string, args []any) (begun, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(query, args...)
	c.pending = false
	br := c.Conn.Conn().SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		if pgconn.SafeToRetry(err) {
			return nil, sqldriver.ErrBadConn // nothing was sent: as pgx's own adapter says
		}
		return nil, err
	}
	return br, nil
}

// lazyRows are the rows of a statement sent with its transaction's BEGIN.
// Each column becomes the same database/sql value pgx's adapter gives for
// it (stdlib.Rows): int64, float64, bool, []byte, time.Time, or the text
// of any other type.
type lazyRows struct {
	conn  *pgx.Conn
	br    begun
	rows  pgx.Rows
	names []string
	conv  []func(src []byte) (sqldriver.Value, error)
	// first: the first row was read by QueryContext; more: whether it
	// exists.
	first, more bool
}

func (r *lazyRows) Columns() []string {
	if r.names == nil {
		fds := r.rows.FieldDescriptions()
		r.names = make([]string, len(fds))
		for i, fd := range fds {
			r.names[i] = fd.Name
		}
	}
	return r.names
}

// ColumnTypeDatabaseTypeName is the column's type name, upper-cased, or
// its OID when pgx does not know it — as pgx's adapter reports it.
func (r *lazyRows) ColumnTypeDatabaseTypeName(i int) string {
	oid := r.rows.FieldDescriptions()[i].DataTypeOID
	if t, ok := r.conn.TypeMap().TypeForOID(oid); ok {
		return strings.ToUpper(t.Name)
	}
	return strconv.FormatUint(uint64(oid), 10)
}

func (r *lazyRows) Close() error {
	r.rows.Close()
	err := r.rows.Err()
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *lazyRows) Next(dest []sqldriver.Value) error {
	more := r.more
	if r.first {
		r.first = false
	} else {
		more = r.rows.Next()
	}
	if !more {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	if r.conv == nil {
		m := r.conn.TypeMap()
		fds := r.rows.FieldDescriptions()
		r.conv = make([]func([]byte) (sqldriver.Value, error), len(fds))
		for i, fd := range fds {
			r.conv[i] = valueFunc(m, fd.DataTypeOID, fd.Format)
		}
	}
	for i, raw := range r.rows.RawValues() {
		if raw == nil {
			dest[i] = nil
			continue
		}
		v, err := r.conv[i](raw)
		if err != nil {
			return fmt.Errorf("postgres: convert column %d: %w", i, err)
		}
		dest[i] = v
	}
	return nil
}

// valueFunc converts a column of type oid, sent in format, to the value
// database/sql gets from pgx's adapter for that type.
func valueFunc(m *pgtype.Map, oid uint32, format int16) func([]byte) (sqldriver.Value, error) {
	switch oid {
	case pgtype.BoolOID:
		return scanAs[bool](m, oid, format, nil)
	case pgtype.ByteaOID, pgtype.JSONOID, pgtype.JSONBOID, pgtype.XMLOID:
		return scanAs[[]byte](m, oid, format, nil)
	case pgtype.Int2OID:
		return scanAs(m, oid, format, func(v int16) sqldriver.Value { return int64(v) })
	case pgtype.Int4OID:
		return scanAs(m, oid, format, func(v int32) sqldriver.Value { return int64(v) })
	case pgtype.Int8OID:
		return scanAs[int64](m, oid, format, nil)
	case pgtype.Float4OID:
		return scanAs(m, oid, format, func(v float32) sqldriver.Value { return float64(v) })
	case pgtype.Float8OID:
		return scanAs[float64](m, oid, format, nil)
	case pgtype.CIDOID, pgtype.OIDOID, pgtype.XIDOID:
		return scanValuer[pgtype.Uint32](m, oid, format)
	case pgtype.DateOID:
		return scanValuer[pgtype.Date](m, oid, format)
	case pgtype.TimestampOID:
		return scanValuer[pgtype.Timestamp](m, oid, format)
	case pgtype.TimestamptzOID:
		return scanValuer[pgtype.Timestamptz](m, oid, format)
	}
	if format == pgtype.TextFormatCode {
		return scanAs[string](m, oid, format, nil)
	}
	// pgx's adapter asks for every other type as text. In a pipeline the
	// server sends what pgx prefers, binary for many types: decode it and
	// write it as text.
	return func(src []byte) (sqldriver.Value, error) {
		typ, ok := m.TypeForOID(oid)
		if !ok {
			return nil, fmt.Errorf("type OID %d sent in binary format is unknown to pgx", oid)
		}
		v, err := typ.Codec.DecodeValue(m, oid, format, src)
		if err != nil {
			return nil, err
		}
		text, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
		if err != nil {
			return nil, err
		}
		return string(text), nil
	}
}

// scanAs scans into a T, then converts it with to (nil: T is the value).
func scanAs[T any](m *pgtype.Map, oid uint32, format int16, to func(T) sqldriver.Value) func([]byte) (sqldriver.Value, error) {
	var v T
	plan := m.PlanScan(oid, format, &v)
	return func(src []byte) (sqldriver.Value, error) {
		if err := plan.Scan(src, &v); err != nil {
			return nil, err
		}
		if to != nil {
			return to(v), nil
		}
		return v, nil
	}
}

// scanValuer scans into a pgtype value and returns its driver.Value.
func scanValuer[T any, P interface {
	*T
	sqldriver.Valuer
}](m *pgtype.Map, oid uint32, format int16) func([]byte) (sqldriver.Value, error) {
	var v T
	plan := m.PlanScan(oid, format, &v)
	return func(src []byte) (sqldriver.Value, error) {
		if err := plan.Scan(src, &v); err != nil {
			return nil, err
		}
		return P(&v).Value()
	}
}
