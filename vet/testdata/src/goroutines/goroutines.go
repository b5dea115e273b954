// Package goroutines holds the cases of rule fxgoroutine.
package goroutines

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/okengine/oke"
)

var db oke.DB

type In struct{ IDs []string }
type Out struct{}

// Bad: goroutines that use fx and that nothing waits for.
var Bad = oke.NewFlow("goroutines.bad", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		go func() { // want `^goroutine in durable flow "goroutines.bad" uses fx, and nothing waits for it before the function returns: its effects can happen after that, outside every step and after the run's outcome is saved, and again on every pick-up; wait for it before every return \(sync.WaitGroup.Wait, errgroup.Group.Wait\), or do the work in oke.Step\(ctx, "name", …\)$`
			oke.Step(ctx, "late", func(ctx context.Context) (bool, error) {
				return true, fx.Emit(ctx, "late", nil)
			})
		}()
		done := make(chan error, 1)
		go func() { done <- fx.Emit(ctx, "unread", nil) }() // want `^goroutine in durable flow "goroutines.bad" uses fx, and the return at goroutines.go:\d+ is reached without a receive from done`
		st := fx.Store(db)
		go audit(ctx, st) // want `^goroutine in durable flow "goroutines.bad" uses fx, and nothing waits`
		oke.Step(ctx, "in a step", func(ctx context.Context) (bool, error) {
			go fx.Emit(ctx, "from a step", nil) // want `^goroutine in durable flow "goroutines.bad" uses fx`
			return true, nil
		})
		return oke.OK(Out{}), nil
	})

func audit(ctx context.Context, st *oke.Store) {}

// Early: a WaitGroup that one return does not wait for.
var Early = oke.NewFlow("goroutines.early", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		var wg sync.WaitGroup
		for _, id := range in.IDs {
			wg.Add(1)
			go func() { // want `^goroutine in durable flow "goroutines.early" uses fx, and the return at goroutines.go:\d+ is reached without wg.Wait\(\)`
				defer wg.Done()
				fx.Store(db).Exec(ctx, `SELECT $1`, id)
			}()
		}
		if len(in.IDs) > 10 {
			return oke.Response[Out]{}, errors.New("too many")
		}
		wg.Wait()
		return oke.OK(Out{}), nil
	})

// Joined: goroutines waited for before every return.
var Joined = oke.NewFlow("goroutines.joined", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		_, err := oke.Step(ctx, "fan out", func(ctx context.Context) (bool, error) {
			var wg sync.WaitGroup
			for _, id := range in.IDs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fx.Store(db).Exec(ctx, `INSERT INTO t (id) VALUES ($1) ON CONFLICT DO NOTHING`, id)
				}()
			}
			wg.Wait()
			return true, nil
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		_, err = oke.Step(ctx, "group", func(ctx context.Context) (bool, error) {
			g, ctx := errgroup.WithContext(ctx)
			for _, id := range in.IDs {
				g.Go(func() error {
					_, err := fx.Store(db).Exec(ctx, `INSERT INTO u (id) VALUES ($1) ON CONFLICT DO NOTHING`, id)
					return err
				})
			}
			return true, g.Wait()
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		_, err = oke.Step(ctx, "wg.Go", func(ctx context.Context) (bool, error) {
			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() { fx.Emit(ctx, "x", nil) })
			if len(in.IDs) == 0 {
				return false, nil // the deferred Wait runs here too
			}
			return true, nil
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		_, err = oke.Step(ctx, "channel", func(ctx context.Context) (bool, error) {
			done := make(chan error)
			go func() { done <- fx.Emit(ctx, "y", nil) }()
			return true, <-done
		})
		if err != nil {
			return oke.Response[Out]{}, err
		}
		_, err = oke.Step(ctx, "range", func(ctx context.Context) (bool, error) {
			results := make(chan error)
			go func() {
				defer close(results)
				for _, id := range in.IDs {
					results <- fx.Emit(ctx, "r", id)
				}
			}()
			var errs []error
			for err := range results {
				errs = append(errs, err)
			}
			return true, errors.Join(errs...)
		})
		var wg sync.WaitGroup
		wg.Add(1)
		go worker(ctx, &wg, fx)
		wg.Wait()
		// A goroutine that does not use fx is not this rule's business.
		go func() {}()
		return oke.OK(Out{}), err
	})

func worker(ctx context.Context, wg *sync.WaitGroup, fx *oke.Fx) { defer wg.Done() }

// NotWaited: a group whose Wait is missing.
var NotWaited = oke.NewFlow("goroutines.notwaited", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		g := new(errgroup.Group)
		g.Go(func() error { return fx.Emit(ctx, "z", nil) }) // want `^goroutine in durable flow "goroutines.notwaited" uses fx, and the return at goroutines.go:\d+ is reached without g.Wait\(\)`
		return oke.OK(Out{}), nil
	})

// Helper: a goroutine in a same-package function that gets fx.
var Helper = oke.NewFlow("goroutines.helper", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		background(ctx, fx)
		return oke.OK(Out{}), nil
	})

func background(ctx context.Context, fx *oke.Fx) {
	go fx.Emit(ctx, "bg", nil) // want `^goroutine in durable flow "goroutines.helper" \(reached through background\) uses fx, and nothing waits`
}

// Ignored: the reason is the user's word for it.
var Ignored = oke.NewFlow("goroutines.ignored", oke.Options{Durable: true},
	func(ctx context.Context, in In, fx *oke.Fx) (oke.Response[Out], error) {
		//oke:ignore joined by the caller's shutdown hook (see Server.Close)
		go fx.Emit(ctx, "ignored", nil)
		return oke.OK(Out{}), nil
	})
