package deadline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

// hang is a store call that returns only when its context ends.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestBoundMarksACallItsDeadlineEnded(t *testing.T) {
	ctx, end := deadline.Bound(context.Background(), time.Millisecond)
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("no deadline")
	}
	err := end(hang(ctx))
	if !errors.Is(err, deadline.ErrTimeout) || !errors.Is(err, driver.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: want ErrTimeout, driver.ErrUnavailable and the call's error", err)
	}
}

func TestBoundLeavesOtherErrorsAlone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx, end := deadline.Bound(parent, time.Hour)
	cancel() // the caller's own cancellation is not the store's deadline
	if err := end(hang(ctx)); errors.Is(err, deadline.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v: want the caller's cancellation as is", err)
	}
	boom := errors.New("boom")
	_, end = deadline.Bound(context.Background(), time.Hour)
	if err := end(boom); err != boom {
		t.Fatalf("%v, want %v", err, boom)
	}
	ctx, end = deadline.Bound(context.Background(), 0)
	if _, ok := ctx.Deadline(); ok || end(nil) != nil {
		t.Fatal("a zero timeout bounds nothing")
	}
}

// TestArmedEndsOnlyWhileArmed: a deadline armed for a call ends the
// context when it passes before Disarm; once disarmed, the context (which
// database/sql keeps for a transaction's life) lives on.
func TestArmedEndsOnlyWhileArmed(t *testing.T) {
	a := deadline.NewArmed(context.Background())
	a.Arm(time.Hour)
	if err := a.Disarm(nil); err != nil || a.Err() != nil {
		t.Fatalf("disarmed in time: %v, ctx %v", err, a.Err())
	}
	a.Arm(time.Millisecond)
	err := a.Disarm(hang(a))
	if !errors.Is(err, deadline.ErrTimeout) || !errors.Is(a.Err(), context.DeadlineExceeded) {
		t.Fatalf("%v (ctx %v): want ErrTimeout", err, a.Err())
	}

	parent, cancel := context.WithCancel(context.Background())
	b := deadline.NewArmed(parent)
	cancel()
	<-b.Done()
	if err := b.Disarm(b.Err()); errors.Is(err, deadline.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v: the parent's cancellation is not a timeout", err)
	}
}

func TestJournalBoundsEachCall(t *testing.T) {
	if deadline.Journal(nil, time.Second) != nil {
		t.Fatal("a nil journal stays nil")
	}
	j := deadline.Journal(hungJournal{}, time.Millisecond)
	if _, err := j.DueRuns(context.Background(), nil, 1); !errors.Is(err, deadline.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
	if err := j.SaveStep(context.Background(), "r", "o", driver.Step{}); !errors.Is(err, deadline.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
}

// hungJournal is a journal whose every call hangs until its context ends.
type hungJournal struct{ driver.Journal }

func (hungJournal) DueRuns(ctx context.Context, _ []string, _ int) ([]string, error) {
	return nil, hang(ctx)
}

func (hungJournal) SaveStep(ctx context.Context, _, _ string, _ driver.Step) error { return hang(ctx) }

// TestBoundsInFlightShareATimer: calls bounded by the same duration share
// one timer (watch); each still ends at its own deadline, not before, a
// call that returned leaves the others' bounds alone, and a call started
// once none is in flight is bounded again.
func TestBoundsInFlightShareATimer(t *testing.T) {
	const d = 20 * time.Millisecond
	type call struct {
		ctx context.Context
		end func(error) error
	}
	var calls []call
	for range 3 {
		ctx, end := deadline.Bound(context.Background(), d)
		calls = append(calls, call{ctx, end})
	}
	if err := calls[1].end(nil); err != nil {
		t.Fatalf("a call that returned in time: %v", err)
	}
	if !errors.Is(calls[1].ctx.Err(), context.Canceled) {
		t.Fatalf("an ended call's context: %v, want context.Canceled", calls[1].ctx.Err())
	}
	for round := range 2 {
		for _, i := range []int{0, 2} {
			c := calls[i]
			err := c.end(hang(c.ctx))
			if !errors.Is(err, deadline.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d, call %d: %v, want ErrTimeout", round, i, err)
			}
			if dl, _ := c.ctx.Deadline(); time.Now().Before(dl) {
				t.Fatalf("round %d, call %d ended before its deadline", round, i)
			}
		}
		// None in flight now: new calls set the timer again.
		calls = calls[:0]
		for range 3 {
			ctx, end := deadline.Bound(context.Background(), d)
			calls = append(calls, call{ctx, end})
		}
		calls[1].end(nil)
	}
	for _, c := range calls {
		c.end(nil)
	}
}

// TestBoundAfterFunc: a context derived from a bound (context.WithCancel,
// context.AfterFunc: what pgx does with a query's context) ends when the
// bound does, and a stopped AfterFunc is not called.
func TestBoundAfterFunc(t *testing.T) {
	ctx, end := deadline.Bound(context.Background(), time.Millisecond)
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	called := make(chan struct{})
	context.AfterFunc(ctx, func() { close(called) })
	stopped := context.AfterFunc(ctx, func() { t.Error("a stopped AfterFunc was called") })
	if !stopped() {
		t.Fatal("stop of an AfterFunc not yet called reported false")
	}
	<-child.Done()
	<-called
	if err := end(child.Err()); !errors.Is(err, deadline.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
	ctx, end = deadline.Bound(context.Background(), time.Hour)
	child, cancel = context.WithCancel(ctx)
	defer cancel()
	end(nil)
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("a child of an ended bound: %v, want context.Canceled", child.Err())
	}
	late := make(chan struct{})
	context.AfterFunc(ctx, func() { close(late) }) // on a bound that ended
	<-late
}
