package oke_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver/memory"
)

// rowSQL is a database/sql driver whose every query answers one row ("x")
// at once, and which keeps the context each statement was sent on.
type rowSQL struct {
	mu   sync.Mutex
	ctxs []context.Context
}

func (d *rowSQL) Connect(context.Context) (sqldriver.Conn, error) { return rowConn{d}, nil }
func (d *rowSQL) Driver() sqldriver.Driver                        { return nil }

func (d *rowSQL) sent(ctx context.Context) {
	d.mu.Lock()
	d.ctxs = append(d.ctxs, ctx)
	d.mu.Unlock()
}

type rowConn struct{ d *rowSQL }

func (rowConn) Prepare(string) (sqldriver.Stmt, error) { return nil, errors.New("rowSQL: no Prepare") }
func (rowConn) Close() error                           { return nil }
func (rowConn) Begin() (sqldriver.Tx, error)           { return nil, errors.New("rowSQL: no Begin") }

func (c rowConn) ExecContext(ctx context.Context, _ string, _ []sqldriver.NamedValue) (sqldriver.Result, error) {
	c.d.sent(ctx)
	return sqldriver.RowsAffected(1), nil
}

func (c rowConn) QueryContext(ctx context.Context, _ string, _ []sqldriver.NamedValue) (sqldriver.Rows, error) {
	c.d.sent(ctx)
	return &oneRow{}, nil
}

type oneRow struct{ done bool }

func (*oneRow) Columns() []string { return []string{"name"} }
func (*oneRow) Close() error      { return nil }
func (r *oneRow) Next(dest []sqldriver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = "x"
	return nil
}

// TestStatementDeadlinesEndWithTheFlow: the deadline Config.StoreTimeout
// puts on a flow's own statements (fx.Store) ends when the statement does
// (no rows) or when the flow's function returns (rows, which it reads
// before), not StoreTimeout later: a bound left to its timer would keep
// its context and timer alive that long after the request, megabytes of
// heap at a few thousand requests a second.
func TestStatementDeadlinesEndWithTheFlow(t *testing.T) {
	rows := &rowSQL{}
	db := sql.OpenDB(rows)
	defer db.Close()
	app := oke.New(oke.Config{Driver: memory.New(), StoreTimeout: time.Hour, Logger: quiet(),
		SweepInterval: -1, PollInterval: -1})
	defer app.Close(context.Background())
	app.Handle(oke.POST("/things"), oke.NewFlow("release.things", oke.Options{},
		func(ctx context.Context, _ struct{}, fx *oke.Fx) (oke.Response[string], error) {
			var name string
			if err := fx.Store(db).QueryRow(ctx, `SELECT name FROM things`).Scan(&name); err != nil {
				return oke.Response[string]{}, err
			}
			rs, err := fx.Store(db).Query(ctx, `SELECT name FROM things`)
			if err != nil {
				return oke.Response[string]{}, err
			}
			rs.Close()
			if _, err := fx.Store(db).Exec(ctx, `INSERT INTO things (name) VALUES ('y')`); err != nil {
				return oke.Response[string]{}, err
			}
			return oke.OK(name), nil
		}))
	r := httptest.NewRequest(http.MethodPost, "/things", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", "release-key-000001")
	w := httptest.NewRecorder()
	app.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	rows.mu.Lock()
	defer rows.mu.Unlock()
	if len(rows.ctxs) != 3 {
		t.Fatalf("%d statements, want 3", len(rows.ctxs))
	}
	for i, ctx := range rows.ctxs {
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("statement %d had no deadline", i)
		}
		if ctx.Err() == nil {
			t.Errorf("statement %d: its deadline is still running after the request", i)
		}
	}
}
