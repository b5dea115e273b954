package cli

import (
	"context"
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

`+synopses("oke idempotency", idempotencyCmds())+`
Shows and manages the Idempotency-Key rows: one per key in its scope
(tenant, principal, flow), holding the stored response its retries replay.

  ls      the rows in key order: scope, key, state (running, completed, or
          expired: past its TTL, not yet swept), stored status, run, expiry;
          a page of -limit rows, and when more follow, the command for the
          next page on stderr (-after CURSOR)
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
	return runGroup(ctx, name, idempotencyCmds(), idempotencyUsage, args, stdout, stderr)
}

// idempotencyCmds is the table of oke idempotency's commands.
func idempotencyCmds() []storeCmd {
	return []storeCmd{
		{name: "ls", aliases: []string{"list"}, flags: idempotencyLs, synopsis: "[-after CURSOR] [-limit N] [-json]",
			about: `Lists the Idempotency-Key rows in key order, stored bodies hidden (see show
-reveal). When more rows follow the page, it says on stderr the command that
lists the next one (-after CURSOR).`},
		{name: "show", args: 1, flags: idempotencyShow, synopsis: "[-tenant T] [-principal P] [-flow F] [-reveal] [-json] KEY",
			about: "Shows the rows of one Idempotency-Key, in every scope unless -tenant, -principal or -flow narrow it."},
		{name: "delete", aliases: []string{"rm"}, args: 1, writes: true, flags: idempotencyDelete, synopsis: "[-tenant T] [-principal P] [-flow F] [-all] [-force] [-json] KEY",
			about: "Deletes the row of an Idempotency-Key: the next request with the key runs as new. A row still in flight (running, its lease not over) is refused unless -force."},
		{name: "sweep", writes: true, flags: idempotencySweep, synopsis: "[-batch N] [-json]",
			about: `Deletes every expired Idempotency-Key row (past its TTL, no live lease), in
batches of -batch rows, one store call each: the store is held for one batch
at a time, never for the whole sweep, so an app using it keeps serving. On a
terminal it shows a progress line; it prints how many rows it deleted.`},
	}
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
			line("body", "hidden ("+count(r.BodyBytes, "byte", "bytes")+"; show it with -reveal)")
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
