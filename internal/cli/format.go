package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/okengine/oke/driver"
)

// count writes a count with its noun: "0 rows", "1 row", "2 rows".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// nextPage writes on stderr the command that lists the page after the one
// shown: this command with the flags it was given, the flags in set set
// to their values (an empty value drops the flag). Secrets stay out: a
// -token given on the command line is written as -token "$OKE_ADMIN_TOKEN",
// a DSN without its password (then the line says how to give it).
func (c *call) nextPage(what string, set map[string]string) {
	args := []string{c.name}
	noPassword := false
	c.fs.Visit(func(f *flag.Flag) {
		if _, ok := set[f.Name]; ok {
			return
		}
		switch f.Name {
		case "token":
			args = append(args, "-token", `"$OKE_ADMIN_TOKEN"`)
		case "postgres":
			dsn, had := dsnWithoutPassword(c.st.dsn)
			noPassword = had
			args = append(args, "-postgres", shellQuote(dsn))
		default:
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				if f.Value.String() == "true" {
					args = append(args, "-"+f.Name)
				} else {
					args = append(args, "-"+f.Name+"=false")
				}
				return
			}
			args = append(args, "-"+f.Name, shellQuote(f.Value.String()))
		}
	})
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if set[k] != "" {
			args = append(args, "-"+k, shellQuote(set[k]))
		}
	}
	line := fmt.Sprintf("more %s: %s", what, strings.Join(args, " "))
	if noPassword {
		line += "\n(the DSN's password is left out: set PGPASSWORD, or put it back in the DSN)"
	}
	fmt.Fprintln(c.stderr, line)
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@,+%-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dsnWithoutPassword returns dsn with its password taken out, and whether
// it had one.
func dsnWithoutPassword(dsn string) (string, bool) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "postgres://…", true // unparsable: show nothing of it
		}
		had := false
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User, had = url.User(u.User.Username()), true
			}
		}
		if q := u.Query(); q.Has("password") {
			q.Del("password")
			u.RawQuery, had = q.Encode(), true
		}
		return u.String(), had
	}
	out := strings.TrimSpace(kvPassword.ReplaceAllString(dsn, ""))
	return strings.Join(strings.Fields(out), " "), out != strings.TrimSpace(dsn)
}

// rowCursor writes a row's key as the cursor oke idempotency ls -after
// takes: opaque, one shell word, and stable (rows are listed in key
// order, and a key is unique).
func rowCursor(k driver.Key) string {
	b, _ := json.Marshal([4]string{k.Tenant, k.Principal, k.Flow, k.Key})
	return base64.RawURLEncoding.EncodeToString(b)
}

var errBadCursor = errors.New("-after takes the cursor a listing printed (more rows: … -after CURSOR)")

// parseRowCursor reads a cursor rowCursor wrote.
func parseRowCursor(s string) (driver.Key, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var parts [4]string
	if err != nil || json.Unmarshal(b, &parts) != nil {
		return driver.Key{}, &usageError{fmt.Errorf("%w, got %q", errBadCursor, s)}
	}
	return driver.Key{Tenant: parts[0], Principal: parts[1], Flow: parts[2], Key: parts[3]}, nil
}
