package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
)

// The commands of oke idempotency (idempotencyCmds).

func idempotencyLs(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var (
		limit int
		after string
		js    bool
	)
	fs.StringVar(&after, "after", "", "list the rows after this `CURSOR` (the one the page before printed: the next page)")
	fs.IntVar(&limit, "limit", 100, "list at most `N` rows (1–1000)")
	fs.BoolVar(&js, "json", false, `print the rows as JSON: {"rows": […], "next": CURSOR when more follow}`)
	return func(ctx context.Context, c *call) int {
		if limit < 1 || limit > 1000 {
			return c.fail(&usageError{fmt.Errorf("-limit must be between 1 and 1000, got %d", limit)})
		}
		var from driver.Key
		if after != "" {
			var err error
			if from, err = parseRowCursor(after); err != nil {
				return c.fail(err)
			}
		}
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		rows, more, err := src.listRows(ctx, from, limit)
		if err != nil {
			return c.fail(err)
		}
		more = more && len(rows) > 0
		var cursor string
		if more {
			r := rows[len(rows)-1]
			cursor = rowCursor(driver.Key{Tenant: r.Tenant, Principal: r.Principal, Flow: r.Flow, Key: r.Key})
		}
		switch {
		case js:
			if rows == nil {
				rows = []admin.RowView{}
			}
			out := map[string]any{"rows": rows}
			if more {
				out["next"] = cursor
			}
			if code := printJSON(c.stdout, c.stderr, c.name, out); code != 0 {
				return code
			}
		case len(rows) == 0:
			fmt.Fprintln(c.stdout, "no rows")
		default:
			printRows(c.stdout, rows)
		}
		if more {
			c.nextPage("rows", map[string]string{"after": cursor})
		}
		return 0
	}
}

func idempotencyShow(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var (
		k      driver.Key
		reveal bool
		js     bool
	)
	scopeFlags(fs, &k)
	fs.BoolVar(&reveal, "reveal", false, "show the stored body (it may hold personal data); needs one row: narrow the scope")
	fs.BoolVar(&js, "json", false, "print the rows as JSON")
	return func(ctx context.Context, c *call) int {
		k.Key = c.pos[0]
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		rows, err := src.findRows(ctx, k)
		if err != nil {
			return c.fail(err)
		}
		if len(rows) == 0 {
			return c.fail(fmt.Errorf("%w: no row has the key %q%s (oke idempotency ls lists them all)", errNoRow, k.Key, scopeText(k)))
		}
		if reveal {
			if len(rows) > 1 {
				return c.fail(&usageError{fmt.Errorf("-reveal shows one row's body, and the key %q has %d rows: narrow it with -tenant, -principal and -flow (%s)", k.Key, len(rows), scopes(rows))})
			}
			r := rows[0]
			row, err := src.getRow(ctx, driver.Key{Tenant: r.Tenant, Principal: r.Principal, Flow: r.Flow, Key: r.Key}, true)
			if err != nil {
				return c.fail(err)
			}
			rows[0] = row
		}
		if js {
			return printJSON(c.stdout, c.stderr, c.name, map[string]any{"rows": rows})
		}
		for i, r := range rows {
			if i > 0 {
				fmt.Fprintln(c.stdout)
			}
			printRow(c.stdout, r)
		}
		return 0
	}
}

func idempotencyDelete(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var (
		k     driver.Key
		all   bool
		force bool
		js    bool
	)
	scopeFlags(fs, &k)
	fs.BoolVar(&all, "all", false, "delete the key's rows in every scope that matches, not only one")
	fs.BoolVar(&force, "force", false, "delete a row even while a request still holds it (its holder is fenced out but keeps running, and the next request with the key runs beside it): only for a holder you know is gone or stuck")
	fs.BoolVar(&js, "json", false, "print the deleted rows' scopes as JSON")
	return func(ctx context.Context, c *call) int {
		k.Key = c.pos[0]
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		rows, err := src.findRows(ctx, k)
		if err != nil {
			return c.fail(err)
		}
		switch {
		case len(rows) == 0:
			return c.fail(fmt.Errorf("%w: no row has the key %q%s (oke idempotency ls lists them all)", errNoRow, k.Key, scopeText(k)))
		case len(rows) > 1 && !all:
			return c.fail(&usageError{fmt.Errorf("the key %q has %d rows: narrow it to one with -tenant, -principal and -flow (%s), or pass -all to delete them all", k.Key, len(rows), scopes(rows))})
		}
		deleted := []admin.RowView{}
		refused := 0
		for _, r := range rows {
			err := src.deleteRow(ctx, driver.Key{Tenant: r.Tenant, Principal: r.Principal, Flow: r.Flow, Key: r.Key}, force)
			switch {
			case errors.Is(err, admin.ErrRowInProgress):
				// Refused: say so and go on with the other rows.
				refused++
				fmt.Fprintf(c.stderr, "%s: not deleted: %v (pass -force to delete it anyway)\n", c.name, c.st.redact(err))
				continue
			case err != nil && !errors.Is(err, errNoRow):
				return c.fail(err)
			}
			r.Response, r.BodyHidden = nil, false
			deleted = append(deleted, r)
		}
		if js {
			if code := printJSON(c.stdout, c.stderr, c.name, map[string]any{"deleted": deleted}); code != 0 {
				return code
			}
		} else {
			for _, r := range deleted {
				fmt.Fprintf(c.stdout, "deleted the row of %q (tenant %q, principal %q, flow %s)\n", r.Key, r.Tenant, r.Principal, r.Flow)
			}
		}
		if refused > 0 {
			return 1
		}
		return 0
	}
}
