// Package schedules is a fixture of extract's tests: flows bound with
// oke.Cron, with a constant spec and with one from configuration, options
// chained.
package schedules

import (
	"context"
	"os"
	"time"

	"github.com/okengine/oke"
)

var Nightly = oke.NewFlow("sched.nightly", oke.Options{}, func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[bool], error) {
	return oke.OK(in.At.IsZero()), nil
})

func Bind(app *oke.App) {
	app.Handle(oke.Cron("0 3 * * *"), Nightly)
	spec := os.Getenv("SPEC") // configuration: not in the contract
	app.Handle(oke.Cron(spec).In(time.UTC).CatchUp(oke.CatchUpAll(3)), Nightly)
}
