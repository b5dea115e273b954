// Package effects holds the cases of rule effectoutsidestep.
package effects

import (
	"context"
	"time"

	"github.com/okengine/oke"
)

var db oke.DB

type In struct{ ID string }
type Out struct{ ID string }

var other = oke.NewFlow("other", oke.Options{}, func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
	return oke.OK(Out{}), nil
})

// Outside: every effect outside a step is reported.
var Outside = oke.NewFlow("effects.outside", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		fx.Emit(ctx, "x.happened", in)                                                        // want `^fx.Emit outside a step in durable flow "effects.outside": it emits the event again on every pick-up, and each emit starts new runs of the flows bound with oke.OnEvent; move it into oke.Step\(ctx, "name", …\), where its runs start exactly once$`
		fx.Send(ctx, oke.Message{To: "a@b"})                                                  // want `^fx.Send outside a step in durable flow "effects.outside": it sends the message again`
		req := &oke.Request{}                                                                 // a request is not an effect
		fx.Fetch(req)                                                                         // want `^fx.Fetch outside a step .*without a stable Idempotency-Key`
		fx.HTTPClient().Do(req)                                                               // want `^fx.HTTPClient outside a step`
		fx.Ask(ctx, oke.AskRequest{Prompt: "hi"})                                             // want `^fx.Ask outside a step`
		fx.Embed(ctx, []string{"hi"})                                                         // want `^fx.Embed outside a step`
		fx.Raw(ctx, "publish", func(ctx context.Context) error { return nil })                // want `^fx.Raw outside a step`
		fx.Tx(ctx)                                                                            // want `^fx.Tx outside a step .*open it inside oke.Step`
		fx.Store(db).Exec(ctx, `INSERT INTO t (id) VALUES ($1)`, in.ID)                       // want `^a write \(INSERT\) through \*oke.Store.Exec outside a step .*ON CONFLICT`
		fx.Store(db).QueryRow(ctx, `UPDATE t SET n = n + 1 WHERE id = $1 RETURNING n`, in.ID) // want `^a write \(UPDATE\) through \*oke.Store.QueryRow outside a step`
		q := "DELETE FROM t"
		fx.Store(db).Exec(ctx, q+" WHERE id = $1", in.ID) // want `^a statement through \*oke.Store.Exec that oke vet cannot read \(not a constant string\) outside a step`
		oke.Run(ctx, fx, other, in)                       // want `^oke.Run outside a step .*it starts another run on every pick-up; move it into oke.Step\(ctx, "name", …\), where it starts the run exactly once`
		oke.Call(ctx, fx, other, in)                      // want `^oke.Call outside a step`
		fx.Signal(ctx, "run_1", "approval", in)           // want `^fx.Signal outside a step .*it sends the signal again on every pick-up`
		fx.Store(db).Tx(ctx, nil, func(tx *oke.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t (id) VALUES ($1)`, in.ID) // want `^a write \(INSERT\) through \*oke.Tx.Exec outside a step`
			return err
		})
		defer fx.Emit(ctx, "x.done", in) // want `^fx.Emit outside a step`
		return oke.OK(Out{}), nil
	})

// Inside: the same effects inside steps, nested steps and reads outside
// steps are fine.
var Inside = oke.NewFlow("effects.inside", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		// Reads outside a step run again on every pick-up, harmless.
		var n int
		fx.Store(db).QueryRow(ctx, `SELECT count(*) FROM t WHERE id = $1`, in.ID).Scan(&n)
		fx.Store(db).Query(ctx, `SELECT id FROM t`)
		fx.Secret(ctx, "API_KEY")
		client := fx.HTTPClient() // only used inside steps
		_, err := oke.Step(ctx, "all", func(ctx context.Context) (bool, error) {
			fx.Emit(ctx, "x.happened", in)
			fx.Send(ctx, oke.Message{To: "a@b"})
			req := &oke.Request{}
			fx.Fetch(req)
			client.Do(req)
			tx, _ := fx.Tx(ctx)
			tx.Exec(ctx, `INSERT INTO t (id) VALUES ($1) ON CONFLICT DO NOTHING`, in.ID)
			oke.Run(ctx, fx, other, in)
			fx.Signal(ctx, "run_1", "approval", in)
			// A nested step is inside a step too.
			_, err := oke.Step(ctx, "nested", func(ctx context.Context) (int, error) {
				fx.Store(db).Exec(ctx, `INSERT INTO u (id) VALUES ($1)`, in.ID)
				return 0, fx.Raw(ctx, "publish", func(ctx context.Context) error { return nil })
			})
			return true, err
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		// oke's own durable calls are steps of their own.
		id, _ := oke.NewID(ctx, "id")
		oke.Claim(ctx, "order:"+in.ID)
		oke.Sleep(ctx, "nap", 0)
		oke.AwaitSignal[In](ctx, "approval", time.Hour) // its timeout is saved with the wait
		// A closure used only inside steps runs in a step.
		emit := func(ctx context.Context) error { return fx.Emit(ctx, "x.emitted", id) }
		oke.Step(ctx, "emit", func(ctx context.Context) (bool, error) { return true, emit(ctx) })
		// A same-package helper that runs its function in a step.
		inStep(ctx, "helper step", func(ctx context.Context) error {
			return fx.Emit(ctx, "x.helped", id)
		})
		return oke.OK(Out{ID: id}), nil
	})

// inStep runs fn in a step named name.
func inStep(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	_, err := oke.Step(ctx, name, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	return err
}

// Helpers: effects in same-package functions that get fx are reported at
// the call outside a step, with the chain.
var Helpers = oke.NewFlow("effects.helpers", oke.Options{Durable: true}, helpers)

func helpers(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
	notify(ctx, fx, in)         // want `^call of notify outside a step in durable flow "effects.helpers" reaches fx.Emit at effects.go:\d+ \(and 1 more\): it emits the event again on every pick-up, and each emit starts new runs of the flows bound with oke.OnEvent; move the call into oke.Step\(ctx, "name", …\)$`
	save(ctx, fx.Store(db), in) // want `^call of save outside a step in durable flow "effects.helpers" reaches a write \(INSERT\) through \*oke.Store.Exec at effects.go:\d+ \(through save → insert\)`
	oke.Step(ctx, "notify", func(ctx context.Context) (bool, error) {
		return true, notify(ctx, fx, in) // inside a step: fine
	})
	steppedNotify(ctx, fx, in) // the helper takes its own step: fine
	lookup(ctx, fx, in)        // reads only: fine
	pure(ctx, in)              // does not get fx: not followed
	return oke.OK(Out{}), nil
}

func notify(ctx context.Context, fx *oke.Fx, in In) error {
	if err := fx.Emit(ctx, "x.notified", in); err != nil {
		return err
	}
	return fx.Send(ctx, oke.Message{To: in.ID})
}

func steppedNotify(ctx context.Context, fx *oke.Fx, in In) error {
	_, err := oke.Step(ctx, "stepped notify", func(ctx context.Context) (bool, error) {
		return true, notify(ctx, fx, in)
	})
	return err
}

func save(ctx context.Context, st *oke.Store, in In) error { return insert(ctx, st, in.ID) }

func insert(ctx context.Context, st *oke.Store, id string) error {
	_, err := st.Exec(ctx, `INSERT INTO t (id) VALUES ($1)`, id)
	return err
}

func lookup(ctx context.Context, fx *oke.Fx, in In) error {
	return fx.Store(db).QueryRow(ctx, `SELECT id FROM t WHERE id = $1`, in.ID).Err()
}

func pure(ctx context.Context, in In) {}

// Silenced: //oke:ignore with a reason silences its line, or the next one.
var Silenced = oke.NewFlow("effects.silenced", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		fx.Emit(ctx, "x.progress", in, oke.EmitOption(nil)) //oke:ignore a progress event for the console: at least once is fine
		//oke:ignore the audit row is an upsert keyed on the input
		fx.Store(db).Exec(ctx, `INSERT INTO audit (id) VALUES ($1) ON CONFLICT DO NOTHING`, in.ID)
		fx.Emit(ctx, "x.not.silenced", in) // want `^fx.Emit outside a step`
		return oke.OK(Out{}), nil
	})

// ByMethod: a method passed to NewFlow, options in a variable.
type server struct{ db oke.DB }

var durableOpts = oke.Options{Durable: true, Description: "by name"}

func (s *server) flow() *oke.Flow[In, Out] { return oke.NewFlow("effects.method", durableOpts, s.do) }

func (s *server) do(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
	fx.Send(ctx, oke.Message{To: in.ID}) // want `^fx.Send outside a step in durable flow "effects.method"`
	return oke.OK(Out{}), nil
}

// durableFlag is not a constant: a flow whose Durable it sets may be
// durable, so it is checked.
var durableFlag = true

var MaybeDurable = oke.NewFlow("effects.maybe", oke.Options{Durable: durableFlag},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		fx.Send(ctx, oke.Message{To: in.ID}) // want `^fx.Send outside a step in durable flow "effects.maybe"`
		return oke.OK(Out{}), nil
	})

// A flow's function held in a variable, options unkeyed.
func local() *oke.Flow[In, Out] {
	do := func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		fx.Send(ctx, oke.Message{To: in.ID}) // want `^fx.Send outside a step in durable flow "effects.local"`
		return oke.OK(Out{}), nil
	}
	return oke.NewFlow("effects.local", oke.Options{nil, true, 0, ""}, do)
}

// Generic: explicit instantiation, a generic step helper, recursion.
var Generic = oke.NewFlow[In, Out]("effects.generic", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		step(ctx, "generic helper", func(ctx context.Context) (bool, error) {
			return true, fx.Emit(ctx, "x.generic", in) // in a step, through a generic helper
		})
		countdown(ctx, fx, 3) // want `^call of countdown outside a step in durable flow "effects.generic" reaches fx.Emit at effects.go:\d+: `
		return oke.OK(Out{}), nil
	})

func step[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	return oke.Step(ctx, name, fn)
}

func countdown(ctx context.Context, fx *oke.Fx, n int) {
	if n > 0 {
		fx.Emit(ctx, "x.tick", n)
		countdown(ctx, fx, n-1)
	}
}
