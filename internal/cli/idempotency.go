package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
)

func idempotencyUsage(w io.Writer) {
	io.WriteString(w, `Usage:

  oke idempotency ls     [-addr URL | -data DIR] [-limit N] [-json]
  oke idempotency show   [-addr URL | -data DIR] [-tenant T] [-principal P] [-flow F] [-reveal] [-json] KEY
  oke idempotency delete [-addr URL | -data DIR] [-tenant T] [-principal P] [-flow F] [-all] [-force] [-json] KEY
  oke idempotency sweep  [-addr URL | -data DIR] [-batch N] [-json]

Shows and manages the Idempotency-Key rows: one per key in its scope
(tenant, principal, flow), holding the stored response its retries replay.

  ls      the rows in key order: scope, key, state (running, completed, or
          expired: past its TTL, not yet swept), stored status, run, expiry
  show    the rows of one key, in every scope unless -tenant, -principal
          or -flow narrow it: state, lease and TTL left (on this machine's
          clock), the stored status; a stored body only with -reveal (it may
          hold personal data), and then of one row (narrow to one scope)
  delete  deletes the row of a key, so the next request with it runs as
          new. When the key has rows in several scopes, narrow to one with
          -tenant, -principal and -flow, or pass -all to delete them all.
          A row still in flight (running, its holder's lease not over) is
          refused: deleting it would let a second execution start beside
          the first. -force deletes it anyway (the holder can no longer
          store its response, but keeps running): only for a holder you
          know is gone or stuck
  sweep   deletes every expired row, in batches (-batch rows each, one
          store call per batch, so the store is never held for longer),
          with a progress line on a terminal; prints how many

`+whereHelp)
}

// runIdempotency is `oke idempotency`.
func runIdempotency(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		idempotencyUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		idempotencyUsage(stderr)
		return 0
	case "ls", "list":
		return idempotencyLs(ctx, name+" ls", args[1:], stdout, stderr)
	case "show":
		return idempotencyShow(ctx, name+" show", args[1:], stdout, stderr)
	case "delete", "rm":
		return idempotencyDelete(ctx, name+" delete", args[1:], stdout, stderr)
	case "sweep":
		return idempotencySweep(ctx, name+" sweep", args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s: unknown command %q (want ls, show, delete or sweep)\n", name, args[0])
	return 2
}

func idempotencyLs(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	var (
		t     target
		limit int
		js    bool
	)
	fs := newFlags(name, "[-addr URL | -data DIR] [-limit N] [-json]", "Lists the Idempotency-Key rows in key order, stored bodies hidden (see show -reveal).", stderr, &t)
	fs.IntVar(&limit, "limit", 100, "list at most `N` rows (1–1000)")
	fs.BoolVar(&js, "json", false, "print the rows as JSON")
	if _, code, ok := parse(fs, args, 0, stderr); !ok {
		return code
	}
	if limit < 1 || limit > 1000 {
		return fail(stderr, name, &usageError{fmt.Errorf("-limit must be between 1 and 1000, got %d", limit)})
	}
	src, err := t.open(true)
	if err != nil {
		return fail(stderr, name, err)
	}
	defer src.close()
	rows, err := src.listRows(ctx, limit)
	if err != nil {
		return fail(stderr, name, err)
	}
	if js {
		if rows == nil {
			rows = []admin.RowView{}
		}
		return printJSON(stdout, stderr, name, map[string]any{"rows": rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no rows")
		return 0
	}
	printRows(stdout, rows)
	return 0
}

// printRows writes rows as a table.
func printRows(w io.Writer, rows []admin.RowView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tPRINCIPAL\tFLOW\tKEY\tSTATE\tSTATUS\tRUN\tEXPIRES")
	for _, r := range rows {
		status := "-"
		if r.Response != nil {
			status = fmt.Sprint(r.Response.Status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(r.Tenant), orDash(r.Principal), r.Flow, r.Key, rowState(r), status, orDash(r.RunID), stamp(r.ExpiresAt))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// rowState is a row's state for people: expired rows not yet swept say so.
func rowState(r admin.RowView) string {
	if r.Expired {
		return "expired"
	}
	return r.State
}

// scopeFlags registers -tenant, -principal and -flow into k.
func scopeFlags(fs interface {
	StringVar(p *string, name, value, usage string)
}, k *driver.Key) {
	fs.StringVar(&k.Tenant, "tenant", "", "only the row of this `tenant`")
	fs.StringVar(&k.Principal, "principal", "", "only the row of this `principal` (user:<id>, apikey:<id>, anon)")
	fs.StringVar(&k.Flow, "flow", "", "only the row of this `flow`")
}

func idempotencyShow(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	var (
		t      target
		k      driver.Key
		reveal bool
		js     bool
	)
	fs := newFlags(name, "[-addr URL | -data DIR] [-tenant T] [-principal P] [-flow F] [-reveal] [-json] KEY",
		"Shows the rows of one Idempotency-Key, in every scope unless -tenant, -principal or -flow narrow it.", stderr, &t)
	scopeFlags(fs, &k)
	fs.BoolVar(&reveal, "reveal", false, "show the stored body (it may hold personal data); needs one row: narrow the scope")
	fs.BoolVar(&js, "json", false, "print the rows as JSON")
	pos, code, ok := parse(fs, args, 1, stderr)
	if !ok {
		return code
	}
	k.Key = pos[0]
	src, err := t.open(true)
	if err != nil {
		return fail(stderr, name, err)
	}
	defer src.close()
	rows, err := src.findRows(ctx, k)
	if err != nil {
		return fail(stderr, name, err)
	}
	if len(rows) == 0 {
		return fail(stderr, name, fmt.Errorf("%w: no row has the key %q%s (oke idempotency ls lists them all)", errNoRow, k.Key, scopeText(k)))
	}
	if reveal {
		if len(rows) > 1 {
			return fail(stderr, name, &usageError{fmt.Errorf("-reveal shows one row's body, and the key %q has %d rows: narrow it with -tenant, -principal and -flow (%s)", k.Key, len(rows), scopes(rows))})
		}
		r := rows[0]
		row, err := src.getRow(ctx, driver.Key{Tenant: r.Tenant, Principal: r.Principal, Flow: r.Flow, Key: r.Key}, true)
		if err != nil {
			return fail(stderr, name, err)
		}
		rows[0] = row
	}
	if js {
		return printJSON(stdout, stderr, name, map[string]any{"rows": rows})
	}
	for i, r := range rows {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printRow(stdout, r)
	}
	return 0
}

// printRow writes one row for people.
func printRow(w io.Writer, r admin.RowView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	line("key", r.Key)
	line("scope", fmt.Sprintf("tenant %q, principal %q, flow %s", r.Tenant, r.Principal, r.Flow))
	state := rowState(r)
	if r.Expired {
		state += " (past its TTL, not yet swept: the next request with the key runs as new)"
	}
	line("state", state)
	if r.LeaseLeftMs != nil {
		line("lease left", left(*r.LeaseLeftMs))
	}
	line("TTL left", left(r.TTLLeftMs)+" (expires "+stamp(r.ExpiresAt)+")")
	line("created", stamp(r.CreatedAt))
	if r.RunID != "" {
		line("run", r.RunID+" (oke runs show "+r.RunID+")")
	}
	if res := r.Response; res != nil {
		head := fmt.Sprint(res.Status)
		if res.ContentType != "" {
			head += ", " + res.ContentType
		}
		if res.Location != "" {
			head += ", Location " + res.Location
		}
		line("stored", head)
		switch {
		case r.BodyHidden:
			line("body", fmt.Sprintf("hidden (%d bytes; show it with -reveal)", r.BodyBytes))
		case res.Body != nil:
			line("body", compact(res.Body, 0))
		}
	}
	tw.Flush()
}

// left writes a time left.
func left(ms int64) string {
	if ms <= 0 {
		return "none"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func scopeText(k driver.Key) string {
	var parts []string
	for _, p := range []struct{ name, v string }{{"tenant", k.Tenant}, {"principal", k.Principal}, {"flow", k.Flow}} {
		if p.v != "" {
			parts = append(parts, fmt.Sprintf("%s %q", p.name, p.v))
		}
	}
	if len(parts) == 0 {
		return " in any scope"
	}
	return " with " + strings.Join(parts, ", ")
}

// scopes lists rows' scopes as the flags that name each.
func scopes(rows []admin.RowView) string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("-tenant %q -principal %q -flow %s", r.Tenant, r.Principal, r.Flow))
	}
	return strings.Join(out, "; ")
}

func idempotencyDelete(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	var (
		t     target
		k     driver.Key
		all   bool
		force bool
		js    bool
	)
	fs := newFlags(name, "[-addr URL | -data DIR] [-tenant T] [-principal P] [-flow F] [-all] [-force] [-json] KEY",
		"Deletes the row of an Idempotency-Key: the next request with the key runs as new. A row still in flight (running, its lease not over) is refused unless -force.", stderr, &t)
	scopeFlags(fs, &k)
	fs.BoolVar(&all, "all", false, "delete the key's rows in every scope that matches, not only one")
	fs.BoolVar(&force, "force", false, "delete a row even while a request still holds it (its holder is fenced out but keeps running, and the next request with the key runs beside it): only for a holder you know is gone or stuck")
	fs.BoolVar(&js, "json", false, "print the deleted rows' scopes as JSON")
	pos, code, ok := parse(fs, args, 1, stderr)
	if !ok {
		return code
	}
	k.Key = pos[0]
	src, err := t.open(false)
	if err != nil {
		return fail(stderr, name, err)
	}
	defer src.close()
	rows, err := src.findRows(ctx, k)
	if err != nil {
		return fail(stderr, name, err)
	}
	switch {
	case len(rows) == 0:
		return fail(stderr, name, fmt.Errorf("%w: no row has the key %q%s (oke idempotency ls lists them all)", errNoRow, k.Key, scopeText(k)))
	case len(rows) > 1 && !all:
		return fail(stderr, name, &usageError{fmt.Errorf("the key %q has %d rows: narrow it to one with -tenant, -principal and -flow (%s), or pass -all to delete them all", k.Key, len(rows), scopes(rows))})
	}
	deleted := []admin.RowView{}
	refused := 0
	for _, r := range rows {
		err := src.deleteRow(ctx, driver.Key{Tenant: r.Tenant, Principal: r.Principal, Flow: r.Flow, Key: r.Key}, force)
		switch {
		case errors.Is(err, admin.ErrRowInProgress):
			// Refused: say so and go on with the other rows.
			refused++
			fmt.Fprintf(stderr, "%s: not deleted: %v (pass -force to delete it anyway)\n", name, err)
			continue
		case err != nil && !errors.Is(err, errNoRow):
			return fail(stderr, name, err)
		}
		r.Response, r.BodyHidden = nil, false
		deleted = append(deleted, r)
	}
	if js {
		if code := printJSON(stdout, stderr, name, map[string]any{"deleted": deleted}); code != 0 {
			return code
		}
	} else {
		for _, r := range deleted {
			fmt.Fprintf(stdout, "deleted the row of %q (tenant %q, principal %q, flow %s)\n", r.Key, r.Tenant, r.Principal, r.Flow)
		}
	}
	if refused > 0 {
		return 1
	}
	return 0
}
