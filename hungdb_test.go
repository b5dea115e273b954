package oke_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// hungSQL is a database/sql driver whose every statement hangs until its
// context ends. A statement sent with no deadline fails at once instead
// (counted in undeadlined), so a missing bound fails the test rather than
// hanging it.
type hungSQL struct{ statements, undeadlined atomic.Int64 }

func (d *hungSQL) Open(string) (sqldriver.Conn, error) { return hungConn{d}, nil }

type hungConn struct{ d *hungSQL }

func (hungConn) Prepare(string) (sqldriver.Stmt, error) {
	return nil, errors.New("hungSQL: no Prepare")
}
func (hungConn) Close() error                 { return nil }
func (hungConn) Begin() (sqldriver.Tx, error) { return nil, errors.New("hungSQL: no Begin") }

func (c hungConn) hang(ctx context.Context) error {
	c.d.statements.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		c.d.undeadlined.Add(1)
		return errors.New("hungSQL: a statement with no deadline would hang for as long as the database does")
	}
	<-ctx.Done()
	return ctx.Err()
}

func (c hungConn) ExecContext(ctx context.Context, _ string, _ []sqldriver.NamedValue) (sqldriver.Result, error) {
	return nil, c.hang(ctx)
}

func (c hungConn) QueryContext(ctx context.Context, _ string, _ []sqldriver.NamedValue) (sqldriver.Rows, error) {
	return nil, c.hang(ctx)
}

// downSQL is a database/sql driver whose every statement fails at once as
// a database that cannot be reached does (connection refused).
type downSQL struct{ hungSQL }

func (d *downSQL) Open(string) (sqldriver.Conn, error) { return nil, errDatabaseDown }

var errDatabaseDown = fmt.Errorf("dial tcp 127.0.0.1:5432: connect: connection refused: %w", driver.ErrUnavailable)

type hungConnector struct{ d *hungSQL }

func (c hungConnector) Connect(context.Context) (sqldriver.Conn, error) { return hungConn{c.d}, nil }
func (c hungConnector) Driver() sqldriver.Driver                        { return c.d }

type downConnector struct{ err error }

func (c downConnector) Connect(context.Context) (sqldriver.Conn, error) { return nil, c.err }
func (downConnector) Driver() sqldriver.Driver                          { return &downSQL{} }

// errConnectTimedOut is a connect that timed out, as pgconn reports one.
var errConnectTimedOut = fmt.Errorf("failed to connect: %w: timeout: %w", driver.ErrUnavailable, context.DeadlineExceeded)

// TestHungBusinessDatabaseAnswers503: a flow's own statements through
// fx.Store are bounded by Config.StoreTimeout, so a business database that
// stops answering gives a prompt 503 Unavailable (nothing was changed; the
// key is free for the retry) instead of holding the request; in a durable
// step, the timed-out statement is not retried in process (each attempt
// would wait as long again): the run is retried later, and the request is
// answered after one wait.
func TestHungBusinessDatabaseAnswers503(t *testing.T) {
	hung := &hungSQL{}
	db := sql.OpenDB(hungConnector{hung})
	defer db.Close()
	down := sql.OpenDB(downConnector{errDatabaseDown})
	defer down.Close()
	slow := sql.OpenDB(downConnector{errConnectTimedOut})
	defer slow.Close()
	app := oke.New(oke.Config{Driver: memory.New(), StoreTimeout: 50 * time.Millisecond, Logger: quiet(),
		SweepInterval: -1, PollInterval: -1, RetryDelay: time.Hour})
	type in struct {
		ID string `json:"id"`
	}
	var lookups atomic.Int64
	read := func(ctx context.Context, fx *oke.Fx, id string) (string, error) {
		lookups.Add(1)
		var name string
		err := fx.Store(db).QueryRow(ctx, `SELECT name FROM things WHERE id = $1`, id).Scan(&name)
		return name, err
	}
	write := func(ctx context.Context, fx *oke.Fx, id string) error {
		_, err := fx.Store(db).Exec(ctx, `INSERT INTO things (id) VALUES ($1)`, id)
		return err
	}
	app.Handle(oke.POST("/read"), oke.NewFlow("hung.read", oke.Options{},
		func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[string], error) {
			name, err := read(ctx, fx, in.ID)
			return oke.OK(name), err
		}))
	app.Handle(oke.POST("/write"), oke.NewFlow("hung.write", oke.Options{},
		func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[string], error) {
			return oke.OK(in.ID), write(ctx, fx, in.ID)
		}))
	var downs, slows atomic.Int64
	for _, u := range []struct {
		path string
		db   *sql.DB
		n    *atomic.Int64
	}{{"/down", down, &downs}, {"/slow", slow, &slows}} {
		app.Handle(oke.POST(u.path), oke.NewFlow("hung"+strings.ReplaceAll(u.path, "/", "."), oke.Options{Durable: true},
			func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[string], error) {
				name, err := oke.Step(ctx, "look it up", func(ctx context.Context) (string, error) {
					u.n.Add(1)
					var name string
					err := fx.Store(u.db).QueryRow(ctx, `SELECT name FROM things WHERE id = $1`, in.ID).Scan(&name)
					return name, err
				})
				return oke.OK(name), err
			}))
	}
	app.Handle(oke.POST("/step"), oke.NewFlow("hung.step", oke.Options{Durable: true},
		func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[string], error) {
			name, err := oke.Step(ctx, "look it up", func(ctx context.Context) (string, error) { return read(ctx, fx, in.ID) })
			return oke.OK(name), err
		}))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())

	for _, tc := range []struct {
		path, key, code string
	}{
		{"/read", "read-key-0000000000000001", "Unavailable"},
		{"/read", "read-key-0000000000000001", "Unavailable"}, // the key was released: it runs again
		// A write whose statement timed out may have happened: stored as
		// a failure after an effect (500), as any error after a write.
		{"/write", "write-key-000000000000001", "InternalError"},
		{"/step", "step-key-0000000000000001", "OutcomeUnknown"}, // the run goes on later
		// A database that cannot be reached: the step's attempts in
		// process are used up, and the run goes on later (not failed for
		// good: no stored 500).
		{"/down", "down-key-0000000000000001", "OutcomeUnknown"},
		{"/down", "down-key-0000000000000001", "IdempotencyInProgress"},
		{"/slow", "slow-key-0000000000000001", "OutcomeUnknown"},
	} {
		before := lookups.Load()
		w := do(app, http.MethodPost, tc.path, `{"id":"t1"}`, "Content-Type", "application/json", "Idempotency-Key", tc.key)
		status := http.StatusServiceUnavailable
		switch tc.code {
		case "InternalError":
			status = http.StatusInternalServerError
		case "IdempotencyInProgress":
			status = http.StatusConflict
		}
		if w.Code != status || (status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "") || !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`) {
			t.Errorf("%s %s: %d %s (Retry-After %q), want %d %s (with Retry-After if 503)", tc.path, tc.key, w.Code, w.Body, w.Header().Get("Retry-After"), status, tc.code)
		}
		if tc.path == "/step" {
			if n := lookups.Load() - before; n != 1 {
				t.Errorf("the durable step's timed-out lookup ran %d times in the request, want 1 (no retry in process)", n)
			}
		}
	}
	if n := downs.Load(); n != 3 {
		t.Errorf("the unreachable database's step ran %d times, want 3 (DefaultRetryPolicy's attempts in process)", n)
	}
	if n := slows.Load(); n != 1 {
		t.Errorf("the step whose connect timed out ran %d times in the request, want 1 (each attempt would wait as long)", n)
	}
	if n := hung.undeadlined.Load(); n != 0 {
		t.Fatalf("%d of %d statements went to the database with no deadline", n, hung.statements.Load())
	}
}
