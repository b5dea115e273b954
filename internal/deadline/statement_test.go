package deadline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

func TestStatement(t *testing.T) {
	own, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if got := deadline.Statement(own, time.Millisecond); got != own {
		t.Error("a context with a deadline of its own was bounded again")
	}
	if got := deadline.Statement(context.Background(), 0); got != context.Background() {
		t.Error("a zero bound changed the context")
	}
	ctx := deadline.Statement(context.Background(), time.Millisecond)
	<-ctx.Done()
	err := ctx.Err()
	for _, target := range []error{context.DeadlineExceeded, deadline.ErrTimeout, driver.ErrUnavailable} {
		if !errors.Is(err, target) {
			t.Errorf("the bound's error %v is not %v", err, target)
		}
	}
	parent, stop := context.WithCancel(context.Background())
	ctx = deadline.Statement(parent, time.Hour)
	stop()
	<-ctx.Done()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) || errors.Is(err, deadline.ErrTimeout) {
		t.Errorf("a canceled parent gives %v, want context.Canceled and no timeout", err)
	}
}
