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
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// These tests run this test binary again as a child process (TestHelperProcess)
// and kill it with SIGKILL. They do not run in parallel with other tests: a
// fork holds copies of the other tests' lock files until its exec, which
// makes their reopens wait (see lockWait).

const helperEnv = "OKE_FILE_DRIVER_HELPER"

// TestHelperProcess is the child. It is not a test on its own.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process for the crash tests")
	}
	dir := os.Getenv("OKE_FILE_DRIVER_DIR")
	d, err := Open(dir, WithCompactAfter(50))
	if err != nil {
		fmt.Printf("open error: %v\n", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	switch mode {
	case "hold":
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
	}
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
