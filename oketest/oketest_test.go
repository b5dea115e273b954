package oketest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/okengine/oke"
	"github.com/okengine/oke/oketest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type noteIn struct {
	Text string `json:"text"`
}

// noteFlow writes a note (a raw effect standing for a database write) and
// answers 201 with its number.
func noteFlow(opts oke.Options, n *atomic.Int64) *oke.Flow[noteIn, string] {
	return oke.NewFlow("notes.add", opts, func(ctx context.Context, in noteIn, fx *oke.Fx) (oke.Response[string], error) {
		var id int64
		err := fx.Raw(ctx, "insert note", func(context.Context) error { id = n.Add(1); return nil })
		return oke.Created(fmt.Sprintf("note %d: %s", id, in.Text), ""), err
	})
}

func TestTwiceAndConcurrentlyPassForAFlowThatRunsOnce(t *testing.T) {
	var n atomic.Int64
	app := oketest.NewApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/notes"), noteFlow(oke.Options{}, &n))
	})
	first, second := oketest.Twice(t, app, "POST", "/notes", `{"text":"hi"}`)
	if first.Status != 201 || !second.Replayed() || n.Load() != 1 {
		t.Fatalf("first %d, second replayed %v, notes %d", first.Status, second.Replayed(), n.Load())
	}
	out := oketest.Concurrently(t, app, 20, "POST", "/notes", `{"text":"again"}`)
	if len(out) != 20 || n.Load() != 2 {
		t.Fatalf("%d answers, %d notes", len(out), n.Load())
	}
}

// spy is a testing.TB that records failures instead of failing.
type spy struct {
	*testing.T
	errs []string
}

func (s *spy) Errorf(format string, args ...any) {
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}
func (s *spy) Helper() {}

// TestTwiceCatchesAFlowThatRunsAgain: with Idempotency-Key handling off, the
// second call runs the flow again, and Twice says so.
func TestTwiceCatchesAFlowThatRunsAgain(t *testing.T) {
	var n atomic.Int64
	app := oketest.NewApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/notes"), noteFlow(oke.Options{Idempotency: oke.Off}, &n))
	})
	s := &spy{T: t}
	oketest.Twice(s, app, "POST", "/notes", `{"text":"hi"}`)
	if len(s.errs) != 2 || !strings.Contains(s.errs[0], "ran the flow again") || !strings.Contains(s.errs[1], "not the first one replayed") {
		t.Fatalf("Twice reported %q", s.errs)
	}
	s = &spy{T: t}
	oketest.Concurrently(s, app, 5, "POST", "/notes", `{"text":"hi"}`)
	if len(s.errs) == 0 || !strings.Contains(strings.Join(s.errs, "\n"), "two live answers") {
		t.Fatalf("Concurrently reported %q", s.errs)
	}
}
