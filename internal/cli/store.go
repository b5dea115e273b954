package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/secretflag"
)

// storeSynopsis is how a command's usage line names where it reads.
const storeSynopsis = "[-addr URL | -data DIR | -postgres DSN [-schema NAME]]"

// store holds the flags that name where a runs or idempotency command reads
// and writes: a running app's admin API (-addr, with -token), a data folder
// (-data) or a Postgres database (-postgres, with -schema). storeFlags
// registers them; open returns the source they name.
type store struct {
	addr, token string
	data        string
	dsn, schema string
}

// storeFlags registers -addr, -token, -data, -postgres and -schema on fs
// and returns the store they fill in once fs is parsed.
func storeFlags(fs *flag.FlagSet) *store {
	s := &store{token: os.Getenv("OKE_ADMIN_TOKEN")}
	fs.StringVar(&s.addr, "addr", "", "ask the running app at this `URL` (its admin API, at "+AdminPath+"/ unless the URL has a path); the default is "+DefaultAddr)
	secretflag.Var(fs, &s.token, "token", "the app's admin `token`, sent as Authorization: Bearer (default $OKE_ADMIN_TOKEN; the demo writes the one it draws to admin-token in its -data folder)")
	fs.StringVar(&s.data, "data", "", "open this data folder (`DIR`) with the file driver instead; only while no app holds it")
	secretflag.Var(fs, &s.dsn, "postgres", "open this Postgres database (`DSN`: a postgres:// URL or key=value string; never shown, it may hold a password) with the Postgres driver instead; read-only for a command that only reads")
	fs.StringVar(&s.schema, "schema", postgres.DefaultSchema, "with -postgres: the schema (`NAME`) that holds oke's tables")
	return s
}

// open returns the source the flags name. A data folder or a database is
// opened read-only for a command that only reads (readOnly): it creates,
// truncates or writes nothing there.
func (s *store) open(ctx context.Context, readOnly bool) (source, error) {
	var given []string
	for _, f := range []struct{ name, v string }{{"-addr", s.addr}, {"-data", s.data}, {"-postgres", s.dsn}} {
		if f.v != "" {
			given = append(given, f.name)
		}
	}
	if len(given) > 1 {
		return nil, &usageError{fmt.Errorf("give one of -addr, -data and -postgres, not several (got %s)", strings.Join(given, " and "))}
	}
	if s.schema != postgres.DefaultSchema && s.dsn == "" {
		return nil, &usageError{errors.New("-schema names the schema of a -postgres database; give -postgres DSN too")}
	}
	switch {
	case s.data != "":
		return openData(s.data, readOnly)
	case s.dsn != "":
		return openPostgres(ctx, s.dsn, s.schema, readOnly)
	}
	addr := s.addr
	if addr == "" {
		addr = DefaultAddr
	}
	return newHTTPSource(addr, s.token)
}

// redact removes the DSN's password from a message.
func (s *store) redact(err error) error {
	if s.dsn == "" || err == nil {
		return err
	}
	return redactDSN(err, s.dsn)
}

// call is one run of a store command: its name, output, flags' store and
// positional arguments, and the source once open.
type call struct {
	name           string
	stdout, stderr io.Writer
	st             *store
	fs             *flag.FlagSet
	writes         bool
	pos            []string
	src            source
}

// open opens the command's store (read-only unless the command writes),
// once; the command table closes it when the command returns.
func (c *call) open(ctx context.Context) (source, error) {
	if c.src != nil {
		return c.src, nil
	}
	src, err := c.st.open(ctx, !c.writes)
	if err != nil {
		return nil, err
	}
	c.src = src
	return src, nil
}

// fail reports err (without the DSN's password) and returns the exit
// code: 2 for a usage mistake, else 1.
func (c *call) fail(err error) int { return fail(c.stderr, c.name, c.st.redact(err)) }

// storeCmd is one subcommand of oke runs or oke idempotency.
type storeCmd struct {
	name    string
	aliases []string
	// synopsis is what follows the store flags in the usage line; about
	// is the -h text.
	synopsis, about string
	args            int  // how many positional arguments it wants
	writes          bool // it changes rows: the store is opened read-write
	// flags registers the command's own flags on fs and returns what it
	// does once they are parsed.
	flags func(fs *flag.FlagSet) func(ctx context.Context, c *call) int
}

// usageLine is the command's line in its group's usage.
func (sc storeCmd) usageLine(group string, width int) string {
	return fmt.Sprintf("  %s %-*s %s %s", group, width, sc.name, storeSynopsis, sc.synopsis)
}

// runStoreCmd parses args for sc and runs it: the one place where a store
// command's flags are registered, its arguments counted, its store opened
// and closed.
func runStoreCmd(ctx context.Context, sc storeCmd, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	st := storeFlags(fs)
	do := sc.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s %s\n\n%s\n\n%s\nFlags:\n", name, storeSynopsis, sc.synopsis, sc.about, whereHelp)
		fs.PrintDefaults()
	}
	pos, code, ok := parse(fs, args, sc.args, stderr)
	if !ok {
		return code
	}
	c := &call{name: name, stdout: stdout, stderr: stderr, st: st, fs: fs, writes: sc.writes, pos: pos}
	defer func() {
		if c.src != nil {
			c.src.close()
		}
	}()
	return do(ctx, c)
}

// runGroup runs `oke runs` or `oke idempotency`: the subcommand args[0]
// names, from cmds.
func runGroup(ctx context.Context, name string, cmds []storeCmd, usage func(io.Writer), args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stderr)
		return 0
	}
	var names []string
	for _, sc := range cmds {
		names = append(names, sc.name)
		if sc.name == args[0] || contains(sc.aliases, args[0]) {
			return runStoreCmd(ctx, sc, name+" "+sc.name, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q (want %s or %s)\n", name, args[0], strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
	return 2
}

// synopses lists a group's usage lines.
func synopses(group string, cmds []storeCmd) string {
	width := 0
	for _, sc := range cmds {
		width = max(width, len(sc.name))
	}
	var b strings.Builder
	for _, sc := range cmds {
		b.WriteString(sc.usageLine(group, width) + "\n")
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
