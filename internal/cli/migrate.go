package cli

import (
	"context"
	"flag"
	"fmt"
	"github.com/okengine/oke/internal/secretflag"
	"io"
	"os"
	"strings"
	"time"

	"github.com/okengine/oke/driver/postgres"
)

// runMigrate is `oke migrate`: create or update the Postgres driver's tables.
func runMigrate(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := new(string)
	*dsn = os.Getenv("DATABASE_URL")
	secretflag.Var(fs, dsn, "postgres", "the database `DSN` (a postgres:// URL or key=value string; default $DATABASE_URL, never shown: it may hold a password)")
	schema := fs.String("schema", postgres.DefaultSchema, "the `schema` that holds oke's tables")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long (waiting for another migration included)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: %s -postgres DSN [-schema NAME]

Creates oke's tables in a Postgres database, or brings them up to date: it
applies the migrations this oke knows and the schema does not list yet, in
one transaction under an advisory lock. Safe to run twice, and from several
instances at once (the later ones wait, then find nothing to do). Apps can
do the same at start with postgres.Driver.Migrate.

Flags:
`, name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	if *dsn == "" {
		fmt.Fprintf(stderr, "%s: no database: pass -postgres DSN (e.g. postgres://user@127.0.0.1:5432/app) or set DATABASE_URL\n", name)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d, err := postgres.Open(ctx, *dsn, postgres.WithSchema(*schema))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	defer d.Close()
	fmt.Fprintf(stdout, "migrating schema %s …\n", *schema)
	applied, err := d.ApplyMigrations(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nNothing was changed: the migrations run in one transaction.\n", name, err)
		return 1
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "schema %s is up to date\n", *schema)
		return 0
	}
	fmt.Fprintf(stdout, "applied %s to schema %s: %s\n", count(len(applied), "migration", "migrations"), *schema, strings.Join(applied, ", "))
	return 0
}
