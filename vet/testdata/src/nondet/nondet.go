// Package nondet holds the cases of rule nondetoutsidestep.
package nondet

import (
	"context"
	crand "crypto/rand"
	"io"
	"math/rand"
	randv2 "math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/okengine/oke"
)

type In struct {
	ID  string
	Due time.Time
}
type Out struct{ ID string }

// Outside: the clock, randomness and new UUIDs outside a step.
var Outside = oke.NewFlow("nondet.outside", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		now := time.Now()      // want `^time.Now outside a step in durable flow "nondet.outside": the value changes on every pick-up; draw it in oke.Step\(ctx, "now", …\)$`
		_ = time.Since(in.Due) // want `^time.Since outside a step .*take the time in oke.Step\(ctx, "now", …\) and compute from the saved value$`
		_ = time.Until(in.Due) // want `^time.Until outside a step`
		_ = rand.Intn(10)      // want `^rand.Intn \(math/rand\) outside a step in durable flow "nondet.outside": it draws another value on every pick-up; draw it in oke.Step\(ctx, "name", …\)$`
		_ = randv2.N(10)       // want `^rand.N \(math/rand/v2\) outside a step`
		b := make([]byte, 8)
		crand.Read(b)                   // want `^rand.Read \(crypto/rand\) outside a step`
		io.ReadFull(crand.Reader, b)    // want `^rand.Reader \(crypto/rand\) outside a step`
		_ = uuid.NewString()            // want `^uuid.NewString \(github.com/google/uuid\) outside a step in durable flow "nondet.outside": the id changes on every pick-up, so later steps would create things under another id; draw it with oke.NewID\(ctx, "name"\), which saves it$`
		_ = uuid.Must(uuid.NewRandom()) // want `^uuid.NewRandom \(github.com/google/uuid\) outside a step`
		clock := time.Now               // want `^time.Now outside a step`
		_ = clock
		_ = now
		return oke.OK(Out{}), nil
	})

// Inside: the same values drawn in steps, and deterministic look-alikes.
var Inside = oke.NewFlow("nondet.inside", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		now, err := oke.Step(ctx, "now", func(ctx context.Context) (time.Time, error) {
			return time.Now(), nil
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		_, _ = oke.Step(ctx, "draws", func(ctx context.Context) (string, error) {
			_ = rand.Intn(10)
			b := make([]byte, 8)
			crand.Read(b)
			return uuid.NewString(), nil
		})
		id, _ := oke.NewID(ctx, "id")
		// Deterministic: a seeded generator, a name-based UUID, times
		// computed from saved ones, parsing.
		r := randv2.New(randv2.NewPCG(1, 2))
		_ = r.IntN(10)
		_ = uuid.NewSHA1(uuid.UUID{}, []byte(in.ID))
		_, _ = uuid.Parse(id)
		_ = now.Add(time.Hour).Sub(in.Due)
		d, _ := time.ParseDuration("2s")
		// The time of a sleep is saved the first time it is reached.
		oke.SleepUntil(ctx, "until due", time.Now().Add(d))
		return oke.OK(Out{ID: id}), nil
	})

// Helpers: a same-package function that gets fx is followed.
var Helpers = oke.NewFlow("nondet.helpers", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		stamp(ctx, fx) // want `^call of stamp outside a step in durable flow "nondet.helpers" reaches time.Now at nondet.go:\d+: the value changes on every pick-up; move the call into oke.Step\(ctx, "name", …\)$`
		oke.Step(ctx, "stamp", func(ctx context.Context) (time.Time, error) { return stamp(ctx, fx), nil })
		return oke.OK(Out{}), nil
	})

func stamp(ctx context.Context, fx *oke.Fx) time.Time { return time.Now() }

// Ignored: a reason silences; a bare //oke:ignore silences nothing (rule
// ignorereason reports it).
var Ignored = oke.NewFlow("nondet.ignored", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		start := time.Now() //oke:ignore only measures how long this pick-up takes, for a log line
		//oke:ignore
		_ = time.Now() // want `^time.Now outside a step`
		// want +1 `^time.Now outside a step`
		_ = time.Now() //oke:ignore
		_ = start
		return oke.OK(Out{}), nil
	})
