package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

func TestStatement(t *testing.T) {
	own, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if got, release := deadline.Statement(own, time.Millisecond); got != own || release != nil {
		t.Error("a context with a deadline of its own was bounded again")
	}
	if got, release := deadline.Statement(context.Background(), 0); got != context.Background() || release != nil {
		t.Error("a zero bound changed the context")
	}
	ctx, release := deadline.Statement(context.Background(), time.Millisecond)
	defer release()
	<-ctx.Done()
	err := ctx.Err()
	for _, target := range []error{context.DeadlineExceeded, deadline.ErrTimeout, driver.ErrUnavailable} {
		if !errors.Is(err, target) {
			t.Errorf("the bound's error %v is not %v", err, target)
		}
	}
	parent, stop := context.WithCancel(context.Background())
	ctx, release = deadline.Statement(parent, time.Hour)
	defer release()
	stop()
	<-ctx.Done()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) || errors.Is(err, deadline.ErrTimeout) {
		t.Errorf("a canceled parent gives %v, want context.Canceled and no timeout", err)
	}
}

// TestStatementRelease: release ends the bound (its context is done) and
// is no timeout; an error from a statement its deadline ended is marked
// ErrTimeout, whatever the database's driver made of it, and others are
// left alone.
func TestStatementRelease(t *testing.T) {
	ctx, release := deadline.Statement(context.Background(), time.Hour)
	release()
	<-ctx.Done()
	if err := ctx.Err(); errors.Is(err, deadline.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("a released bound's context ends with %v, want context.Canceled", err)
	}
	boom := errors.New("boom")
	if err := deadline.Marked(ctx, boom); err != boom {
		t.Errorf("%v, want %v as is", err, boom)
	}

	ctx, release = deadline.Statement(context.Background(), time.Millisecond)
	defer release()
	<-ctx.Done()
	driverErr := fmt.Errorf("timeout: %w", boom) // not the context's error
	err := deadline.Marked(ctx, driverErr)
	if !errors.Is(err, deadline.ErrTimeout) || !errors.Is(err, driver.ErrUnavailable) || !errors.Is(err, boom) {
		t.Errorf("%v: want ErrTimeout and the driver's error", err)
	}
	if deadline.Marked(ctx, nil) != nil || deadline.Marked(context.Background(), boom) != boom {
		t.Error("Marked changed nil, or an error on a context that is not a statement's")
	}
}
