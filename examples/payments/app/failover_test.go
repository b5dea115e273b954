package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/pgcluster"
)

// Postgres failover under load (issue 21): the demo on a primary with a
// synchronous streaming replica, through a multi-host DSN with
// target_session_attrs=read-write. Charges with fresh keys run while the
// primary is killed and the replica promoted; the load goes on until
// charges succeed again on the new primary. Then: every acknowledged key
// replays its first answer, every key that was not acknowledged succeeds on
// a retry with the same key, and the charges table holds exactly one charge
// per key — nothing acknowledged was lost, nothing ran twice.

// failoverAttempt is one request of the load.
type failoverAttempt struct {
	key      string
	status   int // 0: no answer (transport error)
	code     string
	body     []byte
	replayed bool
	sent, at time.Time // when it was sent, and answered (or failed)
}

// failoverRecorder records the load's attempts and tells the test when
// enough charges were acknowledged.
type failoverRecorder struct {
	mu       sync.Mutex
	attempts []failoverAttempt
	first    map[string]failoverAttempt // key → its first (and only) attempt of the load
	acked    int
	waiters  []ackWaiter
}

type ackWaiter struct {
	n  int
	ch chan struct{}
}

func (r *failoverRecorder) record(a failoverAttempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, a)
	r.first[a.key] = a
	if a.status/100 == 2 {
		r.acked++
	}
	keep := r.waiters[:0]
	for _, w := range r.waiters {
		if r.acked >= w.n {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	r.waiters = keep
}

// ackedAtLeast returns a channel closed once n charges were acknowledged.
func (r *failoverRecorder) ackedAtLeast(n int) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	if r.acked >= n {
		close(ch)
	} else {
		r.waiters = append(r.waiters, ackWaiter{n, ch})
	}
	return ch
}

func (r *failoverRecorder) ackedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// chargeOnce posts one charge and reads the whole answer.
func chargeOnce(ctx context.Context, client *http.Client, base, key string) failoverAttempt {
	a := failoverAttempt{key: key, sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/charges", strings.NewReader(`{"amount":700,"currency":"usd"}`))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	a.at = time.Now()
	if err != nil {
		return a
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return a
	}
	a.status, a.body = resp.StatusCode, b
	a.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if a.status/100 != 2 {
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &env)
		a.code = env.Error.Code
	}
	return a
}

// TestPostgresFailover fails the primary over twice: killed (its processes
// gone, its connections reset at once) and hung (SIGSTOP: its connections
// stay open and answer nothing, and new ones are accepted by the kernel and
// get no answer — a host that froze or was partitioned away). The hung case
// recovers through the store deadlines (oke.Config.StoreTimeout) and the
// driver's connect timeout (postgres.DefaultConnectTimeout).
func TestPostgresFailover(t *testing.T) {
	pgcluster.Require(t)
	t.Run("primary killed", func(t *testing.T) {
		testFailover(t, (*pgcluster.Cluster).Kill)
	})
	t.Run("primary hung", func(t *testing.T) {
		testFailover(t, (*pgcluster.Cluster).Pause)
	})
}

func testFailover(t *testing.T, fail func(*pgcluster.Cluster) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	primary, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Close() })
	replica, err := primary.StartReplica(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })

	dsn := pgcluster.MultiHostDSN("test", primary, replica) + "&pool_max_conns=4"
	e, _ := openEnv(t, newConfig(t, func(c *app.Config) { c.Postgres = dsn }))

	// The load: workers each send charges with fresh keys, one at a time,
	// until stop is closed.
	const (
		workers      = 6
		before       = 60 // acknowledged charges before the primary dies
		afterRecover = 60 // acknowledged charges after the promotion
	)
	rec := &failoverRecorder{first: map[string]failoverAttempt{}}
	// A request on a connection to a hung primary waits until the client
	// gives up (which cancels its store calls).
	client := &http.Client{Timeout: 10 * time.Second}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rec.record(chargeOnce(ctx, client, e.url, fmt.Sprintf("failover-key-%02d-%06d", w, i)))
			}
		})
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	select {
	case <-rec.ackedAtLeast(before):
	case <-ctx.Done():
		t.Fatalf("only %d charges acknowledged before the failover", rec.ackedCount())
	}
	killedAt := time.Now()
	if err := fail(primary); err != nil {
		t.Fatal(err)
	}
	downAt := time.Now() // the primary is gone (killed) or hangs
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promotedAt := time.Now()
	ackedAtPromotion := rec.ackedCount()
	select {
	case <-rec.ackedAtLeast(ackedAtPromotion + afterRecover):
	case <-ctx.Done():
		stopLoad()
		t.Fatalf("charges do not succeed again after the promotion: %d acknowledged since\n%s", rec.ackedCount()-ackedAtPromotion, summarizeFailures(rec.attempts, killedAt))
	}
	stopLoad()

	// What the load saw.
	var acked, failedAfterKill int
	var recoveredAt time.Time
	for _, a := range rec.attempts {
		ok := a.status/100 == 2
		if ok {
			acked++
			if a.replayed {
				t.Errorf("key %s: a fresh key's first answer says Idempotent-Replayed", a.key)
			}
		}
		if a.at.After(killedAt) {
			if !ok {
				failedAfterKill++
			} else if a.sent.After(downAt) && (recoveredAt.IsZero() || a.at.Before(recoveredAt)) {
				recoveredAt = a.at
			}
		}
		if !ok && a.status != 0 && a.status != 503 {
			t.Errorf("key %s: %d %s during the failover: want 503 (StoreUnavailable, OutcomeUnknown or Unavailable) or no answer", a.key, a.status, a.body)
		}
		if a.status == 503 && a.code != "StoreUnavailable" && a.code != "OutcomeUnknown" && a.code != "Unavailable" {
			t.Errorf("key %s: 503 %q: want StoreUnavailable, OutcomeUnknown or Unavailable", a.key, a.code)
		}
	}
	t.Logf("failover: %d requests, %d acknowledged, %d failed after the fault (%s); the promotion took %v; the first charge sent after the fault was acknowledged %v after it",
		len(rec.attempts), acked, failedAfterKill, summarizeFailures(rec.attempts, killedAt),
		promotedAt.Sub(downAt).Round(time.Millisecond), recoveredAt.Sub(downAt).Round(time.Millisecond))

	// Every key again, with the same key and body: an acknowledged one
	// replays its first answer; one that was not gets its charge now (or
	// the one it got before its answer was lost).
	final := map[string]app.Charge{}
	keys := make([]string, 0, len(rec.first))
	for k := range rec.first {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		first := rec.first[k]
		var a failoverAttempt
		for try := 0; ; try++ {
			a = chargeOnce(ctx, client, e.url, k)
			if a.status/100 == 2 || ctx.Err() != nil || try == 100 {
				break
			}
			time.Sleep(50 * time.Millisecond) // a backoff between retries, not a synchronisation
		}
		if a.status/100 != 2 {
			t.Fatalf("key %s: a retry after the failover got %d %s", k, a.status, a.body)
		}
		if first.status/100 == 2 {
			if !a.replayed || string(a.body) != string(first.body) || a.status != first.status {
				t.Errorf("acknowledged key %s: first answer %d %s, retry %d %s (replayed %v): want the first answer replayed",
					k, first.status, first.body, a.status, a.body, a.replayed)
			}
		}
		var c app.Charge
		if err := json.Unmarshal(a.body, &c); err != nil || c.ID == "" {
			t.Fatalf("key %s: answer %s: %v", k, a.body, err)
		}
		final[k] = c
	}

	// The effects: exactly one charge per key, the one its answer names.
	got, err := replica.Query(ctx, "test", `SELECT count(*) FROM charges`)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for k, c := range final {
		if other, dup := ids[c.ID]; dup {
			t.Errorf("keys %s and %s answer the same charge %s", k, other, c.ID)
		}
		ids[c.ID] = k
	}
	if got != fmt.Sprint(len(final)) {
		t.Errorf("charges table holds %s charges for %d keys: want one per key (none lost, none run twice)", got, len(final))
	}
	missing, err := replica.Query(ctx, "test", `SELECT count(*) FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM charges c WHERE c.id = a.id)`, mapKeys(ids))
	if err != nil {
		t.Fatal(err)
	}
	if missing != "0" {
		t.Errorf("%s answered charges are not in the charges table", missing)
	}

	// The driver's wake-up listener found the new primary: a LISTEN
	// connection of the demo runs on it.
	awaitFailover(t, ctx, "the wake-up listener to LISTEN on the new primary", func() bool {
		n, err := replica.Query(ctx, "test", `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %oke_due%'`)
		return err == nil && n == "1"
	})
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// summarizeFailures counts the failed attempts after t by answer: "503
// StoreUnavailable: 12, no answer: 3".
func summarizeFailures(attempts []failoverAttempt, after time.Time) string {
	n := map[string]int{}
	for _, a := range attempts {
		if !a.at.After(after) || a.status/100 == 2 {
			continue
		}
		switch {
		case a.status == 0:
			n["no answer"]++
		default:
			n[strings.TrimSpace(fmt.Sprintf("%d %s", a.status, a.code))]++
		}
	}
	var parts []string
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "no failures"
	}
	return strings.Join(parts, ", ")
}

// awaitFailover polls cond until it holds, failing the test when ctx ends first.
func awaitFailover(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
