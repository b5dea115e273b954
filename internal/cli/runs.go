package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/okengine/oke/admin"
)

const whereHelp = `Where it reads (one of):

  -addr URL      asks a running app over HTTP, through oke's admin API
                 (package admin; the demo mounts it at /_oke/, and a URL
                 without a path means that). This is the way while the app
                 runs on a data folder: it owns it. The default is
                 http://127.0.0.1:8080. The admin API needs the app's admin
                 token: -token TOKEN or $OKE_ADMIN_TOKEN.
  -data DIR      opens the data folder itself with the file driver, only
                 while no app holds it (the file driver allows one process
                 at a time; a locked folder fails, and says to use -addr).
  -postgres DSN  opens a Postgres database with the Postgres driver (oke's
                 tables in -schema NAME, default oke), also while apps use
                 it. A command that only reads opens it read-only; the DSN
                 is never shown (it may hold a password).
`

func runsUsage(w io.Writer) {
	io.WriteString(w, `Usage:

`+synopses("oke runs", runsCmds())+`
Lists, shows, replays, cancels, resumes and signals the journal runs of durable flows: one run
per execution of a flow with oke.Options{Durable: true}, with the saved
result of each step.

  ls      one line per run, oldest first (-newest: newest first): id, flow,
          status, attempts (how many times the run was picked up), created,
          and its saved steps; pages with -after (or -before with -newest)
  show    one run: its input, status, result, and each saved step with its
          attempts, result and timing (-json: the admin API's JSON)
  replay  starts a new run of the same flow with the same input and prints
          its id. Every step runs again (a replay is a new run), or, with
          -from-step N, steps 1..N-1 give back the old run's saved results
          and N onwards run. With -addr the app runs it at once; with -data
          it is picked up when an app next opens the folder; with -postgres
          an app on that database picks it up.
  cancel  fails a run that no execution holds now — sleeping, or waiting
          to be picked up — with 409 RunCancelled: its later steps never
          run. A run running now is refused: cancel it again when it parks.
  signal  sends the signal NAME, with the JSON -payload, to a run: its next
          oke.AwaitSignal of NAME receives it (a run waiting for it now
          wakes; a run that has not reached the wait yet keeps it). -key
          dedupes: sending one key twice delivers once.
  resume  makes a dead-lettered run (status dead: too many failed pick-ups
          in a row, see oke.Config.DeadLetterAfter) due again, its failed
          pick-ups and its next step's attempts reset; it goes on from its
          last saved step. List them with: oke runs ls -status dead

A step whose function fails with a plain error is retried by its retry
policy (oke.RetryPolicy): show prints each saved step's attempts, and for
an unfinished run the next step's attempts so far and the last error.

`+whereHelp+`
Run 'oke runs <command> -h' for a command's flags.
`)
}

// runRuns is `oke runs`.
func runRuns(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	return runGroup(ctx, name, runsCmds(), runsUsage, args, stdout, stderr)
}

// runsCmds is the table of oke runs' commands.
func runsCmds() []storeCmd {
	return []storeCmd{
		{name: "ls", aliases: []string{"list"}, flags: runsLs,
			synopsis: "[-flow NAME] [-status S] [-tenant T] [-created-after TIME] [-created-before TIME] [-after ID | -before ID] [-newest] [-limit N] [-json]",
			about: `Lists journal runs, oldest first (-newest: newest first): id, flow, status,
attempts, created, saved steps. When more runs follow the page, it says on
stderr the command that lists the next one.`},
		{name: "show", args: 1, flags: runsShow, synopsis: "[-json] ID",
			about: "Shows one journal run: its input, status and result, each saved step with its attempts, result and timing, and, while it is unfinished, the attempts of the step it takes next."},
		{name: "replay", args: 1, writes: true, flags: runsReplay, synopsis: "[-from-step N] [-json] ID",
			about: `Starts a new run of the run's flow with the same input and prints the new
run's id. Every step runs again (a replay is a new run); with -from-step N,
steps 1..N-1 give back the old run's saved results (they do not run again)
and step N onwards run. Steps count from 1. With -addr the app runs it at
once; with -data it is picked up when an app next opens the folder (its
scheduler runs due runs on start); with -postgres an app on that database
picks it up.`},
		{name: "cancel", args: 1, writes: true, flags: runsCancel, synopsis: "[-json] ID",
			about: `Cancels a run that no execution holds now — one that sleeps, or waits to
be picked up — by failing it with the 409 RunCancelled envelope: its later
steps never run. A run that is running now is refused; cancel it again when
it parks (sleeps, waits for a retry, or its lease lapses).`},
		{name: "resume", args: 1, writes: true, flags: runsResume, synopsis: "[-json] ID",
			about: `Resumes a dead-lettered run (status dead): after too many failed pick-ups
in a row (crashes, lapsed leases, store failures; oke.Config.DeadLetterAfter)
a run is left alone until someone resumes it. Fix the cause first. The run
becomes due again, its failed pick-ups and its next step's attempts reset,
and goes on from its last saved step: with -addr (or -postgres, an app on
that database) the app picks it up at once; with -data when an app next
opens the folder. List dead runs with oke runs ls -status dead.`},
		{name: "signal", args: 2, writes: true, flags: runsSignal, synopsis: "[-payload JSON] [-key K] ID NAME",
			about: `Sends the signal NAME to run ID, with -payload (any JSON; none: null): the
run's next oke.AwaitSignal of NAME receives it. A run waiting for it now
wakes at once (with -addr or -postgres; with -data, when an app next opens
the folder); a run that has not reached its wait keeps the signal until it
does. With -key, sending the same key again delivers once. (The payload
flag is -payload, since -data names the data folder.)`},
	}
}

// parse parses flags and positional arguments in any order, and checks the
// number of positional arguments.
func parse(fs *flag.FlagSet, args []string, want int, stderr io.Writer) ([]string, int, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, parseExit(err), false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != want {
		if want == 0 {
			fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), pos[0])
		} else {
			what := argName(fs.Name())
			if want > 1 {
				what = fmt.Sprintf("%d arguments", want)
			} else {
				what = "1 " + what
			}
			fmt.Fprintf(stderr, "%s: want %s, got %s\n", fs.Name(), what, count(len(pos), "argument", "arguments"))
		}
		fs.Usage()
		return nil, 2, false
	}
	return pos, 0, true
}

// argName is what a command's one argument is.
func argName(cmd string) string {
	if strings.Contains(cmd, "idempotency") {
		return "Idempotency-Key"
	}
	return "run id"
}

// fail reports err and returns the exit code: 2 for a usage mistake, else 1.
func fail(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// printRun writes a run for people.
func printRun(w io.Writer, r admin.RunView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	line("run", r.ID)
	line("flow", r.Flow)
	line("status", r.Status)
	line("attempts", fmt.Sprint(r.Attempts))
	line("created", stamp(r.CreatedAt))
	line("updated", stamp(r.UpdatedAt))
	line("identity", strings.Trim(r.Tenant+" "+r.Principal, " "))
	line("input", compact(r.Input, 0))
	line("replay of", r.ReplayOf)
	line("parent", r.Parent)
	line("event", r.Event)
	if r.Owner != "" {
		lease := ""
		if r.LeaseUntil != nil {
			lease = ", lease until " + stamp(*r.LeaseUntil)
		}
		line("owner", r.Owner+lease)
	}
	if r.WakeAt != nil {
		line("wakes at", stamp(*r.WakeAt))
	}
	if n := r.Next; n != nil {
		line("next step", fmt.Sprintf("%d, attempts %d", n.Seq, n.Attempts))
	}
	if wt := r.Waiting; wt != nil {
		line("waiting for", fmt.Sprintf("signal %q, until %s", wt.Signal, stamp(wt.Until)))
	}
	if r.Strikes > 0 {
		line("failed pick-ups", fmt.Sprintf("%d in a row", r.Strikes))
	}
	if r.Status == "running" || r.Status == "sleeping" {
		line("last error", r.Error)
	} else {
		line("error", r.Error)
	}
	if r.Dead {
		line("resume", "oke runs resume "+r.ID)
	}
	if res := r.Result; res != nil {
		head := fmt.Sprint(res.Status)
		if res.Location != "" {
			head += ", Location " + res.Location
		}
		if b := compact(res.Body, 0); b != "" {
			head += ": " + b
		}
		line("result", head)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(r.Steps) == 0 {
		fmt.Fprintln(w, "no saved steps")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSTEP\tATTEMPTS\tSTARTED\tMS\tRESULT")
	for _, s := range r.Steps {
		res := compact(s.Result, 60)
		if s.Failure != nil {
			res = "failed: " + compact(s.Failure, 60)
		}
		name := s.Name
		if s.Concurrent {
			name += " (at the same time)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.1f\t%s\n", s.Seq, name, s.Attempts, stamp(s.StartedAt), s.Millis, res)
	}
	tw.Flush()
	printSignals(w, r.Signals)
}

// printSignals writes a run's signals, if any.
func printSignals(w io.Writer, list []admin.SignalView) {
	if len(list) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIGNAL\tNAME\tKEY\tSENT\tRECEIVED BY\tPAYLOAD")
	for _, s := range list {
		by := "waiting"
		if s.Step > 0 {
			by = fmt.Sprintf("step %d", s.Step)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.Seq, s.Name, s.Key, stamp(s.SentAt), by, compact(s.Payload, 60))
	}
	tw.Flush()
}

func printJSON(stdout, stderr io.Writer, name string, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(stderr, name, err)
	}
	stdout.Write(append(b, '\n'))
	return 0
}

// stamp writes a time for a table: local time to the millisecond.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05.000")
}

// compact writes a JSON value on one line, cut to max runes (0: no limit).
func compact(v any, max int) string {
	if v == nil {
		return ""
	}
	var s string
	switch x := v.(type) {
	case json.RawMessage:
		var buf bytes.Buffer
		if json.Compact(&buf, x) == nil {
			s = buf.String()
		} else {
			s = string(x)
		}
	default:
		b, _ := json.Marshal(x)
		s = string(b)
	}
	if r := []rune(s); max > 0 && len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}
