package deadline_test

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/internal/deadline"
)

type ctxKey struct{}

// TestAttachCutsABlockedSocket: a statement whose context Attach quieted
// (no Done channel for the driver to watch) still ends at the deadline,
// because the deadline sets its socket's deadline to the past: the blocked
// read fails, end marks the error ErrTimeout, and Detach says the socket
// was cut (its connection must be closed, not pooled).
func TestAttachCutsABlockedSocket(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	ctx, end := deadline.Bound(parent, 20*time.Millisecond)
	qctx, ok := deadline.Attach(ctx, client)
	if !ok {
		t.Fatal("Attach refused a Bound context of the background")
	}
	if qctx.Done() != nil || qctx.Err() != nil {
		t.Fatal("the quiet context has a Done channel or an error: a driver would watch it")
	}
	if qctx.Value(ctxKey{}) != "v" {
		t.Fatal("the quiet context lost its parent's values")
	}
	if dl, ok := qctx.Deadline(); !ok || dl.IsZero() {
		t.Fatal("the quiet context does not report the call's deadline")
	}
	_, err := client.Read(make([]byte, 1)) // the store never answers
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want the socket's deadline", err)
	}
	if !deadline.Detach(ctx, client) {
		t.Fatal("Detach did not report the cut")
	}
	if err = end(err); !errors.Is(err, deadline.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
}

// sock records the deadlines set on it.
type sock struct {
	mu  sync.Mutex
	set []time.Time
}

func (s *sock) SetDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = append(s.set, t)
	return nil
}

func (s *sock) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.set)
}

// TestAttachLeavesAPromptCallAlone: a call that returns in time never has
// its socket's deadline touched, before or after Detach and end, even when
// the watch's timer fires for a later call.
func TestAttachLeavesAPromptCallAlone(t *testing.T) {
	s := &sock{}
	ctx, end := deadline.Bound(context.Background(), 20*time.Millisecond)
	if _, ok := deadline.Attach(ctx, s); !ok {
		t.Fatal("Attach refused")
	}
	if deadline.Detach(ctx, s) {
		t.Fatal("a prompt call reported cut")
	}
	if err := end(nil); err != nil {
		t.Fatal(err)
	}
	// A later call on the same duration: it runs to its deadline, so
	// the shared timer fires; the first socket must stay untouched.
	ctx2, end2 := deadline.Bound(context.Background(), 20*time.Millisecond)
	if err := end2(hang(ctx2)); !errors.Is(err, deadline.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
	if n := s.calls(); n != 0 {
		t.Fatalf("the prompt call's socket had its deadline set %d times", n)
	}
}

// TestAttachAfterTheDeadlineCutsAtOnce: a call whose deadline passed
// before it reached its socket (it waited for a pooled connection) has
// the socket cut as it is attached, not left to block.
func TestAttachAfterTheDeadlineCutsAtOnce(t *testing.T) {
	s := &sock{}
	ctx, end := deadline.Bound(context.Background(), time.Millisecond)
	<-ctx.Done()
	if _, ok := deadline.Attach(ctx, s); !ok {
		t.Fatal("Attach refused")
	}
	if s.calls() != 1 || !deadline.Detach(ctx, s) {
		t.Fatalf("socket deadlines set %d times, want 1, and Detach to report the cut", s.calls())
	}
	if err := end(context.DeadlineExceeded); !errors.Is(err, deadline.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
}

// TestAttachRefusesOtherContexts: a context the caller can cancel keeps
// its own Done channel (Attach says so, and the driver watches it).
func TestAttachRefusesOtherContexts(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, end := deadline.Bound(parent, time.Hour)
	defer end(nil)
	if got, ok := deadline.Attach(ctx, &sock{}); ok || got != ctx {
		t.Fatal("Attach quieted a context its caller can cancel")
	}
	if deadline.Detach(ctx, &sock{}) {
		t.Fatal("Detach of a context never attached reported a cut")
	}
}

// TestAttachOneSocketAtATime: a call on a context that has a socket tied
// to it already (a call inside another's) is refused, so that it is
// watched by its driver as usual; Detach of a socket that is not the tied
// one changes nothing, and the tied one is still cut at the deadline.
func TestAttachOneSocketAtATime(t *testing.T) {
	outer, inner := &sock{}, &sock{}
	ctx, end := deadline.Bound(context.Background(), 20*time.Millisecond)
	if _, ok := deadline.Attach(ctx, outer); !ok {
		t.Fatal("Attach refused the first socket")
	}
	if got, ok := deadline.Attach(ctx, inner); ok || got != ctx {
		t.Fatal("Attach tied a second socket to one call")
	}
	if deadline.Detach(ctx, inner) {
		t.Fatal("Detach of the untied socket reported a cut")
	}
	if err := end(hang(ctx)); !errors.Is(err, deadline.ErrTimeout) {
		t.Fatalf("%v: want ErrTimeout", err)
	}
	if outer.calls() != 1 || inner.calls() != 0 {
		t.Fatalf("deadlines set: outer %d, inner %d; want the tied socket's alone cut", outer.calls(), inner.calls())
	}
	if !deadline.Detach(ctx, outer) {
		t.Fatal("Detach of the tied socket did not report its cut")
	}
}

// TestHushGivesDatabaseSQLNothingToWatch: a flow statement's bound, hushed,
// has its deadline and values and no Done channel (database/sql starts no
// goroutine for it), and Unhush gives the driver the bound back, which
// still ends at its deadline. Anything else is left as it is.
func TestHushGivesDatabaseSQLNothingToWatch(t *testing.T) {
	parent := context.WithValue(context.WithoutCancel(context.Background()), ctxKey{}, "v")
	ctx, release := deadline.Statement(parent, 20*time.Millisecond)
	defer release()
	h := deadline.Hush(ctx)
	if h == ctx {
		t.Fatal("Hush returned the statement's bound as it is")
	}
	if h.Done() != nil || h.Err() != nil {
		t.Errorf("hushed: Done %v, Err %v; want nil, nil", h.Done(), h.Err())
	}
	if dl, ok := h.Deadline(); !ok || dl != must(ctx.Deadline()) {
		t.Errorf("hushed deadline %v %v; want the bound's", dl, ok)
	}
	if h.Value(ctxKey{}) != "v" {
		t.Errorf("hushed Value = %v; want the parent's", h.Value(ctxKey{}))
	}
	if deadline.Unhush(h) != ctx {
		t.Fatal("Unhush did not return the bound")
	}
	<-deadline.Unhush(h).Done()
	if err := deadline.Unhush(h).Err(); !errors.Is(err, deadline.ErrTimeout) {
		t.Errorf("the unhushed bound's Err after its deadline: %v; want ErrTimeout", err)
	}

	for name, other := range map[string]context.Context{
		"background":   context.Background(),
		"a store call": func() context.Context { c, _ := deadline.Bound(parent, time.Second); return c }(),
	} {
		if deadline.Hush(other) != other || deadline.Unhush(other) != other {
			t.Errorf("%s: Hush or Unhush changed it", name)
		}
	}
}

func must(t time.Time, ok bool) time.Time {
	if !ok {
		panic("no deadline")
	}
	return t
}
