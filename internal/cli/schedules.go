package cli

import (
	"context"
	"flag"
	"fmt"
	"github.com/okengine/oke/internal/secretflag"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
)

const schedulesAbout = `Lists the schedules of a running app — its flows bound with oke.Cron —
one line each: the flow, its cron spec and time zone, its catch-up policy,
its next tick, and the run of the newest tick the journal holds (its id and
status; "-" when no tick has run yet). Schedules live in the app's code, so
this asks the app over HTTP, through oke's admin API (package admin; the
demo mounts it at /_oke/): -addr URL (default http://127.0.0.1:8080) and
the admin token, -token TOKEN or $OKE_ADMIN_TOKEN. The runs themselves are
journal runs: oke runs ls -flow NAME lists them.`

// runSchedules is `oke schedules`.
func runSchedules(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	var (
		addr, token string
		js          bool
	)
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", "", "ask the running app at this `URL` (its admin API, at "+AdminPath+"/ unless the URL has a path); the default is "+DefaultAddr)
	token = os.Getenv("OKE_ADMIN_TOKEN")
	secretflag.Var(fs, &token, "token", "the app's admin `token`, sent as Authorization: Bearer (default $OKE_ADMIN_TOKEN; the demo writes the one it draws to admin-token in its -data folder)")
	fs.BoolVar(&js, "json", false, "print the schedules as JSON (the admin API's shape)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [-addr URL] [-token TOKEN] [-json]\n\n%s\n\nFlags:\n", name, schedulesAbout)
		fs.PrintDefaults()
	}
	if _, code, ok := parse(fs, args, 0, stderr); !ok {
		return code
	}
	if addr == "" {
		addr = DefaultAddr
	}
	src, err := newHTTPSource(addr, token)
	if err != nil {
		return fail(stderr, name, err)
	}
	var page admin.SchedulesPage
	if err := src.call(ctx, "GET", "/schedules", &page); err != nil {
		return fail(stderr, name, err)
	}
	if js {
		if page.Schedules == nil {
			page.Schedules = []oke.ScheduleInfo{}
		}
		return printJSON(stdout, stderr, name, page)
	}
	printSchedules(stdout, page.Schedules, time.Now())
	return 0
}

// printSchedules writes schedules for people; now is for "in 3h".
func printSchedules(w io.Writer, ss []oke.ScheduleInfo, now time.Time) {
	if len(ss) == 0 {
		fmt.Fprintln(w, "no schedules (bind a flow with oke.Cron)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FLOW\tSPEC\tZONE\tCATCH-UP\tNEXT\tLAST TICK\tLAST RUN\tSTATUS")
	for _, s := range ss {
		next := "-"
		if !s.Next.IsZero() {
			next = stamp(s.Next) + " (" + until(s.Next.Sub(now)) + ")"
		}
		tick, run, status := "-", "-", "-"
		if l := s.Last; l != nil {
			tick, run, status = stamp(l.Tick), l.RunID, l.Status
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Flow, s.Spec, s.Location, s.CatchUp, next, tick, run, status)
	}
	tw.Flush()
}

// until writes a duration ahead for people: "in 3h05m", "now".
func until(d time.Duration) string {
	switch {
	case d <= 0:
		return "now"
	case d < time.Minute:
		return "in " + d.Round(time.Second).String()
	}
	return "in " + strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}
