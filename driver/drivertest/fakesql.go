package drivertest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"sync"
	"sync/atomic"
)

// fakeSQL is a database/sql driver that accepts every statement and returns
// no rows. The HTTP rules use it to make a flow perform a real store write
// through Fx.Store without a database.
type fakeSQL struct{ execs atomic.Int64 }

var (
	fakeOnce sync.Once
	fakeDrv  = &fakeSQL{}
)

// fakeDB opens a *sql.DB on the fake driver.
func fakeDB() *sql.DB {
	fakeOnce.Do(func() { sql.Register("oke-drivertest-fake", fakeDrv) })
	db, err := sql.Open("oke-drivertest-fake", "")
	if err != nil {
		panic(err)
	}
	return db
}

func (d *fakeSQL) Open(string) (driver.Conn, error) { return fakeConn{d}, nil }

type fakeConn struct{ d *fakeSQL }

func (c fakeConn) Prepare(q string) (driver.Stmt, error) { return fakeStmt{c.d}, nil }
func (fakeConn) Close() error                            { return nil }
func (fakeConn) Begin() (driver.Tx, error)               { return fakeTx{}, nil }
func (c fakeConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	c.d.execs.Add(1)
	return driver.RowsAffected(1), nil
}

type fakeTx struct{}

func (fakeTx) Commit() error   { return nil }
func (fakeTx) Rollback() error { return nil }

type fakeStmt struct{ d *fakeSQL }

func (fakeStmt) Close() error  { return nil }
func (fakeStmt) NumInput() int { return -1 }
func (s fakeStmt) Exec([]driver.Value) (driver.Result, error) {
	s.d.execs.Add(1)
	return driver.RowsAffected(1), nil
}
func (fakeStmt) Query([]driver.Value) (driver.Rows, error) { return fakeRows{}, nil }

type fakeRows struct{}

func (fakeRows) Columns() []string         { return nil }
func (fakeRows) Close() error              { return nil }
func (fakeRows) Next([]driver.Value) error { return io.EOF }
