package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/examples/payments/app"
)

// durableKills is how many times the pipeline test kills the demo;
// OKE_DURABLE_KILLS overrides it.
func durableKills(t *testing.T) int {
	if s := os.Getenv("OKE_DURABLE_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("OKE_DURABLE_KILLS=%q: want a positive integer", s)
		}
		return n
	}
	return 50
}

// answer is an HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// testAdminToken is the -admin-token every demo process of these tests
// gets; send passes it to the admin API.
const testAdminToken = "test-admin-token-0123456789abcdef"

func send(c *http.Client, method, url, body string, hdr ...string) (answer, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{}, err
	}
	if strings.Contains(url, "/_oke/") {
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// kill SIGKILLs the demo and reaps it.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// retryUntilDone sends the request with key until it gets an answer that is
// not 409 IdempotencyInProgress (the dead process's lease is still live) or
// 503 (fail closed), and returns it.
func retryUntilDone(t *testing.T, c *http.Client, url, body, key string) answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := send(c, "POST", url, body, "Idempotency-Key", key)
		if err == nil && a.status != http.StatusConflict && a.status != http.StatusServiceUnavailable {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("POST %s with key %s: no final answer in 30s (last: %v %d %s)", url, key, err, a.status, a.body)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// pipelineRuns reads the journal runs of demo.pipeline by tag, with their
// steps, through the admin API.
func pipelineRuns(t *testing.T, c *http.Client, base string) map[string]admin.RunView {
	t.Helper()
	a, err := send(c, "GET", base+"/_oke/runs?flow=demo.pipeline&limit=1000", "")
	if err != nil || a.status != 200 {
		t.Fatalf("GET /_oke/runs: %v %d %s", err, a.status, a.body)
	}
	var list struct{ Runs []admin.RunView }
	if err := json.Unmarshal([]byte(a.body), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]admin.RunView{}
	for _, r := range list.Runs {
		var in app.PipelineIn
		b, _ := json.Marshal(r.Input)
		json.Unmarshal(b, &in)
		a, err := send(c, "GET", base+"/_oke/runs/"+r.ID, "")
		if err != nil || a.status != 200 {
			t.Fatalf("GET /_oke/runs/%s: %v %d", r.ID, err, a.status)
		}
		var full admin.RunView
		if err := json.Unmarshal([]byte(a.body), &full); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[in.Tag]; dup {
			t.Fatalf("two runs for pipeline %q: a retried key must resume its run", in.Tag)
		}
		out[in.Tag] = full
	}
	return out
}

// TestSIGKILLMidPipelineRunsOnlyTheCutStepAgain kills a real demo process
// with SIGKILL while a durable pipeline runs, at a random moment, over and
// over (each kill its own pipeline), and restarts it on the same data folder.
// The retried request (same Idempotency-Key) must end with 201 — the run
// picks up, by the scheduler or by the retry — and then replay it. Each
// step's execution count in SQLite must be at least 1, and at most one step
// (the one the kill cut off after its write, before its result was saved)
// may count 2: saved steps never run again.
func TestSIGKILLMidPipelineRunsOnlyTheCutStepAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real process over and over")
	}
	bin := demoBinary(t)
	data := t.TempDir()
	kills := durableKills(t)
	c := &http.Client{Timeout: 10 * time.Second}
	flags := []string{"-lease", "1s", "-poll", "20ms"}
	const steps, stepMs = 5, 60
	start := time.Now()

	cmd, base := startDemo(t, bin, data, flags...)
	var (
		ackedBeforeKill int             // the first request got its 201 before the kill
		cut             = map[int]int{} // step that ran twice (0: none) → how often
	)
	for i := 0; i < kills; i++ {
		tag := fmt.Sprintf("kill-%03d", i)
		key := fmt.Sprintf("durable-crash-%03d-%016x", i, rand.Uint64())
		body := fmt.Sprintf(`{"tag":%q,"steps":%d,"stepMs":%d}`, tag, steps, stepMs)

		first := make(chan answer, 1)
		go func() {
			a, err := send(c, "POST", base+"/pipeline", body, "Idempotency-Key", key)
			if err != nil {
				a = answer{}
			}
			first <- a
		}()
		// Anywhere from before the claim to after the last step.
		time.Sleep(time.Duration(rand.IntN((steps*stepMs+150)*1000)) * time.Microsecond)
		kill(t, cmd)
		f := <-first
		cmd, base = startDemo(t, bin, data, flags...)

		got := retryUntilDone(t, c, base+"/pipeline", body, key)
		want := fmt.Sprintf(`{"tag":%q,"steps":%d}`, tag, steps)
		if got.status != 201 || strings.TrimSpace(got.body) != want {
			kill(t, cmd)
			t.Fatalf("kill %d: the retried request got %d %s, want 201 %s", i, got.status, got.body, want)
		}
		if f.status != 0 {
			if f.status != 201 || f.body != got.body {
				kill(t, cmd)
				t.Fatalf("kill %d: the first request got %d %s before the kill, the retry %d %s", i, f.status, f.body, got.status, got.body)
			}
			ackedBeforeKill++
		}
		again, err := send(c, "POST", base+"/pipeline", body, "Idempotency-Key", key)
		if err != nil || again.status != 201 || again.body != got.body || again.header.Get("Idempotent-Replayed") != "true" {
			kill(t, cmd)
			t.Fatalf("kill %d: a further retry: %v %d %s replayed=%q, want a replay of %s", i, err, again.status, again.body, again.header.Get("Idempotent-Replayed"), got.body)
		}

		a, err := send(c, "GET", base+"/pipeline/"+tag, "")
		if err != nil || a.status != 200 {
			kill(t, cmd)
			t.Fatalf("kill %d: GET /pipeline/%s: %v %d", i, tag, err, a.status)
		}
		var log app.PipelineLog
		if err := json.Unmarshal([]byte(a.body), &log); err != nil {
			t.Fatal(err)
		}
		twice := 0
		for j, s := range log.Steps {
			if s.Step != j+1 || s.Executions < 1 || s.Executions > 2 {
				kill(t, cmd)
				t.Fatalf("kill %d: pipeline %s: %s — every step must run once, the cut one at most twice", i, tag, a.body)
			}
			if s.Executions == 2 {
				if twice != 0 {
					kill(t, cmd)
					t.Fatalf("kill %d: pipeline %s: %s — two steps ran twice after one kill; saved steps must not run again", i, tag, a.body)
				}
				twice = s.Step
			}
		}
		if len(log.Steps) != steps {
			kill(t, cmd)
			t.Fatalf("kill %d: pipeline %s: %s — want %d steps", i, tag, a.body, steps)
		}
		cut[twice]++
	}

	// The journal agrees with the counts: one run per pipeline, completed,
	// and a step never counted more executions than its attempts.
	runs := pipelineRuns(t, c, base)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	var hist []string
	if len(runs) != kills {
		t.Fatalf("%d runs for %d pipelines", len(runs), kills)
	}
	resumed := map[string]int{} // the step a kill cut off, by its attempts (none: cut between steps or not at all)
	for tag, run := range runs {
		if run.Status != "completed" || len(run.Steps) != steps {
			t.Fatalf("pipeline %s: run %s %s with %d steps", tag, run.ID, run.Status, len(run.Steps))
		}
		a, _ := send(c, "GET", base+"/pipeline/"+tag, "")
		var log app.PipelineLog
		json.Unmarshal([]byte(a.body), &log)
		where := "none"
		for j, s := range run.Steps {
			if s.Attempts > 2 || log.Steps[j].Executions > s.Attempts {
				t.Fatalf("pipeline %s: step %q: %d attempts in the journal, %d executions counted", tag, s.Name, s.Attempts, log.Steps[j].Executions)
			}
			if s.Attempts == 2 {
				if where != "none" {
					t.Fatalf("pipeline %s: two steps started twice after one kill: %+v", tag, run.Steps)
				}
				where = s.Name
			}
		}
		resumed[where]++
	}
	for k, n := range resumed {
		hist = append(hist, fmt.Sprintf("%s: %d", k, n))
	}
	var twice []string
	for k, n := range cut {
		twice = append(twice, fmt.Sprintf("step %d: %d", k, n))
	}
	sort.Strings(twice)
	sort.Strings(hist)
	t.Logf("%d kills in %s; %d acknowledged before the kill; step cut off mid-run (started twice): %s; step whose write ran twice (0: none): %s",
		kills, time.Since(start).Round(time.Millisecond), ackedBeforeKill, strings.Join(hist, ", "), strings.Join(twice, ", "))
}

// TestSIGKILLWhileParkedInADurableSleep kills the demo while a reminder's
// run sleeps durably; the next process wakes it and sends the reminder.
func TestSIGKILLWhileParkedInADurableSleep(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real process")
	}
	bin := demoBinary(t)
	data := t.TempDir()
	c := &http.Client{Timeout: 10 * time.Second}
	cmd, base := startDemo(t, bin, data, "-lease", "1s", "-poll", "20ms")
	key := fmt.Sprintf("durable-sleep-%016x", rand.Uint64())
	body := `{"to":"parked@example.com","delay":"2s"}`
	a, err := send(c, "POST", base+"/reminders", body, "Idempotency-Key", key)
	if err != nil || a.status != 204 {
		kill(t, cmd)
		t.Fatalf("POST /reminders: %v %d %s, want 204", err, a.status, a.body)
	}
	kill(t, cmd)

	cmd, base = startDemo(t, bin, data, "-lease", "1s", "-poll", "20ms")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	if a, err := send(c, "POST", base+"/reminders", body, "Idempotency-Key", key); err != nil || a.status != 204 || a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after the restart: %v %d replayed=%q, want a replayed 204", err, a.status, a.header.Get("Idempotent-Replayed"))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := send(c, "GET", base+"/reminders", "")
		if err != nil || a.status != 200 {
			t.Fatalf("GET /reminders: %v %d", err, a.status)
		}
		var list app.ReminderList
		json.Unmarshal([]byte(a.body), &list)
		if len(list.Reminders) != 1 || list.Reminders[0].To != "parked@example.com" {
			t.Fatalf("reminders %s, want the one", a.body)
		}
		if list.Reminders[0].Sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reminder was not sent within 30s of the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSIGKILLWhileTheProviderRefunds kills the demo while the refund
// provider holds its call: the next process runs the provider step again
// with the same Idempotency-Key, and the refund is written once.
func TestSIGKILLWhileTheProviderRefunds(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real process")
	}
	var (
		mu      sync.Mutex
		keys    []string
		arrived = make(chan struct{})
		release = make(chan struct{})
		once    sync.Once
	)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		first := len(keys) == 1
		mu.Unlock()
		if first {
			once.Do(func() { close(arrived) })
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"pr_outside"}`)
	}))
	defer prov.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	bin := demoBinary(t)
	data := t.TempDir()
	c := &http.Client{Timeout: 10 * time.Second}
	flags := []string{"-lease", "1s", "-poll", "20ms", "-provider", prov.URL + "/v1/refunds"}
	cmd, base := startDemo(t, bin, data, flags...)
	a, err := send(c, "POST", base+"/charges", `{"amount":4200,"currency":"eur"}`, "Idempotency-Key", fmt.Sprintf("durable-charge-%016x", rand.Uint64()))
	if err != nil || a.status != 201 {
		kill(t, cmd)
		t.Fatalf("POST /charges: %v %d %s", err, a.status, a.body)
	}
	var ch app.Charge
	json.Unmarshal([]byte(a.body), &ch)
	key := fmt.Sprintf("durable-refund-%016x", rand.Uint64())
	body := fmt.Sprintf(`{"chargeId":%q}`, ch.ID)
	go send(c, "POST", base+"/refunds", body, "Idempotency-Key", key)
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		kill(t, cmd)
		t.Fatal("the provider was not called")
	}
	kill(t, cmd) // the provider refunded; the step's result is never saved
	close(release)

	cmd, base = startDemo(t, bin, data, flags...)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	got := retryUntilDone(t, c, base+"/refunds", body, key)
	if got.status != 201 {
		t.Fatalf("the retried refund got %d %s, want 201", got.status, got.body)
	}
	var rf app.Refund
	json.Unmarshal([]byte(got.body), &rf)
	if rf.ProviderID != "pr_outside" || got.header.Get("Location") != "/refunds/"+rf.ID {
		t.Fatalf("refund %s, Location %q", got.body, got.header.Get("Location"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || !strings.HasSuffix(keys[0], "/call the provider") {
		t.Fatalf("the provider saw keys %q: want one step key, twice", keys)
	}
	if a, err := send(c, "GET", base+"/refunds/"+rf.ID, ""); err != nil || a.status != 200 {
		t.Fatalf("GET /refunds/%s: %v %d", rf.ID, err, a.status)
	}
}
