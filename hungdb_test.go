package oke_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
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

type hungConnector struct{ d *hungSQL }

func (c hungConnector) Connect(context.Context) (sqldriver.Conn, error) { return hungConn{c.d}, nil }
func (c hungConnector) Driver() sqldriver.Driver                        { return c.d }

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
	} {
		before := lookups.Load()
		w := do(app, http.MethodPost, tc.path, `{"id":"t1"}`, "Content-Type", "application/json", "Idempotency-Key", tc.key)
		status := http.StatusServiceUnavailable
		if tc.code == "InternalError" {
			status = http.StatusInternalServerError
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
	if n := hung.undeadlined.Load(); n != 0 {
		t.Fatalf("%d of %d statements went to the database with no deadline", n, hung.statements.Load())
	}
}
