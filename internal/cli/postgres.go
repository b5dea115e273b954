package cli

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/driver/postgres"
)

// The pool a command opens on -postgres: a command makes one store call at
// a time, so two connections are plenty, and it gives up on an
// unreachable server soon. Its statements are bounded in the server too:
// a statement that runs longer than pgStatementTimeout, or waits longer
// than pgLockTimeout for a row lock (a row an app holds in its claim's
// transaction), fails with the server's error instead of hanging the
// command. A DSN that sets statement_timeout or lock_timeout itself
// (postgres://…?statement_timeout=120s) keeps its own.
const (
	pgMaxConns         = 2
	pgConnectTimeout   = 5 * time.Second
	pgAppName          = "oke-cli"
	pgStatementTimeout = "30s"
	pgLockTimeout      = "10s"
)

// openPostgres opens the database at dsn with the Postgres driver, its
// tables in schema, on a small pool of its own. With readOnly every
// connection starts its transactions read-only
// (default_transaction_read_only): a command that only reads cannot
// write, whatever it calls. An error never holds the DSN's password.
func openPostgres(ctx context.Context, dsn, schema string, readOnly bool) (*driverSource, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &usageError{redactDSN(fmt.Errorf("-postgres: not a Postgres DSN (want a postgres:// URL or key=value string): %w", err), dsn)}
	}
	cfg.MaxConns, cfg.MinConns = pgMaxConns, 0
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > pgConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = pgConnectTimeout
	}
	for param, def := range map[string]string{"application_name": pgAppName, "statement_timeout": pgStatementTimeout, "lock_timeout": pgLockTimeout} {
		if cfg.ConnConfig.RuntimeParams[param] == "" {
			cfg.ConnConfig.RuntimeParams[param] = def
		}
	}
	if readOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, redactDSN(fmt.Errorf("open the Postgres database: %w", err), dsn)
	}
	d, err := postgres.Open(ctx, "", postgres.WithPool(pool), postgres.WithSchema(schema))
	if err != nil {
		pool.Close()
		return nil, redactDSN(fmt.Errorf("open the Postgres database: %w", err), dsn)
	}
	closeAll := func() error { err := d.Close(); pool.Close(); return err }
	// The driver's tables, or what to do without them.
	var found bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema}.Sanitize()+".oke_idempotency").Scan(&found); err != nil {
		closeAll()
		return nil, redactDSN(fmt.Errorf("open the Postgres database: look for oke's tables in schema %s: %w", schema, err), dsn)
	}
	if !found {
		closeAll()
		return nil, fmt.Errorf("schema %s of that Postgres database has no oke tables: give -schema the schema the app uses (the default is %s), or create them with oke migrate -postgres DSN -schema %s", schema, postgres.DefaultSchema, schema)
	}
	where := "schema " + schema + " of the Postgres database"
	return &driverSource{where: where, kind: "postgres", d: d, j: d, closeFn: closeAll}, nil
}

var (
	kvPassword  = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
	urlPassword = regexp.MustCompile(`(postgres(?:ql)?://[^:/@\s]*:)[^@\s]*@`)
)

// redactDSN returns err with the DSN's password, and any password= or
// user:password@ in its text, replaced by xxxxx; errors.Is and errors.As
// still see err's chain.
func redactDSN(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := kvPassword.ReplaceAllString(msg, "${1}xxxxx")
	out = urlPassword.ReplaceAllString(out, "${1}xxxxx@")
	for _, pw := range dsnPasswords(dsn) {
		if len(pw) > 0 {
			out = strings.ReplaceAll(out, pw, "xxxxx")
		}
	}
	if out == msg {
		return err
	}
	return &redacted{msg: out, err: err}
}

// dsnPasswords returns the password a DSN holds, as written and decoded.
func dsnPasswords(dsn string) []string {
	var out []string
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
		if pw := u.Query().Get("password"); pw != "" {
			out = append(out, pw)
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		out = append(out, strings.Trim(m[2], "'"))
	}
	return out
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
