package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// TestPostgresSourceReadOnly: a command that only reads opens -postgres
// read-only — a write through it fails in the database — on a pool of
// pgMaxConns; a command that changes rows can write.
func TestPostgresSourceReadOnly(t *testing.T) {
	pgtest.Need(t, 1+pgMaxConns)
	_, dsn := pgtest.NewDatabase(t, "oke_cli")
	ctx := context.Background()
	m, err := postgres.Open(ctx, pgtest.Charge(t, 1).DSN(pgtest.WithPoolSize(dsn, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	m.Close()
	cli := pgtest.Charge(t, pgMaxConns).DSN(dsn)
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "k"}

	ro, err := openPostgres(ctx, cli, postgres.DefaultSchema, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.close()
	if got := ro.d.(*postgres.Driver).Pool().Config().MaxConns; got != pgMaxConns {
		t.Errorf("the pool holds up to %d connections, want %d", got, pgMaxConns)
	}
	if _, err := ro.sweepBatch(ctx, 10); err == nil || !strings.Contains(err.Error(), "read-only transaction") {
		t.Errorf("sweep on a read-only source: %v, want the database's refusal", err)
	}
	if _, err := ro.d.Claim(ctx, driver.ClaimRequest{Key: key, Fingerprint: "x", Owner: "o", Lease: 1e9, TTL: 1e9}); err == nil {
		t.Error("a claim through a read-only source was written")
	}
	if _, _, err := ro.listRows(ctx, driver.Key{}, 10); err != nil {
		t.Errorf("a read on a read-only source: %v", err)
	}
	// The server bounds the command's statements and lock waits.
	for param, want := range map[string]string{"statement_timeout": pgStatementTimeout, "lock_timeout": pgLockTimeout} {
		var got string
		if err := ro.d.(*postgres.Driver).Pool().QueryRow(ctx, "SELECT current_setting($1)", param).Scan(&got); err != nil || got != want {
			t.Errorf("%s on the command's connections: %q, %v; want %q", param, got, err, want)
		}
	}
	// A DSN's own statement_timeout wins, and the server enforces it.
	short, err := openPostgres(ctx, cli+"&statement_timeout=100ms", postgres.DefaultSchema, true)
	if err != nil {
		t.Fatal(err)
	}
	defer short.close()
	if _, err := short.d.(*postgres.Driver).Pool().Exec(ctx, "SELECT pg_sleep(5)"); err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Errorf("a statement longer than the DSN's statement_timeout: %v, want the server's statement timeout", err)
	}

	rw, err := openPostgres(ctx, cli, postgres.DefaultSchema, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.close()
	if _, err := rw.d.Claim(ctx, driver.ClaimRequest{Key: key, Fingerprint: "x", Owner: "o", Lease: 1e9, TTL: 1e9}); err != nil {
		t.Errorf("a claim through a read-write source: %v", err)
	}
	if err := rw.deleteRow(ctx, key, false); !errors.Is(err, admin.ErrRowInProgress) {
		t.Errorf("delete of a row in flight: %v, want the admin rule's refusal", err)
	}
}

func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, msg string }{
		{"postgres://u:pw-1234@h/db", "connect postgres://u:pw-1234@h/db: refused"},
		{"postgres://u:p%40ss-1234@h/db", "connect to u:p%40ss-1234 and p@ss-1234"},
		{"host=h user=u password=pw-1234 dbname=d", "cannot parse `host=h user=u password=pw-1234 dbname=d`"},
		{"host=h password='p w-1234'", "cannot parse `host=h password='p w-1234'`"},
		{"postgres://u@h/db?password=pw-1234", "bad pw-1234"},
	} {
		got := redactDSN(errors.New(tc.msg), tc.dsn).Error()
		for _, pw := range []string{"pw-1234", "p@ss-1234", "p%40ss-1234", "p w-1234"} {
			if strings.Contains(got, pw) {
				t.Errorf("redactDSN(%q) = %q: holds the password", tc.msg, got)
			}
		}
	}
	base := errors.New("inner")
	if err := redactDSN(base, "postgres://u:secret@h/db"); err != base {
		t.Errorf("an error without the password is changed: %v", err)
	}
}

func TestDSNWithoutPassword(t *testing.T) {
	for _, tc := range []struct {
		dsn, want string
		had       bool
	}{
		{"postgres://u:pw@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?sslmode=disable", true},
		{"postgres://u@h/db?password=pw&sslmode=disable", "postgres://u@h/db?sslmode=disable", true},
		{"postgres://u@h/db", "postgres://u@h/db", false},
		{"host=h user=u password=pw dbname=d", "host=h user=u dbname=d", true},
		{"host=h dbname=d", "host=h dbname=d", false},
	} {
		got, had := dsnWithoutPassword(tc.dsn)
		if got != tc.want || had != tc.had {
			t.Errorf("dsnWithoutPassword(%q) = %q, %v; want %q, %v", tc.dsn, got, had, tc.want, tc.had)
		}
	}
}

func TestRowCursor(t *testing.T) {
	for _, k := range []driver.Key{{}, {Tenant: "t", Principal: "user:1", Flow: "a.b", Key: "k 1/é"}, {Key: `"'`}} {
		c := rowCursor(k)
		if shellQuote(c) != c {
			t.Errorf("cursor %q of %+v needs quoting", c, k)
		}
		got, err := parseRowCursor(c)
		if err != nil || got != k {
			t.Errorf("parseRowCursor(rowCursor(%+v)) = %+v, %v", k, got, err)
		}
	}
	if _, err := parseRowCursor("not a cursor"); !errors.Is(err, errBadCursor) {
		t.Errorf("a bad cursor: %v", err)
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 rows"}, {1, "1 row"}, {2, "2 rows"}} {
		if got := count(tc.n, "row", "rows"); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		n    int
		want string
	}{{1, "step 1 reused"}, {2, "steps 1–2 reused"}} {
		if got := reused(tc.n); got != tc.want {
			t.Errorf("reused(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
