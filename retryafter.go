package oke

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/internal/idem"
)

// Retry-After of a 409 IdempotencyInProgress. Spec 004 bounds it by the
// holder's lease: a retry later than that finds the row completed, or
// taken over if its holder died. But the lease (30 s) is no guess of when
// the holder will be done: on a flow that takes milliseconds, a client
// honouring "Retry-After: 30" waits thirty seconds for an answer that was
// there at once. So the app keeps, per flow and in memory, a moving average
// of how long the flow's keyed executions took here (flowPace), and says
// that: Retry-After is the flow's recent duration, rounded up to whole
// seconds, at least 1, and never more than the lease's remaining time (the
// spec's value, which it says while the flow has no duration yet). A
// holder whose claim is held by its transaction has no lease to count
// down: the bound is then the lease itself (and 1 s without a duration).

// paceWeight is the weight of the newest duration in the moving average,
// as 1/paceWeight: it follows a change of pace within a few executions.
const paceWeight = 4

// flowPace is the moving average of a flow's recent keyed execution
// durations in this app.
type flowPace struct {
	avg atomic.Int64 // nanoseconds; 0 while there is none
}

// observe adds one execution's duration.
func (p *flowPace) observe(d time.Duration) {
	if d <= 0 {
		d = 1 // an execution faster than the clock ticks still counts
	}
	for {
		old := p.avg.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/paceWeight
		}
		if next <= 0 {
			next = 1
		}
		if p.avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// estimate is the moving average; ok is false before any execution.
func (p *flowPace) estimate() (time.Duration, bool) {
	d := time.Duration(p.avg.Load())
	return d, d > 0
}

// paces holds an app's flowPace per flow name.
type paces struct {
	m sync.Map // flow name → *flowPace
	// now is the clock executions are timed with; nil means time.Now
	// (tests set a fake one).
	now func() time.Time
}

func (ps *paces) of(name string) *flowPace {
	if p, ok := ps.m.Load(name); ok {
		return p.(*flowPace)
	}
	p, _ := ps.m.LoadOrStore(name, &flowPace{})
	return p.(*flowPace)
}

func (ps *paces) clock() time.Time {
	if ps.now != nil {
		return ps.now()
	}
	return time.Now()
}

// timeRun starts timing an execution of f that holds its key; its end
// adds the execution's duration to f's pace. It is a value, not a closure,
// so that timing costs no allocation.
func (a *App) timeRun(f *flow) runTimer {
	return runTimer{ps: &a.paces, flow: f.name, start: a.paces.clock()}
}

// runTimer times one execution (timeRun).
type runTimer struct {
	ps    *paces
	flow  string
	start time.Time
}

// end adds the execution's duration to its flow's pace.
func (t runTimer) end() { t.ps.of(t.flow).observe(t.ps.clock().Sub(t.start)) }

// retryAfter is the Retry-After of a 409 IdempotencyInProgress of flow f
// whose claim decided dec: f's recent execution duration, at least 1 s and
// at most the holder's remaining lease (dec.RetryAfter), both in whole
// seconds — or at most the lease when the holder's claim is held by its
// transaction, which has none to count down; dec.RetryAfter while f has no
// duration yet.
func (a *App) retryAfter(f *flow, dec idem.Decision) time.Duration {
	est, ok := a.paces.of(f.name).estimate()
	if !ok {
		return dec.RetryAfter
	}
	bound := dec.RetryAfter
	if dec.HeldInTx {
		bound = a.cfg.Lease
	}
	return min(roundUpSecond(est), roundUpSecond(bound))
}

// roundUpSecond rounds d up to whole seconds, at least one.
func roundUpSecond(d time.Duration) time.Duration {
	if d <= time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}
