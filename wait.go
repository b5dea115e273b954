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

// waitPoll bounds how long a waited key goes without its row being read
// (Config.WaitPollInterval): the first reads come quickly, then every
// waitPollMax, or waitPollHeard while the driver's notifications of
// completions in other processes are heard (the poll is then only the
// safety net, for a notification lost). The reads are the key's, not each
// request's: one watcher reads the row for every request held for it.
const (
	waitPollMin   = 20 * time.Millisecond
	waitPollMax   = 250 * time.Millisecond
	waitPollHeard = 5 * time.Second
)

// waitReannounce is how often a key's watcher announces its wait to the
// driver again (driver.KeyWaiter.WaitFor) while requests keep being held
// for it: the other instances forget a wait they heard after a while
// (Postgres: two minutes), and a key may stay waited for longer.
const waitReannounce = 30 * time.Second

// The default caps of Prefer: wait (Config.MaxWaitersPerKey, MaxWaiters):
// MaxWaiters is a quarter of Config.MaxInFlight, whose places the held
// requests take too (so waiting cannot take them all), or defaultMaxWaiters
// when that is unbounded.
const (
	defaultMaxWaitersPerKey = 32
	defaultMaxWaiters       = 1024
)

// keyWaits holds the requests of an app held by Prefer: wait for a key in
// progress, grouped by key (and fingerprint): each group has one watcher, a
// goroutine that announces the wait to the driver once, reads the key's row
// when told it changed (a completion here, the driver's notification of one
// elsewhere) or by a slow poll, and hands the answer to all of the group's
// requests at once. A request past the caps is not held.
//
// On a driver that reads many rows at once (driver.RowsGetter: Postgres),
// a watcher polls only early on (a completion may race the announcement of
// the wait); after that, one sweep of the app reads the rows of every
// waited key in one statement, every waitPollMax.
type keyWaits struct {
	mu     sync.Mutex
	groups map[waitID]*waitGroup
	// runHeld counts the requests held for a parked durable run, by key
	// (results.go: each waits on its own).
	runHeld map[driver.Key]int
	held    int        // requests held, over all groups and runHeld
	sweep   *waitSweep // the app's sweep, while groups exist; nil without a RowsGetter
}

// waitSweep is the goroutine of keyWaits' sweep.
type waitSweep struct {
	cancel context.CancelFunc
	exited chan struct{}
}

// waitID names a group: the key, and the fingerprint its requests carry
// (requests with another one are answered 422 without waiting).
type waitID struct {
	key driver.Key
	fp  string
}

// waitGroup is the requests held for one key.
type waitGroup struct {
	f *flow
	n int // requests held in it; under keyWaits.mu
	// dec is the latest decision read from the row (under keyWaits.mu);
	// ready is closed once it answers the requests (a replay, or 422).
	dec    idem.Decision
	ready  chan struct{}
	final  bool
	cancel context.CancelFunc // stops the watcher
	exited chan struct{}      // closed when the watcher has returned
}

// waitCaps are the app's caps on requests held by Prefer: wait, per key and
// in all; zero or less holds none.
func (a *App) waitCaps() (perKey, total int) {
	perKey, total = a.cfg.MaxWaitersPerKey, a.cfg.MaxWaiters
	if perKey == 0 {
		perKey = defaultMaxWaitersPerKey
	}
	if total == 0 {
		total = defaultMaxWaiters
		if n := a.cfg.MaxInFlight; n > 0 {
			total = max(1, n/4)
		}
	}
	return perKey, total
}

// join adds a request whose claim decided dec to the group of id, starting
// its watcher if it has none. ok is false, and the request is not held,
// when the group or the app holds as many requests as the caps allow.
func (a *App) join(f *flow, id waitID, dec idem.Decision) (g *waitGroup, ok bool) {
	perKey, total := a.waitCaps()
	w := &a.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	g = w.groups[id]
	if w.held >= total || (g != nil && g.n >= perKey) || perKey <= 0 {
		return nil, false
	}
	w.held++
	if g != nil {
		g.n++
		if !g.final {
			g.dec = dec // this request's read is the newer one
		}
		return g, true
	}
	ctx, cancel := context.WithCancel(context.Background())
	g = &waitGroup{f: f, n: 1, dec: dec, ready: make(chan struct{}), cancel: cancel, exited: make(chan struct{})}
	if w.groups == nil {
		w.groups = make(map[waitID]*waitGroup)
	}
	w.groups[id] = g
	go a.watchKey(ctx, f, id, g)
	if rg, ok := a.cfg.Driver.(driver.RowsGetter); ok && w.sweep == nil && a.waitPollMax() > 0 {
		sctx, cancel := context.WithCancel(context.Background())
		w.sweep = &waitSweep{cancel: cancel, exited: make(chan struct{})}
		go a.sweepWaits(sctx, w.sweep, rg)
	}
	return g, true
}

// holdForRun counts a request held for the parked durable run of key
// (results by key) against the caps; ok is false past them. release ends
// it.
func (a *App) holdForRun(key driver.Key) (release func(), ok bool) {
	perKey, total := a.waitCaps()
	w := &a.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	if perKey <= 0 || w.held >= total || w.runHeld[key] >= perKey {
		return nil, false
	}
	if w.runHeld == nil {
		w.runHeld = make(map[driver.Key]int)
	}
	w.held++
	w.runHeld[key]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.held--
		if w.runHeld[key]--; w.runHeld[key] <= 0 {
			delete(w.runHeld, key)
		}
	}, true
}

// leave removes a request from group g; the last one to leave stops the
// watcher and waits for it, so that no watcher outlives its requests.
func (a *App) leave(id waitID, g *waitGroup) {
	w := &a.waits
	w.mu.Lock()
	w.held--
	g.n--
	last := g.n == 0
	if last && w.groups[id] == g {
		delete(w.groups, id)
	}
	sweep := w.sweep
	if len(w.groups) > 0 {
		sweep = nil
	}
	if sweep != nil {
		w.sweep = nil
	}
	w.mu.Unlock()
	if last {
		g.cancel()
		<-g.exited
	}
	if sweep != nil {
		sweep.cancel()
		<-sweep.exited
	}
}

// sweepWaits is the app's sweep of the waited keys (keyWaits): every
// waitPollMax, one read of all their rows (rg), and each group whose row
// answers it is settled, until ctx ends.
func (a *App) sweepWaits(ctx context.Context, s *waitSweep, rg driver.RowsGetter) {
	defer close(s.exited)
	var (
		ids []waitID
		gs  []*waitGroup
	)
	for {
		t := time.NewTimer(a.waitPollMax())
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-a.stop:
		}
		t.Stop()
		if ctx.Err() != nil || a.closing.Load() {
			return
		}
		ids, gs = ids[:0], gs[:0]
		a.waits.mu.Lock()
		for id, g := range a.waits.groups {
			if !g.final {
				ids, gs = append(ids, id), append(gs, g)
			}
		}
		a.waits.mu.Unlock()
		keys := make([]driver.Key, 0, len(ids))
		seen := make(map[driver.Key]bool, len(ids))
		for _, id := range ids {
			if !seen[id.key] {
				seen[id.key] = true
				keys = append(keys, id.key)
			}
		}
		bctx, end := a.bound(ctx, "get_rows") // Config.StoreTimeout, as every store call
		rows, err := rg.GetRows(bctx, keys)
		if err = end(err); err != nil {
			continue // unreadable: keep waiting, read again next time
		}
		byKey := make(map[driver.Key]driver.Row, len(rows))
		for _, r := range rows {
			byKey[r.Key] = r
		}
		now := time.Now()
		for i, id := range ids {
			gs[i].f.metrics.wakeups[wakePoll].Inc()
			if row, ok := byKey[id.key]; ok {
				if dec, ok := a.engine.Decide(id.key, id.fp, row, now); ok {
					a.settle(gs[i], dec)
				}
			}
		}
	}
}

// decision is the latest decision group g read.
func (a *App) decision(g *waitGroup) idem.Decision {
	a.waits.mu.Lock()
	defer a.waits.mu.Unlock()
	return g.dec
}

// settle records a decision read for group g, and answers its requests
// when it is final; it reports whether it was.
func (a *App) settle(g *waitGroup, dec idem.Decision) bool {
	final := dec.Outcome == idem.Replay || dec.Outcome == idem.Reused
	a.waits.mu.Lock()
	defer a.waits.mu.Unlock()
	if g.final {
		return true
	}
	g.dec = dec // still running: its latest Retry-After
	if final {
		g.final = true
		close(g.ready)
	}
	return final
}

// awaitKey holds a request whose key is in progress (dec) for up to wait,
// in the key's group (keyWaits): it returns the decision to answer — the
// replay once the row is completed, 422 if the key went to another request,
// else the latest 409 when the time is up, the client left or the app
// closes. held reports whether it held the request at all: not when it did
// not ask to wait, and not past the caps (Config.MaxWaitersPerKey,
// MaxWaiters), where it gets at once what it would without Prefer: wait.
func (a *App) awaitKey(ctx context.Context, f *flow, key driver.Key, fp string, wait time.Duration, dec idem.Decision) (idem.Decision, bool) {
	if wait <= 0 || dec.Outcome != idem.InProgress {
		return dec, false
	}
	id := waitID{key: key, fp: fp}
	g, ok := a.join(f, id, dec)
	if !ok {
		f.metrics.waitRefused.Inc()
		return dec, false
	}
	defer a.leave(id, g)
	f.metrics.waiting.Inc()
	defer f.metrics.waiting.Dec()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	select {
	case <-g.ready:
	case <-deadline.C:
	case <-ctx.Done():
	case <-a.stop: // the app closes: answer now, do not hold Close up
	}
	return a.decision(g), true
}

// watchKey is the watcher of group g (keyWaits) until ctx ends: it reads
// the key's row when this process completes it, when the driver notifies a
// completion in another process (driver.KeyWaiter: one announcement of the
// wait for the whole group, one notification for all its requests), and
// by a poll that starts quick and slows to the safety net; and it settles
// the group once the row answers it.
func (a *App) watchKey(ctx context.Context, f *flow, id waitID, g *waitGroup) {
	defer close(g.exited)
	read := func() bool {
		now, ok, err := a.engine.Current(ctx, id.key, id.fp)
		f.metrics.waitReads.Inc()
		if err != nil || !ok {
			return false // unreadable, or no row yet (a claim held by a transaction): keep waiting
		}
		return a.settle(g, now)
	}
	var (
		remote  <-chan struct{} // nil (never ready) without a KeyWaiter
		unwait  = func() {}
		renew   <-chan time.Time
		renewal *time.Ticker
	)
	defer func() { unwait() }()
	if a.waiter != nil {
		remote, unwait = a.announce(ctx, id.key)
		renewal = time.NewTicker(waitReannounce)
		defer renewal.Stop()
		renew = renewal.C
	}
	poll := min(waitPollMin, a.waitPollMax())
	by := "" // what woke the watcher; "" the first time
	for {
		// Watch before reading: a completion here between the read and
		// the select is not missed.
		changed, stop := a.done.watch(id.key)
		if by != "" {
			f.metrics.wakeups[by].Inc()
		}
		// The first read also covers a completion between the request's
		// claim and the announcement of the wait, which went unnotified.
		if read() {
			stop()
			return
		}
		var tick <-chan time.Time // nil (never ready) when not polling
		var t *time.Timer
		if poll > 0 {
			t = time.NewTimer(poll)
			tick = t.C
		}
		by = ""
		select {
		case <-changed:
			by = wakeLocal
		case <-remote:
			by = wakeNotify
		case <-tick:
			by = wakePoll
		case <-renew:
			// Announce again before dropping the old announcement, so
			// that the wait is never unannounced; then read, as for a
			// poll (a completion may have raced the announcement).
			c, un := a.announce(ctx, id.key)
			unwait()
			remote, unwait = c, un
			by = wakePoll
		case <-g.ready: // settled by the app's sweep
		case <-ctx.Done():
		case <-a.stop:
		}
		if t != nil {
			t.Stop()
		}
		stop()
		if by == "" {
			return
		}
		switch _, swept := a.cfg.Driver.(driver.RowsGetter); {
		case poll <= 0:
		case swept && poll >= a.waitPollMax():
			poll = 0 // the app's sweep polls the key from now on
		default:
			poll = min(2*poll, a.waitPollMax())
		}
	}
}

// announce announces a wait for key to the driver (driver.KeyWaiter), the
// announcement bounded by Config.StoreTimeout as every store call.
func (a *App) announce(ctx context.Context, key driver.Key) (<-chan struct{}, func()) {
	bctx, end := a.bound(ctx, "wait_for")
	defer end(nil)
	return a.waiter.WaitFor(bctx, key)
}

// waitPollMax is the longest a waited key goes without its row being read;
// zero or less: it is read only when told.
func (a *App) waitPollMax() time.Duration {
	switch p := a.cfg.WaitPollInterval; {
	case p != 0:
		return p
	case a.waiter != nil && a.waiter.Hearing():
		return waitPollHeard
	}
	return waitPollMax
}
