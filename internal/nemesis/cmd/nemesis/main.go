// Command nemesis runs the payments demo under faults while a recording
// client charges it, then checks the whole history (package
// internal/nemesis) and prints the table of docs/RELIABILITY.md. It exits
// 1 when a promise was broken, 2 on a usage or setup error.
//
//	go build -o /tmp/payments ./examples/payments
//	go run ./internal/nemesis/cmd/nemesis -bin /tmp/payments -driver file -duration 60s
//
// scripts/nemesis runs it for every driver, as CI does.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/okengine/oke/internal/nemesis"
	"github.com/okengine/oke/internal/pgcluster"
)

type config struct {
	bin, driver, work, historyOut, reportOut string
	duration, clientTimeout, hang            time.Duration
	minFaults, clients                       int
	skip                                     string // fault kinds not to inject, comma-separated
	pace                                     time.Duration
	seed                                     uint64
	tmpfsSize                                int64
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "", "the demo's `binary` (go build ./examples/payments)")
	flag.StringVar(&c.driver, "driver", "file", "the `driver` to test: file or postgres")
	flag.StringVar(&c.work, "work", "", "a `folder` for the run's data and logs (default: a temporary one, removed after a run without violations)")
	flag.StringVar(&c.historyOut, "history", "", "write the history and report as JSON to this `file`")
	flag.StringVar(&c.reportOut, "report", "", "write the report as JSON to this `file` (for -table)")
	table := flag.Bool("table", false, "print the table of the reports (JSON files of -report) named as arguments, and exit 1 if one broke a promise")
	checkPG := flag.Bool("check-postgres", false, "exit 0 if a private PostgreSQL server can be started here, else print why not and exit 3")
	printBound := flag.Bool("print-bound", false, "print how many seconds a run with these flags may take at most, and exit")
	flag.DurationVar(&c.duration, "duration", 60*time.Second, "inject faults for at least this long (and at least -faults of them)")
	flag.IntVar(&c.minFaults, "faults", 50, "inject at least this many faults")
	flag.IntVar(&c.clients, "clients", 4, "recording clients sending charges")
	flag.DurationVar(&c.pace, "pace", 5*time.Millisecond, "each client's pause between requests")
	flag.DurationVar(&c.clientTimeout, "client-timeout", 20*time.Second, "how long a request may wait for its answer; no answer in time from an instance that was up is a hang")
	flag.DurationVar(&c.hang, "hang", 21*time.Second, "how long a hung Postgres stays hung (longer than -client-timeout, so a request that waits it out is seen)")
	flag.StringVar(&c.skip, "skip", "", "a comma-separated `list` of fault kinds not to inject (e.g. pg-pause)")
	flag.Uint64Var(&c.seed, "seed", 0, "the random seed (0: from the clock; the run prints it)")
	flag.Int64Var(&c.tmpfsSize, "tmpfs-size", 64<<20, "the size in bytes of the tmpfs the file driver's data lives on (root only)")
	flag.Parse()
	switch {
	case *table:
		os.Exit(printTable(flag.Args()))
	case *checkPG:
		if err := pgcluster.Available(); err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		os.Exit(0)
	case *printBound:
		// The fault phase stops at 3×duration; a fault may then take up
		// to a minute to heal; settling takes at most 2 minutes; setup
		// and teardown (a PostgreSQL initdb) up to 2 more.
		fmt.Println(int((3*c.duration + 5*time.Minute).Seconds()))
		os.Exit(0)
	}
	if c.bin == "" || (c.driver != "file" && c.driver != "postgres") {
		fmt.Fprintln(os.Stderr, "nemesis: -bin is required, and -driver is file or postgres")
		flag.Usage()
		os.Exit(2)
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, c))
}

// A target is a driver's setup under test: its instances, its faults, and
// how to read the charges back.
type target interface {
	instances() []*nemesis.Instance
	// faults lists the kinds of fault, injected in turn.
	faults() []faultKind
	// effects reads the business store's charges, refunds and provider
	// refunds, once the instances are stopped.
	effects(ctx context.Context) (storeRows, error)
	promise() nemesis.Promise
	close()
	notes() []string
}

// A faultKind injects one fault and returns its record (Start/End are
// filled by the caller when left zero).
type faultKind struct {
	name   string
	inject func(ctx context.Context, f *nemesis.Fault) error
}

func run(ctx context.Context, c config) int {
	removeWork := false
	if c.work == "" {
		dir, err := os.MkdirTemp("", "oke-nemesis-"+c.driver+"-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "nemesis:", err)
			return 2
		}
		c.work, removeWork = dir, true
	}
	rng := rand.New(rand.NewPCG(c.seed, 21))
	fmt.Printf("nemesis: driver %s, seed %d, at least %d faults over at least %s, %d clients, work %s\n",
		c.driver, c.seed, c.minFaults, c.duration, c.clients, c.work)

	var (
		tg  target
		err error
	)
	switch c.driver {
	case "file":
		tg, err = newFileTarget(c, rng)
	case "postgres":
		tg, err = newPostgresTarget(ctx, c, rng)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nemesis: set up the %s driver: %v\n", c.driver, err)
		return 2
	}
	for _, n := range tg.notes() {
		fmt.Println("nemesis: note:", n)
	}
	insts := tg.instances()
	for _, in := range insts {
		// Every instance serves pprof on a port of its own, so that a
		// hung request's stacks can be read (dumpHang).
		if in.Pprof == "" {
			if addr, err := nemesis.FreeAddr(); err == nil {
				in.Pprof = addr
			}
		}
		if err := in.Start(60 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "nemesis: %v\n", err)
			tg.close()
			return 2
		}
	}

	rec := nemesis.NewRecorder(c.clientTimeout)
	ks := newKeyspace(fmt.Sprintf("nem-%s-%d", c.driver, c.seed%100000))
	var (
		mu     sync.Mutex
		faults []nemesis.Fault
	)

	// The load: each client sends a new charge most of the time, a refund
	// of a charge it saw acknowledged one time in ten (one refund key per
	// charge), and an old key (a retry, or a replay) one time in five, to a
	// random instance.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for cl := 0; cl < c.clients; cl++ {
		r := rand.New(rand.NewPCG(c.seed, uint64(cl)+100))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loadCtx.Err() == nil {
				var k string
				ok := false
				switch n := r.IntN(10); {
				case n < 2:
					k, ok = ks.old(r)
				case n == 2:
					k, ok = ks.newRefund()
				}
				if !ok {
					k = ks.newCharge()
				}
				in := insts[r.IntN(len(insts))]
				op := ks.send(rec, in, cl, nemesis.PhaseLoad, k)
				if op.Timeout {
					dumpHang(c, in, op)
				}
				if op.Status == 0 && !op.Timeout {
					time.Sleep(50 * time.Millisecond) // refused: the instance is down
				}
				time.Sleep(c.pace)
			}
		}()
	}

	// The faults, in turn, until both bounds are met (and never past three
	// times the duration).
	var kinds []faultKind
	for _, k := range tg.faults() {
		if !slices.Contains(strings.Split(c.skip, ","), k.name) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		stopLoad()
		fmt.Fprintf(os.Stderr, "nemesis: -skip %q leaves no fault to inject\n", c.skip)
		return 2
	}
	if c.skip != "" {
		fmt.Printf("nemesis: not injecting: %s (-skip)\n", c.skip)
	}
	start := time.Now()
	aborted := ""
	for i := 0; ctx.Err() == nil; i++ {
		el := time.Since(start)
		if (el >= c.duration && len(faults) >= c.minFaults) || el >= 3*c.duration {
			break
		}
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond) // traffic between faults
		k := kinds[i%len(kinds)]
		f := nemesis.Fault{Kind: k.name, Start: rec.Since()}
		err := k.inject(ctx, &f)
		if f.End == 0 {
			f.End = rec.Since()
		}
		f.End += time.Second // the backlog drains after the heal
		if err != nil {
			f.Failed = err.Error()
		}
		fmt.Printf("nemesis: %3d %-12s %-9s %6.2fs–%6.2fs %s%s\n", len(faults)+1, f.Kind, f.Target, f.Start.Seconds(), f.End.Seconds(), f.Note, failed(f.Failed))
		mu.Lock()
		faults = append(faults, f)
		mu.Unlock()
		if err != nil && !allUp(ctx, insts) {
			aborted = fmt.Sprintf("fault %s left an instance down: %v", k.name, err)
			break
		}
	}
	stopLoad()
	wg.Wait()
	elapsed := time.Since(start)

	// Settle: every key is sent again until it gets a 2xx (a replay for
	// an acknowledged one), so that lost and unknown outcomes resolve.
	if aborted == "" {
		settle(ctx, rec, insts, ks, c)
	}
	for _, in := range insts {
		in.Terminate(15 * time.Second)
	}
	rec.CloseIdle()

	rows, err := tg.effects(ctx)
	if err != nil {
		aborted += fmt.Sprintf(" read the business store: %v", err)
	}
	eff := ks.effects(rows)
	h := nemesis.History{Ops: rec.Ops(), Faults: faults}
	rep := nemesis.Check(h, eff, nemesis.Options{Driver: c.driver, Promise: tg.promise(),
		// A refund row is deduped by the id its run drew in a step, and a
		// unique index allows one per charge: at most one on every driver.
		RoutePromise: map[string]nemesis.Promise{"/refunds": nemesis.ExactlyOnce}})
	if aborted != "" {
		rep.Violations = append(rep.Violations, nemesis.Violation{Kind: "aborted", Detail: aborted})
	}
	tg.close()

	fmt.Printf("nemesis: %s: %d faults in %s, %d requests\n", c.driver, len(faults), elapsed.Round(time.Second), len(h.Ops))
	rep.WriteDetails(os.Stdout, 30)
	nemesis.WriteTable(os.Stdout, rep)
	if c.reportOut != "" {
		if b, err := json.Marshal(rep); err == nil {
			os.WriteFile(c.reportOut, b, 0o644)
		}
	}
	if c.historyOut == "" && !rep.OK() {
		c.historyOut = filepath.Join(c.work, "history.json") // for a failure's post-mortem
	}
	if c.historyOut != "" {
		if err := writeJSON(c.historyOut, h, rep, eff); err != nil {
			fmt.Fprintln(os.Stderr, "nemesis:", err)
		}
	}
	if !rep.OK() {
		fmt.Printf("nemesis: %s: FAIL — %d violations; logs and the history (%s) kept in %s (seed %d)\n", c.driver, len(rep.Violations), filepath.Base(c.historyOut), c.work, c.seed)
		for _, in := range insts {
			fmt.Printf("nemesis: instance %s's log: %s\n", in.Name, in.Log)
		}
		return 1
	}
	fmt.Printf("nemesis: %s: ok\n", c.driver)
	if removeWork {
		os.RemoveAll(c.work)
	}
	return 0
}

func failed(s string) string {
	if s == "" {
		return ""
	}
	return " FAILED: " + s
}

// allUp reports whether every instance answers /healthz (restarting a
// dead one once).
func allUp(ctx context.Context, insts []*nemesis.Instance) bool {
	for _, in := range insts {
		if !in.Running() {
			if in.Start(30*time.Second) != nil {
				return false
			}
		}
		if !in.Healthy(ctx, 15*time.Second) {
			return false
		}
	}
	return true
}

// settle sends every key until it gets a 2xx, waiting out 409 and 503
// (by Retry-After, at most a second) and no answer, for at most two
// minutes in all.
func settle(ctx context.Context, rec *nemesis.Recorder, insts []*nemesis.Instance, ks *keyspace, c config) {
	deadline := time.Now().Add(2 * time.Minute)
	work := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < c.clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				unexpected := 0
				for i := 0; ; i++ {
					in := insts[(w+i)%len(insts)]
					op := ks.send(rec, in, w, nemesis.PhaseSettle, k)
					if !op.Expected() {
						unexpected++ // a stored error repeats: three tell
					}
					if op.Acked() || unexpected == 3 || time.Now().After(deadline) || ctx.Err() != nil {
						break
					}
					wait := 200 * time.Millisecond
					if s, err := strconv.Atoi(op.RetryAfter); err == nil && s > 0 {
						wait = min(time.Duration(s)*time.Second, time.Second)
					}
					time.Sleep(wait)
				}
			}
		}()
	}
	for _, k := range ks.all() {
		work <- k
	}
	close(work)
	wg.Wait()
}

func writeJSON(path string, h nemesis.History, rep *nemesis.Report, eff nemesis.Effects) error {
	b, err := json.MarshalIndent(struct {
		History nemesis.History
		Effects nemesis.Effects
		Report  *nemesis.Report
	}{h, eff, rep}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// sleepCtx sleeps d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// jitter is a duration in [lo, hi).
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// printTable prints the table of the reports in files; 1 when one broke a
// promise, 2 when one cannot be read.
func printTable(files []string) int {
	var reps []*nemesis.Report
	code := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		var r nemesis.Report
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "nemesis:", err)
			code = 2
			continue
		}
		if !r.OK() && code == 0 {
			code = 1
		}
		reps = append(reps, &r)
	}
	nemesis.WriteTable(os.Stdout, reps...)
	return code
}

// hangDumps counts the goroutine dumps written; dumpHang writes at most
// three.
var hangDumps atomic.Int32

// dumpHang writes the goroutines of in, whose request op got no answer
// within the client's timeout, to the work folder: the stack of the
// handler still waiting names the call that has no deadline. The store
// is still hung when the client gives up (-hang outlasts
// -client-timeout), so the handler is still in that call.
func dumpHang(c config, in *nemesis.Instance, op nemesis.Op) {
	if hangDumps.Add(1) > 3 {
		return
	}
	b, err := in.Goroutines()
	if err != nil {
		fmt.Fprintf(os.Stderr, "nemesis: read the goroutines of %s after hung op %d: %v\n", in.Name, op.Seq, err)
		return
	}
	name := filepath.Join(c.work, fmt.Sprintf("hang-%s-op%d.txt", in.Name, op.Seq))
	head := fmt.Sprintf("op %d %s %s key %s, called at %s, no answer in %s\n\n", op.Seq, op.Route, in.Name, op.Key, op.Call, c.clientTimeout)
	if err := os.WriteFile(name, append([]byte(head), b...), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "nemesis:", err)
		return
	}
	fmt.Printf("nemesis: hung op %d: goroutines of %s in %s\n", op.Seq, in.Name, name)
}
