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
