package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/cron"
)

// TestSchedulesListsEachCronBinding: GET /schedules lists each schedule
// with its next tick by the app's clock, and, once a tick ran, its run.
func TestSchedulesListsEachCronBinding(t *testing.T) {
	clock := cron.NewFake(time.Date(2026, 1, 1, 2, 59, 0, 0, time.UTC))
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet(), PollInterval: 5 * time.Millisecond})
	app.Handle(oke.Cron("0 3 * * *"), oke.NewFlow("adm.nightly", oke.Options{},
		func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[bool], error) {
			return oke.OK(true), nil
		}))
	app.Handle(oke.Cron("@hourly").CatchUp(oke.CatchUpAll(3)), oke.NewFlow("adm.hourly", oke.Options{},
		func(ctx context.Context, in oke.Tick, fx *oke.Fx) (oke.Response[bool], error) {
			return oke.OK(true), nil
		}))
	app.HandleHTTP("/_oke/", http.StripPrefix("/_oke", admin.Handler(app, admin.Token(adminTok))))
	cron.UseClock(app, clock)
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app)
	t.Cleanup(func() {
		srv.Close()
		app.Close(context.Background())
	})
	e := &apiEnv{t: t, app: app, srv: srv}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clock.WaitFor(ctx, 2); err != nil {
		t.Fatal(err)
	}

	var page admin.SchedulesPage
	e.decode("GET", "/_oke/schedules", "", 200, &page)
	three := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	if len(page.Schedules) != 2 {
		t.Fatalf("schedules %+v, want 2", page.Schedules)
	}
	h, n := page.Schedules[0], page.Schedules[1]
	if h.Flow != "adm.hourly" || h.Spec != "@hourly" || h.CatchUp != "all (up to 3)" || !h.Next.Equal(three) || h.Last != nil ||
		n.Flow != "adm.nightly" || n.Spec != "0 3 * * *" || n.Location != "UTC" || n.CatchUp != "latest" || !n.Next.Equal(three) || n.Last != nil {
		t.Fatalf("schedules before 03:00: %+v", page.Schedules)
	}

	clock.Set(three)
	if err := clock.WaitFor(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for {
		runs, err := app.Journal().ListRuns(ctx, driver.RunFilter{Status: []driver.RunStatus{driver.RunCompleted}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the 03:00 runs did not complete: %v", runs)
		case <-time.After(5 * time.Millisecond):
		}
	}
	e.decode("GET", "/_oke/schedules", "", 200, &page)
	for _, s := range page.Schedules {
		if s.Last == nil || s.Last.RunID == "" || s.Last.Status != "completed" || !s.Last.Tick.Equal(three) {
			t.Fatalf("%s after 03:00: last %+v", s.Flow, s.Last)
		}
	}
	if !page.Schedules[0].Next.Equal(three.Add(time.Hour)) || !page.Schedules[1].Next.Equal(three.AddDate(0, 0, 1)) {
		t.Fatalf("next ticks after 03:00: %+v", page.Schedules)
	}
}
