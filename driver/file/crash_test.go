//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package file

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// These tests run this test binary again as a child process (TestHelperProcess)
// and kill it with SIGKILL. They do not run in parallel with other tests: a
// fork holds copies of the other tests' lock files until its exec, which
// makes their reopens wait (see lockWait).

const helperEnv = "OKE_FILE_DRIVER_HELPER"

// helperHeld is the driver a "hold" child keeps open until it is killed.
var helperHeld *Driver

// TestHelperProcess is the child. It is not a test on its own.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process for the crash tests")
	}
	dir := os.Getenv("OKE_FILE_DRIVER_DIR")
	opts := []Option{WithCompactAfter(50)}
	var armed atomic.Bool
	if mode == "kill-at" {
		opts = append(opts, killAt(os.Getenv("OKE_FILE_DRIVER_KILL_AT"), &armed))
	}
	d, err := Open(dir, opts...)
	if err != nil {
		fmt.Printf("open error: %v\n", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	switch mode {
	case "hold":
		// Keep d reachable: once it is not, a GC may run the finalizer of
		// its LOCK file, which closes it and drops the lock this child is
		// meant to hold.
		helperHeld = d
		select {} // until killed
	case "write":
		base, _ := strconv.Atoi(os.Getenv("OKE_FILE_DRIVER_BASE"))
		var mu sync.Mutex // one line at a time on stdout
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				ctx := context.Background()
				for i := base + w; ; i += 4 {
					k := key(i)
					if _, err := d.Claim(ctx, claimReq(k, "child")); err != nil {
						fmt.Printf("claim error: %v\n", err)
						os.Exit(2)
					}
					// Dead records, so the log compacts now and then too.
					_ = d.Renew(ctx, k, "child", time.Minute)
					tmp := key(-i - 1)
					if _, err := d.Claim(ctx, claimReq(tmp, "child")); err == nil {
						_ = d.Release(ctx, tmp, "child")
					}
					if err := d.Complete(ctx, k, "child", response(i), 24*time.Hour); err != nil {
						fmt.Printf("complete error: %v\n", err)
						os.Exit(2)
					}
					d.mu.Lock()
					c := d.compactions
					d.mu.Unlock()
					mu.Lock()
					fmt.Printf("done %d %d\n", i, c)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	case "journal":
		journalChild(d)
	case "kill-at":
		fillUsed(t, d, 0, crashRows)
		fmt.Println("filled")
		armed.Store(true)
		err := d.Compact()
		fmt.Printf("survived the compaction (%v)\n", err)
		os.Exit(3)
	}
}

// crashRows is how many rows and runs the kill-at child fills in.
const crashRows = 6

// killAt makes the driver SIGKILL its own process before the nth I/O call
// named by point ("op|name|n", op as ioOp.String gives it) once armed is set.
func killAt(point string, armed *atomic.Bool) Option {
	parts := strings.Split(point, "|")
	n, _ := strconv.Atoi(parts[2])
	var seen atomic.Int64
	return func(c *config) {
		c.hooks = &hooks{fail: func(op ioOp, name string) error {
			if armed.Load() && op.String() == parts[0] && name == parts[1] && seen.Add(1) == int64(n) {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
			return nil
		}}
	}
}

// TestSIGKILLAtEachPointOfACompactionLosesNothing kills a real process at
// chosen points of a compaction of both logs — between the steps whose
// order keeps CHECKPOINT right — and opens the folder after it.
func TestSIGKILLAtEachPointOfACompactionLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, point := range []string{
		"fsync|" + logName + ".compact|1", // the new file written, not yet fsynced
		"write|" + checkpointName + "|1",  // fsynced, the checkpoint does not know it
		"rename|" + logName + "|1",        // the checkpoint knows it, not renamed
		"fsync folder|.|1",                // renamed, the rename not durable
		"write|" + checkpointName + "|2",  // renamed, before the checkpoint says so
		"rename|" + journalName + "|1",    // the rows done, the journal next
		"write|" + checkpointName + "|4",  // both renamed, the journal's checkpoint not written
	} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			cmd, sc := child(t, "kill-at", dir, "OKE_FILE_DRIVER_KILL_AT="+point)
			var said []string
			for sc.Scan() {
				said = append(said, sc.Text())
			}
			err := cmd.Wait()
			if len(said) != 1 || said[0] != "filled" || err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("child said %q and ended with %v; want it killed during Compact", said, err)
			}
			d, err := Open(dir)
			if err != nil {
				t.Fatalf("Open after SIGKILL: %v", err)
			}
			defer closeDriver(t, d)
			ctx := context.Background()
			for i := range crashRows {
				r, err := d.Get(ctx, key(i))
				if err != nil || r.State != driver.Completed || !bytes.Equal(r.Response.Body, response(i).Body) {
					t.Fatalf("key %d = %+v, %v; want its completed response", i, r, err)
				}
				_, steps, err := d.GetRun(ctx, fmt.Sprintf("run-%03d", i))
				if err != nil || len(steps) != 2 {
					t.Fatalf("run %d: %d steps, %v; want 2", i, len(steps), err)
				}
			}
		})
	}
}

// journalChild runs durable runs until killed: each run is created, saves
// four steps (renewing its lease and counting attempts around each, which
// leaves dead records so the journal compacts now and then), claims a key
// and completes. It prints a line after each call that returned.
func journalChild(d *Driver) {
	base, _ := strconv.Atoi(os.Getenv("OKE_FILE_DRIVER_BASE"))
	var mu sync.Mutex // one line at a time on stdout
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	die := func(what string, err error) {
		say("%s error: %v", what, err)
		os.Exit(2)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ctx := context.Background()
			for i := base + w; ; i += 4 {
				id := fmt.Sprintf("run-%d", i)
				if _, err := d.CreateRun(ctx, runOf(id, "child"), time.Minute); err != nil {
					die("create", err)
				}
				say("created %d", i)
				for seq := 1; seq <= 4; seq++ {
					for range 10 {
						if err := d.RenewRun(ctx, id, "child", time.Minute); err != nil {
							die("renew", err)
						}
					}
					if err := d.SaveStep(ctx, id, "child", stepOf(i, seq)); err != nil {
						die("save", err)
					}
					say("step %d %d", i, seq)
				}
				if holder, err := d.ClaimKey(ctx, fmt.Sprintf("order:%d", i), id); err != nil || holder != id {
					die("claim", fmt.Errorf("holder %q, %v", holder, err))
				}
				say("claimed %d", i)
				resp := response(i)
				if err := d.FinishRun(ctx, id, "child", driver.Finish{Status: driver.RunCompleted, Result: &resp}); err != nil {
					die("finish", err)
				}
				d.jr.mu.Lock()
				c := d.jr.compactions
				d.jr.mu.Unlock()
				say("finished %d %d", i, c)
			}
		})
	}
	wg.Wait()
}

// child starts the helper in mode on dir and waits for it to be ready.
func child(t *testing.T, mode, dir string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+mode, "OKE_FILE_DRIVER_DIR="+dir)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("helper did not start: %q %v", sc.Text(), sc.Err())
	}
	return cmd, sc
}

func TestSIGKILLKeepsEveryCompletedResponse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	acked := map[int]bool{}
	compactions := 0 // summed over acknowledgements: only "did any happen" matters
	for round, killAfter := range []int{1, 25, 150, 400, 60} {
		cmd, sc := child(t, "write", dir, fmt.Sprintf("OKE_FILE_DRIVER_BASE=%d", round*1_000_000))
		n := 0
		for sc.Scan() {
			var i, c int
			if _, err := fmt.Sscanf(sc.Text(), "done %d %d", &i, &c); err != nil {
				t.Fatalf("round %d: child said %q", round, sc.Text())
			}
			acked[i] = true
			compactions += c
			if n++; n == killAfter {
				if err := cmd.Process.Kill(); err != nil { // SIGKILL, mid-write
					t.Fatal(err)
				}
			}
		}
		_ = cmd.Wait()

		d, err := Open(dir) // the kernel dropped the dead child's lock
		if err != nil {
			t.Fatalf("round %d: Open after SIGKILL: %v", round, err)
		}
		for i := range acked {
			row, err := d.Get(context.Background(), key(i))
			if err != nil {
				t.Fatalf("round %d: key %d was acknowledged, then lost: %v", round, i, err)
			}
			want := response(i)
			if row.State != driver.Completed || row.Response.Status != want.Status ||
				row.Response.Location != want.Location || !bytes.Equal(row.Response.Body, want.Body) {
				t.Fatalf("round %d: key %d = %+v, want its completed response", round, i, row)
			}
		}
		closeDriver(t, d)
	}
	if compactions == 0 {
		t.Errorf("the children never compacted; the test should crash around compactions too")
	}
	t.Logf("%d acknowledged Completes survived 5 SIGKILLs", len(acked))
}

func TestLockHeldByAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	cmd, _ := child(t, "hold", dir)
	_, err := Open(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while another process holds %s: err = %v, want ErrLocked", dir, err)
	}
	for _, want := range []string{dir, "another process", "pid " + strconv.Itoa(cmd.Process.Pid), "stop the other one"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("lock error %q does not say %q", err, want)
		}
	}
	if _, err := OpenReadOnly(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenReadOnly while another process holds %s: err = %v, want ErrLocked", dir, err)
	}
	// A killed holder leaves no stale lock.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	d, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after the holder was killed: %v", err)
	}
	closeDriver(t, d)
}

func TestSIGKILLKeepsEverySavedStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	var (
		created  = map[int]bool{}
		saved    = map[int]int{} // run → last step acknowledged
		claimed  = map[int]bool{}
		finished = map[int]bool{}
	)
	compactions := 0
	for round, killAfter := range []int{1, 30, 200, 500, 90} {
		cmd, sc := child(t, "journal", dir, fmt.Sprintf("OKE_FILE_DRIVER_BASE=%d", round*1_000_000))
		n := 0
		for sc.Scan() {
			var i, seq, c int
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "created "):
				fmt.Sscanf(line, "created %d", &i)
				created[i] = true
			case strings.HasPrefix(line, "step "):
				fmt.Sscanf(line, "step %d %d", &i, &seq)
				saved[i] = seq
			case strings.HasPrefix(line, "claimed "):
				fmt.Sscanf(line, "claimed %d", &i)
				claimed[i] = true
			case strings.HasPrefix(line, "finished "):
				fmt.Sscanf(line, "finished %d %d", &i, &c)
				finished[i] = true
				compactions += c
			default:
				t.Fatalf("round %d: child said %q", round, line)
			}
			if n++; n == killAfter {
				if err := cmd.Process.Kill(); err != nil { // SIGKILL, mid-run
					t.Fatal(err)
				}
			}
		}
		_ = cmd.Wait()

		d, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: Open after SIGKILL: %v", round, err)
		}
		ctx := context.Background()
		for i := range created {
			id := fmt.Sprintf("run-%d", i)
			run, steps, err := d.GetRun(ctx, id)
			if err != nil {
				t.Fatalf("round %d: %s was created, then lost: %v", round, id, err)
			}
			if len(steps) < saved[i] {
				t.Fatalf("round %d: %s has %d steps, but step %d was acknowledged", round, id, len(steps), saved[i])
			}
			for k, s := range steps {
				if diff := stepsDiff([]driver.Step{s}, []driver.Step{stepOf(i, k+1)}); diff != "" {
					t.Fatalf("round %d: %s step %d: %s", round, id, k+1, diff)
				}
			}
			d.jr.mu.Lock()
			c := d.jr.claims[fmt.Sprintf("order:%d", i)]
			d.jr.mu.Unlock()
			if claimed[i] && (c == nil || c.id != id) {
				t.Fatalf("round %d: %s's claim was acknowledged, then lost (%+v)", round, id, c)
			}
			if finished[i] {
				want := response(i)
				if run.Status != driver.RunCompleted || run.Result == nil || !bytes.Equal(run.Result.Body, want.Body) {
					t.Fatalf("round %d: %s = %v %+v, want its completed response", round, id, run.Status, run.Result)
				}
			}
		}
		closeDriver(t, d)
	}
	if compactions == 0 {
		t.Errorf("the children never compacted the journal; the test should crash around compactions too")
	}
	steps := 0
	for _, n := range saved {
		steps += n
	}
	t.Logf("%d runs, %d acknowledged steps and %d finishes survived 5 SIGKILLs", len(created), steps, len(finished))
}
