package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/okengine/oke/admin"
)

// The commands of oke runs (runsCmds): each registers its flags and
// returns what it does.

func runsLs(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var (
		f             runFilter
		js            bool
		after, before string
	)
	fs.StringVar(&f.flow, "flow", "", "only runs of this flow (`NAME`, e.g. demo.pipeline)")
	fs.StringVar(&f.status, "status", "", "only runs in this `status`: running, sleeping, completed, failed or dead (or several, comma-separated)")
	fs.StringVar(&f.tenant, "tenant", "", "only runs of this `tenant`")
	fs.StringVar(&after, "created-after", "", "only runs created at or after this `TIME` (RFC 3339, e.g. 2026-01-02T15:04:05Z)")
	fs.StringVar(&before, "created-before", "", "only runs created before this `TIME` (RFC 3339)")
	fs.StringVar(&f.after, "after", "", "only runs after this run `ID` (the next page, oldest first)")
	fs.StringVar(&f.before, "before", "", "only runs before this run `ID` (the next page with -newest)")
	fs.BoolVar(&f.desc, "newest", false, "newest first")
	fs.IntVar(&f.limit, "limit", 100, "list at most `N` runs (1–1000)")
	fs.BoolVar(&js, "json", false, `print the runs as JSON: {"runs": […], "next": ID when more follow}`)
	return func(ctx context.Context, c *call) int {
		var err error
		for _, tf := range []struct {
			flag, v string
			dst     *time.Time
		}{{"-created-after", after, &f.createdAfter}, {"-created-before", before, &f.createdBefore}} {
			if tf.v == "" {
				continue
			}
			if *tf.dst, err = time.Parse(time.RFC3339Nano, tf.v); err != nil {
				return c.fail(&usageError{fmt.Errorf("%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", tf.flag, tf.v)})
			}
		}
		if f.limit < 1 || f.limit > 1000 {
			return c.fail(&usageError{fmt.Errorf("-limit must be between 1 and 1000, got %d", f.limit)})
		}
		for _, st := range strings.Split(f.status, ",") {
			if _, ok := parseStatus(strings.TrimSpace(st)); f.status != "" && !ok {
				return c.fail(&usageError{fmt.Errorf("-status must be running, sleeping, completed, failed or dead (or several, comma-separated), got %q", st)})
			}
		}
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		runs, more, err := src.listRuns(ctx, f)
		if err != nil {
			return c.fail(err)
		}
		more = more && len(runs) > 0
		// The next page: after the last run shown, or, newest first,
		// before it.
		var cursor string
		next := map[string]string{}
		if more {
			cursor = runs[len(runs)-1].ID
			if f.desc {
				next["before"], next["after"] = cursor, ""
			} else {
				next["after"], next["before"] = cursor, ""
			}
		}
		switch {
		case js:
			if runs == nil {
				runs = []admin.RunView{}
			}
			out := map[string]any{"runs": runs}
			if more {
				out["next"] = cursor
			}
			if code := printJSON(c.stdout, c.stderr, c.name, out); code != 0 {
				return code
			}
		case len(runs) == 0:
			fmt.Fprintln(c.stdout, "no runs")
		default:
			tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tFLOW\tSTATUS\tATTEMPTS\tCREATED\tSTEPS")
			for _, r := range runs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", r.ID, r.Flow, r.Status, r.Attempts, stamp(r.CreatedAt), r.StepCount)
			}
			tw.Flush()
		}
		if more {
			c.nextPage("runs", next)
		}
		return 0
	}
}

func runsShow(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var js bool
	fs.BoolVar(&js, "json", false, "print the run as JSON (the admin API's shape)")
	return func(ctx context.Context, c *call) int {
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		run, err := src.getRun(ctx, c.pos[0])
		if err != nil {
			return c.fail(err)
		}
		if js {
			return printJSON(c.stdout, c.stderr, c.name, run)
		}
		printRun(c.stdout, run)
		return 0
	}
}

func runsSignal(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var payload, key string
	fs.StringVar(&payload, "payload", "", "the signal's payload, as `JSON`")
	fs.StringVar(&key, "key", "", "dedupe `key`: a second send with it delivers nothing more")
	return func(ctx context.Context, c *call) int {
		req := admin.SignalRequest{Name: c.pos[1], Key: key}
		if payload != "" {
			if !json.Valid([]byte(payload)) {
				return c.fail(&usageError{fmt.Errorf("-payload must be JSON, got %q (quote a string: '\"yes\"')", payload)})
			}
			req.Data = json.RawMessage(payload)
		}
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		if err := src.signal(ctx, c.pos[0], req); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.stdout, "sent signal %q to %s\n", req.Name, c.pos[0])
		return 0
	}
}

func runsReplay(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var (
		from int
		js   bool
	)
	fs.IntVar(&from, "from-step", 1, "reuse the saved results of steps 1..`N`-1 and run step N onwards (1: every step runs)")
	fs.BoolVar(&js, "json", false, `print {"id": …, "replayOf": …, "fromStep": …} as JSON`)
	return func(ctx context.Context, c *call) int {
		if from < 1 {
			return c.fail(&usageError{fmt.Errorf("-from-step counts from 1, got %d", from)})
		}
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		old := c.pos[0]
		id, err := src.replay(ctx, old, from)
		if err != nil {
			return c.fail(err)
		}
		if js {
			return printJSON(c.stdout, c.stderr, c.name, map[string]any{"id": id, "replayOf": old, "fromStep": from})
		}
		fmt.Fprintln(c.stdout, id)
		what := id + " replays " + old
		if from > 1 {
			what += " from step " + strconv.Itoa(from) + " (" + reused(from-1) + ")"
		}
		switch {
		case c.st.data != "":
			fmt.Fprintf(c.stderr, "%s. No app holds %s now, so the new run waits: it is picked up when an app next opens the folder.\n", what, c.st.data)
		case c.st.dsn != "":
			fmt.Fprintf(c.stderr, "%s. It is due now: an app on that database (schema %s) picks it up (see: oke runs show %s).\n", what, c.st.schema, id)
		default:
			fmt.Fprintf(c.stderr, "%s; the app runs it now (see: oke runs show %s).\n", what, id)
		}
		return 0
	}
}

// reused says which steps a replay reuses when it starts after step n:
// "step 1 reused", "steps 1–3 reused".
func reused(n int) string {
	if n == 1 {
		return "step 1 reused"
	}
	return fmt.Sprintf("steps 1–%d reused", n)
}

func runsCancel(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var js bool
	fs.BoolVar(&js, "json", false, "print the cancelled run as JSON")
	return func(ctx context.Context, c *call) int {
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		run, err := src.cancel(ctx, c.pos[0])
		if err != nil {
			return c.fail(err)
		}
		if js {
			return printJSON(c.stdout, c.stderr, c.name, run)
		}
		fmt.Fprintf(c.stdout, "cancelled %s: it is %s with 409 RunCancelled\n", run.ID, run.Status)
		return 0
	}
}

func runsResume(fs *flag.FlagSet) func(ctx context.Context, c *call) int {
	var js bool
	fs.BoolVar(&js, "json", false, "print the resumed run as JSON")
	return func(ctx context.Context, c *call) int {
		src, err := c.open(ctx)
		if err != nil {
			return c.fail(err)
		}
		run, err := src.resume(ctx, c.pos[0])
		if err != nil {
			return c.fail(err)
		}
		if js {
			return printJSON(c.stdout, c.stderr, c.name, run)
		}
		fmt.Fprintf(c.stdout, "resumed %s: it is %s and due now\n", run.ID, run.Status)
		return 0
	}
}
