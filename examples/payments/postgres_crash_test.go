package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSIGKILLWhileChargingOnPostgres kills a real demo process on -postgres
// with SIGKILL while eight clients charge, each request with a key and an
// amount of its own, at a random moment 20–300ms after its first 201, and
// restarts it on the same database, over and over. Then every key that was
// sent is sent once more to a live process, waiting out the lease of a
// request the kill cut off. The database must agree with the answers:
//
//   - a key that got a 201 before a kill replays it, byte for byte;
//   - every key ends with a 201 and exactly one charge row, the one its
//     answer names: a kill never leaves a charge without its stored
//     response (its retry would charge again), and never doubles one.
//
// The charges table records no key; the amount, unique per key, tells
// which key a row charged.
//
// It runs twice: as the demo runs by default (payments.charge's claim
// picked by oke: held in the charge's transaction when its contract allows,
// and a kill then leaves nothing of it), and with -claim-first, the claim
// made before the flow runs (a row with a lease).
func TestSIGKILLWhileChargingOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real process over and over")
	}
	t.Run("default claim", func(t *testing.T) { chargeUnderKills(t) })
	t.Run("claim first", func(t *testing.T) { chargeUnderKills(t, "-claim-first") })
}

func chargeUnderKills(t *testing.T, extra ...string) {
	start := time.Now()
	bin := demoBinary(t)
	pg := newPgDatabase(t, 1) // fails when no Postgres server answers
	data := t.TempDir()
	flags := func(dsn string) []string {
		return append([]string{"-postgres", dsn, "-lease", "1s", "-poll", "50ms"}, extra...)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	const workers = 8

	var (
		log     demoLog // every process's stderr
		mu      sync.Mutex
		seq     int
		amounts = map[string]int{} // every key sent → its amount
		acked   = map[string]ack{} // keys whose 201 a client saw
		odd     []string           // answers other than 201 from a live process
	)
	rounds := crashRounds(t)
	for round := range rounds {
		dsn, done := pg.demoDSN(t)
		cmd, base := startLoggedDemo(t, bin, data, &log, flags(dsn)...)
		ctx, cancel := context.WithCancel(context.Background())
		charging := make(chan struct{}) // closed on the round's first 201
		var once sync.Once
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					mu.Lock()
					seq++
					key := fmt.Sprintf("pg-crash-%03d-%07d-%08x", round, seq, rand.Uint32())
					amount := 1000 + seq
					amounts[key] = amount
					mu.Unlock()
					resp, body, err := postCharge(ctx, hc, base, key, amount)
					if err != nil {
						return // cut off by the kill: not acknowledged, and the process is gone
					}
					if resp.StatusCode != 201 {
						mu.Lock()
						odd = append(odd, fmt.Sprintf("%s: %d %s", key, resp.StatusCode, strings.TrimSpace(body)))
						mu.Unlock()
						continue
					}
					mu.Lock()
					acked[key] = ack{body: body, location: resp.Header.Get("Location")}
					mu.Unlock()
					once.Do(func() { close(charging) })
				}
			})
		}
		// Once it charges (its pools are warm), kill it at a random moment.
		select {
		case <-charging:
		case <-time.After(30 * time.Second):
			kill(t, cmd)
			lines := log.matching("")
			t.Fatalf("round %d: no charge answered 201 within 30s; the demo's last lines:\n%s", round, strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
		time.Sleep(time.Duration(20+rand.IntN(281)) * time.Millisecond)
		kill(t, cmd)
		cancel()
		wg.Wait()
		done() // its backends gone before the next one starts
	}

	// A live process answers every key once more.
	dsn, _ := pg.demoDSN(t)
	cmd, base := startLoggedDemo(t, bin, data, &log, flags(dsn)...)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	final := settleKeys(base, amounts, workers)

	var notReplayed []string
	for key, want := range acked {
		f := final[key]
		if f.status != 201 || !f.replayed || f.body != want.body || f.location != want.location {
			notReplayed = append(notReplayed, fmt.Sprintf("%s: acknowledged 201 %s, the retry got %d replayed=%v %s (%v)",
				key, strings.TrimSpace(want.body), f.status, f.replayed, strings.TrimSpace(f.body), f.err))
		}
	}
	l := checkLedger(amounts, final, pg.chargeRows(t))
	t.Logf("%d kills in %s: %d keys sent, %d acknowledged with 201 before a kill, %d ended with 201, %d charge rows, %d keys charged twice, %d acknowledged keys not replayed",
		rounds, time.Since(start).Round(time.Millisecond), len(amounts), len(acked), l.keys201, l.rows, len(l.doubled), len(notReplayed))
	report(t, "keys charged twice (a charge committed without its stored response; the retry charged again)", l.doubled)
	report(t, "acknowledged keys whose retry did not replay the answer", notReplayed)
	report(t, "answers other than 201 during the load (a process that answers has no reason to refuse a fresh key)", odd)
	report(t, "other differences between the answers and the charges table", l.problems)
	if l.rows != l.keys201 {
		t.Errorf("%d charge rows for %d keys that ended with a 201, want one each", l.rows, l.keys201)
	}
}

// report fails t with what went wrong, the first ten lines of it.
func report(t *testing.T, what string, lines []string) {
	t.Helper()
	if len(lines) == 0 {
		return
	}
	n, more := len(lines), ""
	if n > 10 {
		more = fmt.Sprintf("\n\t… and %d more", len(lines)-10)
		lines = lines[:10]
	}
	t.Errorf("%d %s:\n\t%s%s", n, what, strings.Join(lines, "\n\t"), more)
}
