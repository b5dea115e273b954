package flowtx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/flowtx"
)

// sqlState is an error with a SQLSTATE, as pgx's and lib/pq's are.
type sqlState string

func (s sqlState) Error() string    { return "server error " + string(s) }
func (s sqlState) SQLState() string { return string(s) }

// NotCommitted says a COMMIT's error proves nothing committed only when
// the database answered it with a refusal; an error that may have come
// after the commit, or instead of its answer, may have committed.
func TestNotCommitted(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{driver.ErrNotCommitted, true},
		{fmt.Errorf("commit: %w", driver.ErrNotCommitted), true},
		{sqlState("23503"), true},  // a deferred foreign key
		{sqlState("40001"), true},  // a serialization failure
		{sqlState("53100"), true},  // disk full
		{sqlState("25P03"), true},  // ended idle in its transaction
		{sqlState("08006"), false}, // the connection failed
		{sqlState("57P01"), false}, // shut down, perhaps after a commit that waited for a standby
		{sqlState("57014"), false}, // canceled
		{sqlState("XX000"), false},
		{errors.New("commit unexpectedly resulted in rollback"), true}, // pgx: the transaction had failed
		{errors.New("unexpected EOF"), false},
		{context.DeadlineExceeded, false},
		{driver.ErrUnavailable, false},
	} {
		if got := flowtx.NotCommitted(c.err); got != c.want {
			t.Errorf("NotCommitted(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// SQLite's own "database or disk is full" (SQLITE_FULL, here from a page
// limit) and a deferred constraint's COMMIT are errors NotCommitted knows
// for modernc.org/sqlite's; an error of a type that is not SQLite's with
// a Code method is not taken for one.
func TestNotCommittedKnowsSQLite(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE p (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE c (p INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED, pad TEXT)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO c (p) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit()
	if err == nil || !flowtx.NotCommitted(err) {
		t.Errorf("a deferred foreign key's COMMIT: %v; NotCommitted %v, want an error it knows", err, flowtx.NotCommitted(err))
	}
	// End what the failed COMMIT may have left open on the connection
	// (SQLite may keep the transaction; this driver's rolled it back).
	db.Exec(`ROLLBACK`)

	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO c (p, pad) VALUES (NULL, ?)`, strings.Repeat("x", 1<<16))
	if err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("no SQLITE_FULL past the page limit: %v", err)
	}
	if !flowtx.NotCommitted(err) {
		t.Errorf("NotCommitted(%v) = false, want true (SQLITE_FULL)", err)
	}

	if flowtx.NotCommitted(codeError(13)) {
		t.Errorf("an error with Code() 13 that is not SQLite's was taken for SQLITE_FULL")
	}
}

type codeError int

func (c codeError) Error() string { return "code" }
func (c codeError) Code() int     { return int(c) }
