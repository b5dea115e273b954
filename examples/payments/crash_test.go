package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashRounds is how many times the demo is killed; OKE_CRASH_ROUNDS
// overrides it (CI runs the default).
func crashRounds(t *testing.T) int {
	if s := os.Getenv("OKE_CRASH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("OKE_CRASH_ROUNDS=%q: %v", s, err)
		}
		return n
	}
	return 20
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// demoBinary builds the demo once for every test of the package.
func demoBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "oke-payments-"); binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "payments"), ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build the demo: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "payments")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// startDemo runs the demo binary on data, with more flags if given, and
// returns its base URL.
func startDemo(t *testing.T, bin, data string, flags ...string) (*exec.Cmd, string) {
	t.Helper()
	return startLoggedDemo(t, bin, data, new(demoLog), flags...)
}

type ack struct {
	body     string
	location string
}

func postCharge(ctx context.Context, c *http.Client, base, key string, amount int) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/charges",
		strings.NewReader(fmt.Sprintf(`{"amount":%d,"currency":"usd"}`, amount)))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// TestSIGKILLMidWriteKeepsEveryAcknowledgedResponse kills a real demo process
// with SIGKILL while it takes charges, over and over, on one data folder. After
// every restart the file driver must load, and every charge that was
// acknowledged (201 received) must replay byte for byte with
// Idempotent-Replayed: true — never run again, never lost.
func TestSIGKILLMidWriteKeepsEveryAcknowledgedResponse(t *testing.T) {
	bin := demoBinary(t)
	data := t.TempDir()
	client := &http.Client{Timeout: 10 * time.Second}
	acked := map[string]ack{}
	amounts := map[string]int{}
	rounds := crashRounds(t)
	seq := 0
	for round := 0; round < rounds; round++ {
		cmd, base := startDemo(t, bin, data)

		// Every response acknowledged before any earlier kill is still there.
		for key, want := range acked {
			resp, body, err := postCharge(context.Background(), client, base, key, amounts[key])
			if err != nil {
				cmd.Process.Kill()
				t.Fatalf("round %d: retry %s: %v", round, key, err)
			}
			if resp.StatusCode != 201 || body != want.body || resp.Header.Get("Location") != want.location ||
				resp.Header.Get("Idempotent-Replayed") != "true" {
				cmd.Process.Kill()
				t.Fatalf("round %d: key %s acknowledged as %q came back as %d %q (replayed=%q)",
					round, key, want.body, resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"))
			}
		}

		// Load it from four clients, and kill it at a random moment.
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					mu.Lock()
					seq++
					key := fmt.Sprintf("crash-key-%08d-%d", seq, round)
					amount := 100 + seq
					mu.Unlock()
					resp, body, err := postCharge(ctx, client, base, key, amount)
					if err != nil || resp.StatusCode != 201 {
						continue // cut off by the kill: not acknowledged
					}
					mu.Lock()
					acked[key] = ack{body: body, location: resp.Header.Get("Location")}
					amounts[key] = amount
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(20+rand.IntN(200)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		cancel()
		wg.Wait()
	}
	// One last start checks the last round's acknowledgements.
	cmd, base := startDemo(t, bin, data)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	for key, want := range acked {
		resp, body, err := postCharge(context.Background(), client, base, key, amounts[key])
		if err != nil || resp.StatusCode != 201 || body != want.body || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("after the last kill: key %s: %v %v %q, want a replay of %q", key, err, resp, body, want.body)
		}
	}
	if len(acked) < rounds {
		t.Fatalf("only %d charges were acknowledged over %d rounds: the test did not exercise the demo", len(acked), rounds)
	}
	t.Logf("%d kills, %d acknowledged charges, all replayed intact", rounds, len(acked))
}
