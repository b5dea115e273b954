package app

import (
	"context"
	"fmt"
	"time"

	"github.com/okengine/oke"
)

// DefaultSweepCron is the schedule of demo.sweep: 03:00 UTC every night.
const DefaultSweepCron = "0 3 * * *"

// SweepReport is what one night's sweep did; it is the run's result (oke
// runs show).
type SweepReport struct {
	Tick    time.Time `json:"tick"`
	Swept   int       `json:"swept"`   // expired Idempotency-Key rows deleted
	Charges int64     `json:"charges"` // charges made before the tick, all tenants
}

// sweepFlow is the nightly sweep: a durable flow on a schedule
// (Config.SweepCron) that deletes the expired Idempotency-Key rows and
// counts the charges made before its tick. It works "up to the tick", not
// "up to now", so a run that starts late (a catch-up after downtime) reports
// the same night.
func (s *Server) sweepFlow() *oke.Flow[oke.Tick, SweepReport] {
	return oke.NewFlow("demo.sweep", oke.Options{
		Durable:     true,
		Description: "The nightly sweep, on a schedule (-sweep-cron): deletes expired Idempotency-Key rows and counts the charges made before its tick.",
	}, func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[SweepReport], error) {
		swept, err := oke.Step(ctx, "sweep idempotency rows", func(ctx context.Context) (int, error) {
			n := 0
			err := fx.Raw(ctx, "App.Sweep", func(ctx context.Context) (err error) {
				n, err = s.app.Sweep(ctx)
				return err
			})
			return n, err
		})
		if err != nil {
			return oke.Response[SweepReport]{}, err
		}
		charges, err := oke.Step(ctx, "count charges", func(ctx context.Context) (int64, error) {
			var n int64
			err := fx.Store(s.rdb).QueryRow(ctx, `SELECT count(*) FROM charges WHERE created_at < $1`,
				in.At.UTC().Format(timeLayout)).Scan(&n)
			if err != nil {
				return 0, fmt.Errorf("count charges: %w", err)
			}
			return n, nil
		})
		if err != nil {
			return oke.Response[SweepReport]{}, err
		}
		return oke.OK(SweepReport{Tick: in.At, Swept: swept, Charges: charges}), nil
	})
}
