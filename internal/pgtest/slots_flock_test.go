//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package pgtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The budget's slots are flocks: a taker waits for those others hold, and
// gets them when they are freed — by closing, or by the death of the
// process that held them.
func TestSlotsWaitForTheirHolders(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	dir := t.TempDir()
	const budget = 3
	locked := func() int {
		t.Helper()
		n, err := lockedSlots(dir, budget)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A child process holds two slots until it is killed.
	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSlotHolderChild$", "-test.count=1", "-test.v")
	child.Env = append(os.Environ(), childEnv+"=hold", "OKE_PGTEST_SLOTS="+dir)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "holding 2 slots" {
	}
	if n := locked(); n != 2 {
		t.Fatalf("%d slots locked while the child holds 2", n)
	}

	// This process takes the third, then waits for two more.
	release1, err := acquireSlots(t, dir, budget, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		release2, err := acquireSlots(t, dir, budget, 2)
		if err != nil {
			t.Error(err)
		}
		got <- release2
	}()
	select {
	case <-got:
		t.Fatal("took 2 slots of 3 while 3 were held")
	default:
	}
	child.Process.Kill() // the kernel frees its slots
	release2 := <-got
	if n := locked(); n != 3 {
		t.Errorf("%d slots locked after taking 1 and 2, want 3", n)
	}
	release1()
	release2()
	if n := locked(); n != 0 {
		t.Errorf("%d slots locked after both were given back, want 0", n)
	}
}

// TestSlotHolderChild is TestSlotsWaitForTheirHolders' child: it takes two
// slots, says so, and holds them until it is killed.
func TestSlotHolderChild(t *testing.T) {
	if os.Getenv(childEnv) != "hold" {
		return
	}
	if _, err := acquireSlots(t, os.Getenv("OKE_PGTEST_SLOTS"), 3, 2); err != nil {
		t.Fatal(err)
	}
	fmt.Println("holding 2 slots")
	time.Sleep(time.Hour) // until killed
}
