package oke_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/cron"
)

func tickFlow(name string) *oke.Flow[oke.Tick, string] {
	return oke.NewFlow(name, oke.Options{}, func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[string], error) {
		return oke.OK(in.At.Format(time.RFC3339)), nil
	})
}

// TestCronStartChecks: every mistake of a Cron binding stops Start with an
// error that names the flow, what is wrong and the fix.
func TestCronStartChecks(t *testing.T) {
	type noAt struct {
		N int `json:"n"`
	}
	for _, tc := range []struct {
		name   string
		driver driver.Driver
		bind   func(app *oke.App)
		want   []string
	}{
		{"a spec that does not parse names the field", nil, func(app *oke.App) {
			app.Handle(oke.Cron("0 25 * * *"), tickFlow("c.bad"))
		}, []string{`flow "c.bad"`, `oke.Cron("0 25 * * *")`, "field hour: 25 is out of range 0–23", "fix:"}},
		{"an input that does not take a tick", nil, func(app *oke.App) {
			app.Handle(oke.Cron("@daily"), oke.NewFlow("c.input", oke.Options{}, func(ctx context.Context, in noAt, fx *oke.Fx) (oke.Response[int], error) {
				return oke.OK(in.N), nil
			}))
		}, []string{`flow "c.input"`, "does not take a tick", "fix: make the input oke.Tick"}},
		{"CatchUpAll needs n from 1", nil, func(app *oke.App) {
			app.Handle(oke.Cron("@daily").CatchUp(oke.CatchUpAll(0)), tickFlow("c.all"))
		}, []string{`flow "c.all"`, "CatchUpAll(0): n must be from 1 to 1000"}},
		{"In is an option of Cron only", nil, func(app *oke.App) {
			app.Handle(oke.POST("/x").In(time.UTC), tickFlow("c.post"))
		}, []string{`flow "c.post"`, "In is an option of oke.Cron bindings"}},
		{"a schedule needs a journal", noJournal{memory.New()}, func(app *oke.App) {
			app.Handle(oke.Cron("@daily"), tickFlow("c.journal"))
		}, []string{`flow "c.journal"`, "schedule bindings need a driver that keeps a journal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := oke.New(oke.Config{Driver: tc.driver, SweepInterval: -1})
			t.Cleanup(func() { app.Close(context.Background()) })
			tc.bind(app)
			err := app.Start(context.Background())
			if err == nil {
				t.Fatal("Start = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start = %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestCronInputEmbedsTick: a struct that embeds oke.Tick, with other
// optional fields, takes the tick; the run's input is the tick in the
// binding's location; Flows lists the binding; Schedules shows the next
// tick and the last run.
func TestCronInputEmbedsTick(t *testing.T) {
	type sweepIn struct {
		oke.Tick
		DryRun bool `json:"dryRun,omitempty"`
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan sweepIn, 1)
	flow := oke.NewFlow("c.sweep", oke.Options{}, func(ctx context.Context, in sweepIn, fx *oke.Fx) (oke.Response[bool], error) {
		got <- in
		return oke.OK(true), nil
	})
	clock := cron.NewFake(time.Date(2026, 7, 1, 0, 30, 0, 0, time.UTC)) // 02:30 in Paris
	app := oke.New(oke.Config{SweepInterval: -1, PollInterval: 10 * time.Millisecond})
	t.Cleanup(func() { app.Close(context.Background()) })
	app.Handle(oke.Cron("0 3 * * *").In(paris).CatchUp(oke.CatchUpSkip), flow)
	cron.UseClock(app, clock)
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fl := app.Flows(); len(fl) != 1 || fl[0].Bindings[0] != "cron 0 3 * * * (Europe/Paris)" {
		t.Fatalf("Flows = %+v", fl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clock.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2026, 7, 1, 3, 0, 0, 0, paris)
	info, err := app.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(info) != 1 || info[0].Flow != "c.sweep" || info[0].Spec != "0 3 * * *" || info[0].Location != "Europe/Paris" ||
		info[0].CatchUp != "skip" || !info[0].Next.Equal(tick) || info[0].Last != nil {
		t.Fatalf("Schedules = %+v, want the next tick %v and no last run", info, tick)
	}
	clock.Set(tick)
	var in sweepIn
	select {
	case in = <-got:
	case <-ctx.Done():
		t.Fatal("the tick's run did not run")
	}
	if !in.At.Equal(tick) || in.DryRun {
		t.Fatalf("input %+v, want the tick %v", in, tick)
	}
	if _, off := in.At.Zone(); off != 2*3600 {
		t.Fatalf("the tick's time %v is not in Paris summer time", in.At)
	}
	runs, err := app.Journal().ListRuns(ctx, driver.RunFilter{Flow: "c.sweep"}, 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	var saved map[string]any
	json.Unmarshal(runs[0].Input, &saved)
	if saved["at"] != "2026-07-01T03:00:00+02:00" || runs[0].Principal != "schedule" || runs[0].Tenant != "default" {
		t.Fatalf("run %+v input %s", runs[0], runs[0].Input)
	}
	if err := clock.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	info, err = app.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := info[0].Last; l == nil || l.RunID != runs[0].ID || !l.Tick.Equal(tick) || !info[0].Next.Equal(tick.AddDate(0, 0, 1)) {
		t.Fatalf("Schedules after the tick = %+v (last %+v)", info, info[0].Last)
	}
}

// TestCronTwoSchedulesOfOneFlowCatchUpApart: each Cron binding of a flow
// catches up on its own ticks: a schedule added later is new (it starts with
// its next tick) even though the flow's other schedule ran meanwhile, and
// that one catches up on its own missed tick.
func TestCronTwoSchedulesOfOneFlowCatchUpApart(t *testing.T) {
	d := memory.New()
	clock := cron.NewFake(time.Date(2026, 1, 1, 14, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func(bs ...oke.Binding) *oke.App {
		app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: 10 * time.Millisecond})
		flow := tickFlow("c.twice")
		for _, b := range bs {
			app.Handle(b, flow)
		}
		cron.UseClock(app, clock)
		if err := app.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := clock.WaitFor(ctx, len(bs)); err != nil {
			t.Fatal(err)
		}
		return app
	}
	ticks := func() []string {
		runs, err := d.ListRuns(ctx, driver.RunFilter{Flow: "c.twice"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range runs {
			var in oke.Tick
			json.Unmarshal(r.Input, &in)
			out = append(out, in.At.UTC().Format("02 15:04"))
		}
		sort.Strings(out)
		return out
	}
	afternoon, night := oke.Cron("0 15 * * *").CatchUp(oke.CatchUpAll(5)), oke.Cron("0 3 * * *").CatchUp(oke.CatchUpAll(5))

	first := start(afternoon)
	for _, at := range []time.Time{time.Date(2026, 1, 1, 15, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)} {
		clock.Set(at)
		if err := clock.WaitFor(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	first.Close(ctx)
	if got := strings.Join(ticks(), ","); got != "01 15:00,02 15:00" {
		t.Fatalf("ticks %s", got)
	}

	clock.Set(time.Date(2026, 1, 3, 16, 0, 0, 0, time.UTC)) // the afternoon of the 3rd missed
	second := start(afternoon, night)
	defer second.Close(ctx)
	if got := strings.Join(ticks(), ","); got != "01 15:00,02 15:00,03 15:00" {
		t.Fatalf("after the restart: ticks %s, want the afternoon's missed tick only (the night schedule is new)", got)
	}
}
