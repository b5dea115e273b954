package pgpipe

import (
	sqldriver "database/sql/driver"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// firstRows are the rows of a statement sent with its transaction's BEGIN.
// Each column becomes the same database/sql value pgx's adapter gives for
// it (stdlib.Rows): int64, float64, bool, []byte, time.Time, or the text
// of any other type.
type firstRows struct {
	conn  *pgx.Conn
	br    begun
	rows  pgx.Rows
	names []string
	conv  []func(src []byte) (sqldriver.Value, error)
	// first: the first row was read by QueryContext; more: whether it
	// exists.
	first, more bool
}

func (r *firstRows) Columns() []string {
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
func (r *firstRows) ColumnTypeDatabaseTypeName(i int) string {
	oid := r.rows.FieldDescriptions()[i].DataTypeOID
	if t, ok := r.conn.TypeMap().TypeForOID(oid); ok {
		return strings.ToUpper(t.Name)
	}
	return strconv.FormatUint(uint64(oid), 10)
}

func (r *firstRows) Close() error {
	r.rows.Close()
	err := r.rows.Err()
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *firstRows) Next(dest []sqldriver.Value) error {
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
			return fmt.Errorf("pgpipe: convert column %d: %w", i, err)
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
