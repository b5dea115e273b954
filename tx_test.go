package oke_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver/file"
)

// txApp is an app on the memory driver with a SQLite Config.DB, whose POST
// /notes writes a note through the flow's transaction and then returns
// what fail says.
func txApp(t *testing.T, db *sql.DB, fail func(attempt int) error) *oke.App {
	t.Helper()
	app := oke.New(oke.Config{DB: db, SweepInterval: -1, PollInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	attempt := 0
	app.Handle(oke.POST("/notes"), oke.NewFlow("notes.add", oke.Options{},
		func(ctx context.Context, in struct {
			Text string `json:"text"`
		}, fx *oke.Fx) (oke.Response[string], error) {
			attempt++
			tx, err := fx.Tx(ctx)
			if err != nil {
				return oke.Response[string]{}, err
			}
			// A second call in the same flow is the same transaction.
			if again, err := fx.Tx(ctx); err != nil {
				return oke.Response[string]{}, err
			} else if _, err := again.Exec(ctx, `SELECT 1`); err != nil {
				return oke.Response[string]{}, err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO notes (text) VALUES (?)`, in.Text); err != nil {
				return oke.Response[string]{}, err
			}
			if fail != nil {
				if err := fail(attempt); err != nil {
					return oke.Response[string]{}, err
				}
			}
			return oke.Created(in.Text, ""), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	return app
}

func sqliteDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func postNote(app http.Handler, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/notes", strings.NewReader(`{"text":"hi"}`))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	app.ServeHTTP(w, r)
	return w
}

func countNotes(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM notes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFxTxCommitsWhenTheFlowSucceeds(t *testing.T) {
	for _, key := range []string{"", "note-key-0000-commit"} {
		db := sqliteDB(t)
		app := txApp(t, db, nil)
		if w := postNote(app, key); w.Code != http.StatusCreated {
			t.Fatalf("key %q: %d %s", key, w.Code, w.Body)
		}
		if n := countNotes(t, db); n != 1 {
			t.Fatalf("key %q: notes = %d, want 1", key, n)
		}
	}
}

func TestFxTxRollsBackWhenTheFlowFails(t *testing.T) {
	tests := []struct {
		name      string
		fail      error
		firstCode int
		retryLive bool // the key was released: the retry runs the flow
	}{
		{"declared failure is stored", oke.Fail(http.StatusConflict, "Taken", "The name is taken."), http.StatusConflict, false},
		{"plain error with only rolled-back writes releases the key", errors.New("boom"), http.StatusInternalServerError, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := sqliteDB(t)
			app := txApp(t, db, func(attempt int) error {
				if attempt == 1 {
					return tt.fail
				}
				return nil
			})
			if w := postNote(app, "note-key-0000-fail"); w.Code != tt.firstCode {
				t.Fatalf("first: %d %s, want %d", w.Code, w.Body, tt.firstCode)
			}
			if n := countNotes(t, db); n != 0 {
				t.Fatalf("notes = %d after a failure, want 0 (rolled back)", n)
			}
			w := postNote(app, "note-key-0000-fail")
			if live := w.Header().Get("Idempotent-Replayed") == ""; live != tt.retryLive {
				t.Fatalf("retry: %d replayed=%q, want live=%v", w.Code, w.Header().Get("Idempotent-Replayed"), tt.retryLive)
			}
		})
	}
}

func TestFxTxWithoutADatabaseSaysWhatToDo(t *testing.T) {
	app := oke.New(oke.Config{SweepInterval: -1, PollInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	var got error
	app.Handle(oke.POST("/x"), oke.NewFlow("x.tx", oke.Options{},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
			_, got = fx.Tx(ctx) //oke:ignore this test checks that Fx.Tx outside a step is refused
			return oke.OK(1), nil
		}))
	app.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", strings.NewReader(`{}`)))
	if !errors.Is(got, oke.ErrNoDatabase) || !strings.Contains(got.Error(), "x.tx") {
		t.Fatalf("Fx.Tx without a database: %v, want oke.ErrNoDatabase naming the flow", got)
	}
}

func TestFxTxOutsideAStepOfADurableFlowIsRefused(t *testing.T) {
	db := sqliteDB(t)
	app := oke.New(oke.Config{DB: db, SweepInterval: -1, PollInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	var got error
	app.Handle(oke.POST("/d"), oke.NewFlow("d.tx", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
			_, got = fx.Tx(ctx) //oke:ignore this test checks that Fx.Tx outside a step is refused
			return oke.OK(1), nil
		}))
	app.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/d", strings.NewReader(`{}`)))
	if got == nil || !strings.Contains(got.Error(), "inside oke.Step") {
		t.Fatalf("Fx.Tx outside a step of a durable flow: %v, want an error pointing at oke.Step", got)
	}
}

// On a driver that keeps no SQL (memory), a step's transaction on Config.DB
// commits when the step succeeds — just before its result is saved — and
// rolls back when it fails: the failed attempt leaves nothing behind. (The
// step retries no plain error here, so that the failure reaches the run.)
func TestFxTxInsideAStepCommitsWithTheStep(t *testing.T) {
	db := sqliteDB(t)
	app := oke.New(oke.Config{DB: db, SweepInterval: -1, PollInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	attempt := 0
	app.Handle(oke.POST("/d"), oke.NewFlow("d.steptx", oke.Options{Durable: true, Retry: &oke.NoRetry},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
			_, err := oke.Step(ctx, "note", func(ctx context.Context) (int, error) {
				attempt++
				tx, err := fx.Tx(ctx)
				if err != nil {
					return 0, err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO notes (text) VALUES ('x')`); err != nil {
					return 0, err
				}
				if attempt == 1 {
					return 0, errors.New("the provider timed out")
				}
				return attempt, nil
			})
			if err != nil {
				return oke.Response[int]{}, err
			}
			return oke.OK(attempt), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	post := func() int {
		w := httptest.NewRecorder()
		app.ServeHTTP(w, httptest.NewRequest("POST", "/d", strings.NewReader(`{}`)))
		return w.Code
	}
	if code := post(); code != http.StatusInternalServerError {
		t.Fatalf("first: %d, want 500", code)
	}
	if n := countNotes(t, db); n != 0 {
		t.Fatalf("notes = %d after the step failed, want 0", n)
	}
	if code := post(); code != http.StatusOK {
		t.Fatalf("second run: %d, want 200", code)
	}
	if n := countNotes(t, db); n != 1 {
		t.Fatalf("notes = %d, want 1", n)
	}
}

// A flow's transaction whose COMMIT fails with an error that proves it did
// not commit changed nothing, so its key is free to run again (issue 21;
// spec 004 "Failures": a failure before any effect deletes the row): the
// demo's setup — the file driver, a SQLite Config.DB — where a deferred
// foreign key fails the COMMIT, as a full disk does. The request answers
// 503 Unavailable, stored nowhere; the retry with the same key runs and
// succeeds once the reference exists; one note is written.
func TestFxTxCommitThatDidNotCommitFreesTheKey(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE books (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL,
			book INTEGER NOT NULL REFERENCES books (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	d, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	app := oke.New(oke.Config{Driver: d, DB: db, SweepInterval: -1, PollInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	runs := 0
	app.Handle(oke.POST("/notes"), oke.NewFlow("notes.add", oke.Options{},
		func(ctx context.Context, in struct {
			Text string `json:"text"`
		}, fx *oke.Fx) (oke.Response[string], error) {
			runs++
			tx, err := fx.Tx(ctx)
			if err != nil {
				return oke.Response[string]{}, err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO notes (text, book) VALUES (?, 1)`, in.Text); err != nil {
				return oke.Response[string]{}, err
			}
			return oke.Created(in.Text, ""), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	const key = "commit-failed-key-000001"
	first := postNote(app, key)
	if first.Code != http.StatusServiceUnavailable || !strings.Contains(first.Body.String(), `"Unavailable"`) {
		t.Fatalf("a COMMIT that failed: %d %s, want 503 Unavailable", first.Code, first.Body)
	}
	if n := countNotes(t, db); n != 0 {
		t.Fatalf("%d notes after the failed COMMIT, want 0", n)
	}
	// Without a key it is the same 503: nothing was changed.
	if w := postNote(app, ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"Unavailable"`) {
		t.Errorf("a COMMIT that failed, without a key: %d %s, want 503 Unavailable", w.Code, w.Body)
	}
	if _, err := db.Exec(`INSERT INTO books (id) VALUES (1)`); err != nil {
		t.Fatal(err) // the connection is free: the failed transaction is not left open on it
	}
	second := postNote(app, key)
	if second.Code != http.StatusCreated || second.Header().Get("Idempotent-Replayed") == "true" {
		t.Fatalf("the retry with the same key: %d (replayed %q) %s, want 201 live", second.Code, second.Header().Get("Idempotent-Replayed"), second.Body)
	}
	if third := postNote(app, key); third.Code != http.StatusCreated || third.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("a later retry: %d %s, want the 201 replayed", third.Code, third.Body)
	}
	if n := countNotes(t, db); n != 1 || runs != 3 {
		t.Errorf("%d notes, %d runs; want 1 note, 3 runs", n, runs)
	}
}
