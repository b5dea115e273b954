package oke

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/idem"
)

// Waiting for the answer (RFC 7240 "Prefer: wait=N"). A request whose key is
// in progress gets 409 IdempotencyInProgress with Retry-After — spec 004's
// answer, and still the answer without the header. With "Prefer: wait=N" the
// app instead holds the request until the first request with the key
// finishes, and answers its stored response (Idempotent-Replayed: true), or
// until N seconds pass (then the 409 as usual). It answers
// "Preference-Applied: wait=N" when it held the request.

// maxWait caps Prefer: wait (RFC 7240 lets the server choose; 60 s is
// DESIGN.md's bound).
const maxWait = 60 * time.Second

// preferWait reads "Prefer: wait=N" (seconds; above 60 means 60) from r; 0
// when absent or malformed. It reads RFC 7240's grammar: any number of
// Prefer headers, each a comma-separated list of preferences
// ("return=minimal, wait=10"), a preference's name in any case, its value a
// token or a quoted string, parameters after ";" ignored, whitespace around
// "=" and ";" allowed. The first wait preference counts.
func preferWait(r *http.Request) time.Duration {
	for _, v := range r.Header.Values("Prefer") {
		for _, p := range splitPrefer(v) {
			name, val, _ := strings.Cut(p, "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			val = unquote(strings.TrimSpace(val))
			if val == "" || strings.Trim(val, "0123456789") != "" {
				return 0
			}
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil { // more digits than a uint32: a long wait
				return maxWait
			}
			if n == 0 {
				return 0
			}
			return min(time.Duration(n)*time.Second, maxWait)
		}
	}
	return 0
}

// splitPrefer splits one Prefer header into its preferences, each without
// its parameters (after ";"), on the commas outside quoted strings.
func splitPrefer(v string) []string {
	var (
		out    []string
		start  int
		quoted bool
		params = -1 // where the current preference's ";" is
	)
	end := func(i int) {
		stop := i
		if params >= 0 {
			stop = params
		}
		if p := strings.TrimSpace(v[start:stop]); p != "" {
			out = append(out, p)
		}
		start, params = i+1, -1
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == ';' && params < 0:
			params = i
		case c == ',':
			end(i)
		}
	}
	end(len(v))
	return out
}

// unquote returns a quoted-string's content (RFC 9110), or s as it is.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// completions wakes the requests of this process that wait for a key to
// complete: a completion here is seen at once; one in another process is
// seen by polling the row.
type completions = waiters[driver.Key]

// runEnds wakes the waiters of this process (Prefer: wait on a parked
// durable run's key, App.AwaitRun) when a run ends here.
type runEnds = waiters[string]

// waiters wakes the goroutines of this process that wait for something
// named by a K (a key, a run ID) to change.
type waiters[K comparable] struct {
	waiting atomic.Int64 // waiters right now; done costs nothing when 0
	mu      sync.Mutex
	byKey   map[K]*keyWaiters
}

type keyWaiters struct {
	ch chan struct{}
	n  int // waiters of ch
}

// watch returns a channel closed when key changes in this process, and a
// function to call when done waiting (it forgets the key once its last
// waiter is done).
func (c *waiters[K]) watch(key K) (<-chan struct{}, func()) {
	c.waiting.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = make(map[K]*keyWaiters)
	}
	kw, ok := c.byKey[key]
	if !ok {
		kw = &keyWaiters{ch: make(chan struct{})}
		c.byKey[key] = kw
	}
	kw.n++
	return kw.ch, func() {
		c.waiting.Add(-1)
		c.mu.Lock()
		defer c.mu.Unlock()
		if kw.n--; kw.n == 0 && c.byKey[key] == kw {
			delete(c.byKey, key)
		}
	}
}

// done tells the waiters of key, if any, that it changed.
func (c *waiters[K]) done(key K) {
	if c.waiting.Load() == 0 {
		return
	}
	c.mu.Lock()
	kw, ok := c.byKey[key]
	if ok {
		delete(c.byKey, key)
	}
	c.mu.Unlock()
	if ok {
		close(kw.ch)
	}
}

// waitPoll bounds how long a waiting request goes without reading the row
// (Config.WaitPollInterval): the first reads come quickly, then every
// waitPollMax, or waitPollHeard while the driver's notifications of
// completions in other processes are heard (the poll is then only the
// fallback, for a notification lost).
const (
	waitPollMin   = 20 * time.Millisecond
	waitPollMax   = 250 * time.Millisecond
	waitPollHeard = time.Second
)

// awaitKey holds a request whose key is in progress (dec) for up to wait,
// reading the key's row when this process completes it, when the driver
// notifies a completion in another process (driver.KeyWaiter), and every
// few hundred milliseconds otherwise. It returns the decision to answer:
// the replay once the row is completed, 422 if the key went to another
// request, else dec (409) when the time is up or the client left. held
// reports whether it held the request at all.
func (a *App) awaitKey(ctx context.Context, f *flow, key driver.Key, fp string, wait time.Duration, dec idem.Decision) (idem.Decision, bool) {
	if wait <= 0 || dec.Outcome != idem.InProgress {
		return dec, false
	}
	f.metrics.waiting.Inc()
	defer f.metrics.waiting.Dec()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// read reads the row; done is set when it answers the request.
	read := func() (done bool) {
		now, ok, err := a.engine.Current(context.WithoutCancel(ctx), key, fp)
		if err != nil || !ok {
			return false // unreadable, or no row yet (a claim held by a transaction): keep waiting
		}
		if now.Outcome == idem.Replay || now.Outcome == idem.Reused {
			dec = now
			return true
		}
		dec = now // still running: its latest Retry-After
		return false
	}
	var remote <-chan struct{} // nil (never ready) without a KeyWaiter
	if a.waiter != nil {
		c, stop := a.waiter.WaitFor(ctx, key)
		defer stop()
		remote = c
		// The key may have completed between the claim and the
		// announcement of the wait, unnotified: look once now.
		if read() {
			return dec, true
		}
	}
	poll := min(waitPollMin, a.waitPollMax())
	for {
		changed, stop := a.done.watch(key)
		var tick <-chan time.Time // nil (never ready) when not polling
		var t *time.Timer
		if poll > 0 {
			t = time.NewTimer(poll)
			tick = t.C
		}
		by := ""
		select {
		case <-changed:
			by = wakeLocal
		case <-remote:
			by = wakeNotify
		case <-tick:
			by = wakePoll
		case <-deadline.C:
		case <-ctx.Done():
		case <-a.stop: // the app closes: answer now, do not hold Close up
		}
		if t != nil {
			t.Stop()
		}
		stop()
		if by == "" {
			return dec, true
		}
		f.metrics.wakeups[by].Inc()
		if poll > 0 {
			poll = min(2*poll, a.waitPollMax())
		}
		if read() {
			return dec, true
		}
	}
}

// waitPollMax is the longest a waiting request goes without reading its
// key's row; zero or less: it reads it only when told.
func (a *App) waitPollMax() time.Duration {
	switch p := a.cfg.WaitPollInterval; {
	case p != 0:
		return p
	case a.waiter != nil && a.waiter.Hearing():
		return waitPollHeard
	}
	return waitPollMax
}
