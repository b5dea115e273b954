// Package lease keeps leases alive: it renews each one every third of its
// length until stopped, and says when another owner took it. Idempotency
// claims and journal runs both hold one.
//
// Most leases are short-lived: a request or a run usually ends long before
// its lease needs renewing. So a lease costs no timer of its own: all the
// leases of one length share a group, whose single ticker (every sixth of
// the length, running only while the group holds leases) renews those that
// have been held for a third of their length since they were taken or last
// renewed. Starting and stopping a lease is a list insertion and removal
// under the group's lock; no clock is read.
//
// The groups belong to a Pool, which its owner (an oke App) closes when it
// closes: then no ticker or renewal is left running.
package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/okengine/oke/driver"
)

// Holder is what a Keeper renews: a lease and what to do when renewal fails.
type Holder interface {
	// Renew extends the lease to now+lease.
	Renew(ctx context.Context, lease time.Duration) error
	// Lost is called once, when Renew returned driver.ErrNotOwner: renewal
	// has ended.
	Lost()
	// RenewFailed is called with any other error of Renew; renewal goes on.
	RenewFailed(err error)
}

// Keeper renews one lease in the background. It may be embedded in the
// holder's own struct (the zero value is ready for Start).
type Keeper struct {
	g *group
	h Holder

	// Guarded by g.mu.
	prev, next *Keeper
	listed     bool   // in g's list
	since      uint64 // g's tick count when taken or last renewed
	renewing   bool   // a renewal is under way
	stopped    bool
}

// Start starts renewing h's lease of length lease, in p: every lease/3
// (within a sixth of the lease), h.Renew is called with lease. When Renew
// returns driver.ErrNotOwner, renewal ends and h.Lost is called; any other
// error goes to h.RenewFailed and renewal goes on. A Keeper is started
// once. In a closed pool the lease is not renewed.
func (k *Keeper) Start(p *Pool, lease time.Duration, h Holder) {
	g := p.groupFor(lease)
	k.g, k.h = g, h
	g.mu.Lock()
	k.since = g.ticks
	g.push(k)
	if !g.running && p.start() {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
}

// Stop ends renewal. A renewal already under way may still complete.
func (k *Keeper) Stop() {
	g := k.g
	if g == nil {
		return
	}
	g.mu.Lock()
	k.stopped = true
	g.remove(k)
	g.mu.Unlock()
}

// Stopped reports whether Stop was called.
func (k *Keeper) Stopped() bool {
	if k.g == nil {
		return false
	}
	k.g.mu.Lock()
	defer k.g.mu.Unlock()
	return k.stopped
}

// Keep starts renewing with functions: renew is called every lease/3 with
// the lease to set. When renew returns driver.ErrNotOwner, renewal ends and
// onLost is called; any other error is passed to onErr (either may be nil)
// and renewal goes on.
func Keep(p *Pool, lease time.Duration, renew func(ctx context.Context, lease time.Duration) error, onLost func(), onErr func(error)) *Keeper {
	f := &funcs{renew: renew, onLost: onLost, onErr: onErr}
	f.k.Start(p, lease, f)
	return &f.k
}

type funcs struct {
	k      Keeper
	renew  func(ctx context.Context, lease time.Duration) error
	onLost func()
	onErr  func(error)
}

func (f *funcs) Renew(ctx context.Context, lease time.Duration) error { return f.renew(ctx, lease) }

func (f *funcs) Lost() {
	if f.onLost != nil {
		f.onLost()
	}
}

func (f *funcs) RenewFailed(err error) {
	if f.onErr != nil {
		f.onErr(err)
	}
}

// Pool holds the groups of leases of one owner (an App). The zero value is
// not ready: use NewPool.
type Pool struct {
	groups sync.Map // time.Duration → *group
	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// NewPool returns an open pool.
func NewPool() *Pool { return &Pool{done: make(chan struct{})} }

// start accounts for a goroutine of the pool about to start, unless the
// pool is closed.
func (p *Pool) start() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// Close stops every ticker of the pool and waits for them, and for the
// renewals under way, to return. Leases still held are no longer renewed.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// group holds the leases of one length and renews them.
type group struct {
	pool  *Pool
	lease time.Duration

	mu      sync.Mutex
	head    Keeper // sentinel of a circular list
	ticks   uint64 // ticks so far
	running bool   // run's goroutine is live
}

// ticksPerRenewal: a lease is renewed once it has been held this many ticks
// (a tick is lease/6): between lease/6 and lease/3 after it was taken, then
// every lease/3.
const ticksPerRenewal = 2

// idleTicks: the ticker stops after this many ticks with no lease held.
const idleTicks = 6

func (p *Pool) groupFor(lease time.Duration) *group {
	if g, ok := p.groups.Load(lease); ok {
		return g.(*group)
	}
	g := &group{pool: p, lease: lease}
	g.head.prev, g.head.next = &g.head, &g.head
	v, _ := p.groups.LoadOrStore(lease, g)
	return v.(*group)
}

func (g *group) push(k *Keeper) {
	k.prev, k.next = g.head.prev, &g.head
	g.head.prev.next = k
	g.head.prev = k
	k.listed = true
}

func (g *group) remove(k *Keeper) {
	if !k.listed {
		return
	}
	k.prev.next = k.next
	k.next.prev = k.prev
	k.prev, k.next = nil, nil
	k.listed = false
}

// run ticks every lease/6 while the group holds leases, and a little
// longer, until the pool closes.
func (g *group) run() {
	defer g.pool.wg.Done()
	period := max(g.lease/(3*ticksPerRenewal), time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-t.C:
		case <-g.pool.done:
			g.mu.Lock()
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Lock()
		g.ticks++
		if g.head.next == &g.head {
			if idle++; idle >= idleTicks {
				g.running = false
				g.mu.Unlock()
				return
			}
		} else {
			idle = 0
		}
		for k := g.head.next; k != &g.head; k = k.next {
			if !k.renewing && g.ticks-k.since >= ticksPerRenewal && g.pool.start() {
				k.renewing = true
				go g.renew(k)
			}
		}
		g.mu.Unlock()
	}
}

// renew renews k's lease once.
func (g *group) renew(k *Keeper) {
	defer g.pool.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), g.lease/3)
	err := k.h.Renew(ctx, g.lease)
	cancel()
	g.mu.Lock()
	k.renewing = false
	k.since = g.ticks
	stopped := k.stopped
	lost := errors.Is(err, driver.ErrNotOwner)
	if lost {
		g.remove(k)
	}
	g.mu.Unlock()
	switch {
	case stopped:
	case lost:
		k.h.Lost()
	case err != nil:
		k.h.RenewFailed(err)
	}
}
