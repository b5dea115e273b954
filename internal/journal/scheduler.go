package journal

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

// Scheduler picks up a journal's due runs and executes them, a bounded
// number at a time: on start (recovery of runs whose lease lapsed), after
// sleeps, after a failed save's retry delay, and new runs. It looks every
// Poll, and when Wake says this process created or parked a run. A journal
// that is a driver.Notifier (Postgres) also wakes it when any process
// enqueues or releases a run, and tells it when the next parked run wakes,
// for which it arms a timer; polling stays as the fallback, and is what
// finds the lapsed leases of crashed instances. While every slot is taken,
// it also looks again whenever a run ends.
//
// It holds no rule of what a run is: Run executes one due run by its ID
// (acquiring it, which may find another process took it first).
//
// It looks only for runs of Flows: another app sharing the store with other
// flows keeps its runs to itself, and this one never takes (and so never
// counts an attempt on, nor delays) a run it could not execute.
type Scheduler struct {
	J     driver.Journal
	Poll  time.Duration // > 0
	Slots int           // runs executed at once; > 0
	// Flows are the flows whose runs this scheduler executes. With none it
	// looks for nothing.
	Flows []string
	// Run executes the due run id. ctx ends when the app gives up waiting
	// for its runs (Stop's caller's deadline).
	Run func(ctx context.Context, id string)
	Log *slog.Logger
	// StoreTimeout bounds each look-up of due runs (deadline.Bound); zero
	// or less: no bound.
	StoreTimeout time.Duration

	sem   chan struct{}
	nudge chan struct{}
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// Start starts the scheduler's loop; ctx is given to every Run.
func (s *Scheduler) Start(ctx context.Context) {
	s.init()
	s.wg.Add(1)
	go s.loop(ctx)
}

func (s *Scheduler) init() {
	s.once.Do(func() {
		s.sem = make(chan struct{}, s.Slots)
		s.nudge = make(chan struct{}, 1)
		s.stop = make(chan struct{})
	})
}

// Stop stops taking runs; runs already executing go on. Wait waits for
// them.
func (s *Scheduler) Stop() {
	s.init()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
}

// Wait waits until the loop and every run it started have returned.
func (s *Scheduler) Wait() { s.wg.Wait() }

// Wake nudges the scheduler to look for due runs now.
func (s *Scheduler) Wake() {
	s.init()
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// WakeAt nudges the scheduler when a run this process parked becomes due
// at t, so that a sleep ends on time rather than at the next poll. A
// journal that is a driver.Notifier has the scheduler arm that timer from
// the store (NextDue), for runs parked by any process; the poll covers a
// restart.
func (s *Scheduler) WakeAt(t time.Time) {
	if _, ok := s.J.(driver.Notifier); ok {
		return
	}
	if d := time.Until(t); d > 0 {
		time.AfterFunc(d+time.Millisecond, s.Wake)
	}
}

func (s *Scheduler) loop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.Poll)
	defer t.Stop()
	n, _ := s.J.(driver.Notifier)
	var notified <-chan struct{} // nil (never ready) without a Notifier
	if n != nil {
		c, stop := n.WatchDue()
		defer stop()
		notified = c
	}
	wake := time.NewTimer(time.Hour)
	wake.Stop()
	defer wake.Stop()
	for {
		more := s.pickUp(ctx)
		if n != nil {
			s.armWake(ctx, n, wake)
		}
		// With every slot taken pickUp did not look, and would not on a
		// signal either: look again as soon as a run ends, so a backlog
		// of due runs does not wait for the poll. A run may also have
		// ended since pickUp looked: then look again now, or the slot it
		// freed would wait for the poll too.
		var slot chan struct{} // nil (never ready) while slots are free
		switch {
		case len(s.sem) == cap(s.sem):
			slot = s.sem
		case more:
			select {
			case <-s.stop:
				return
			default:
				continue
			}
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.nudge:
		case <-notified:
		case <-wake.C:
		case slot <- struct{}{}:
			<-s.sem
		}
	}
}

// armWake sets timer to fire just after the journal's next parked run
// becomes due, or stops it when none is waiting (or the store did not
// answer: the poll covers that).
func (s *Scheduler) armWake(ctx context.Context, n driver.Notifier, timer *time.Timer) {
	if len(s.Flows) == 0 {
		timer.Stop()
		return
	}
	nctx, end := deadline.Bound(ctx, s.StoreTimeout)
	wait, ok, err := n.NextDue(nctx, s.Flows)
	err = end(err)
	if err != nil {
		s.Log.Error("oke: look up the next wake time", "err", err)
	}
	if err != nil || !ok {
		timer.Stop()
		return
	}
	// NextDue counts on the store's clock and only runs not due yet, so
	// the timer does not fire early nor spin on a run already due; the
	// millisecond covers the two clocks' drift over the wait.
	timer.Reset(wait + time.Millisecond)
}

// pickUp starts due runs in the free slots. It reports whether due runs may
// be left behind: every slot was taken, so it did not look, or as many runs
// were due as slots were free.
func (s *Scheduler) pickUp(ctx context.Context) (more bool) {
	free := cap(s.sem) - len(s.sem)
	if free <= 0 {
		return true
	}
	if len(s.Flows) == 0 {
		return false
	}
	dctx, end := deadline.Bound(ctx, s.StoreTimeout)
	ids, err := s.J.DueRuns(dctx, s.Flows, free)
	err = end(err)
	if err != nil {
		s.Log.Error("oke: list due runs", "err", err)
		return false
	}
	for _, id := range ids {
		select {
		case s.sem <- struct{}{}:
		case <-s.stop:
			return false
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			s.Run(ctx, id)
		}()
	}
	return len(ids) == free
}
