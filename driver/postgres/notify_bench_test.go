package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
)

// pollOnly hides the driver's Notifier: the scheduler can only poll.
type pollOnly struct {
	driver.Driver
	driver.Journal
}

// wakeModes are the schedulers compared: woken by LISTEN/NOTIFY (and
// NextDue timers) with an hourly poll, and polling at the default 250 ms
// and at 50 ms.
var wakeModes = []struct {
	name   string
	poll   time.Duration
	notify bool
}{
	{"notify", time.Hour, true},
	{"poll=250ms", 250 * time.Millisecond, false},
	{"poll=50ms", 50 * time.Millisecond, false},
}

// appDriver is d as the app should see it in mode notify or not.
func appDriver(d *postgres.Driver, notify bool) driver.Driver {
	if notify {
		return d
	}
	return pollOnly{d, d}
}

// reportLatencies reports the median, p90 and max of lat.
func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*9/10]), "p90-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// BenchmarkWakeLatencyEnqueue measures, one run at a time with a random
// pause (0–1 s) between runs, the time from oke.Run on app A (which has
// no scheduler) to the run's flow starting on app B, both on one schema, in
// one process (one clock). ns/op is not the latency; the p50/p90/max
// metrics are, and enqueue-p50-ms is how long oke.Run itself took (its
// commit), which the latency includes.
//
//	go test -run '^$' -bench BenchmarkWakeLatency -benchtime 100x ./driver/postgres/
func BenchmarkWakeLatencyEnqueue(b *testing.B) {
	for _, m := range wakeModes {
		b.Run(m.name, func(b *testing.B) {
			twoDrivers(b)
			da := newDriver(b)
			db := sameSchema(b, da)
			started := make(chan time.Time, 1)
			work := func() *oke.Flow[echoIn, int] {
				return oke.NewFlow("n.work", oke.Options{Durable: true},
					func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[int], error) {
						// The benchmark measures when the woken run starts: the clock is the
						// measurement, on this pick-up only, and nothing is saved from it.
						started <- time.Now() //oke:ignore a benchmark's probe: the start time of this pick-up, sent to the benchmark, never saved
						return oke.OK(in.N), nil
					})
			}
			workA := work()
			var enqueued time.Time
			var runDur []time.Duration // how long oke.Run (its commit) took
			a := startApp(b, oke.Config{Driver: da, PollInterval: -1}, func(app *oke.App) {
				app.Handle(oke.Internal(), workA)
				app.Handle(oke.POST("/start"), oke.NewFlow("n.start", oke.Options{Idempotency: oke.Off},
					func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[string], error) {
						enqueued = time.Now()
						id, err := oke.Run(ctx, fx, workA, in)
						runDur = append(runDur, time.Since(enqueued))
						return oke.OK(id), err
					}))
			})
			startApp(b, oke.Config{Driver: appDriver(db, m.notify), PollInterval: m.poll}, func(app *oke.App) {
				app.Handle(oke.Internal(), work())
			})
			if m.notify {
				_, admin := server(b)
				listenerPID(b, admin, db.WakeChannel(), 0)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				// A random pause between runs (a whole number of poll
				// intervals long), so that enqueues do not fall in step with a
				// poller's ticks.
				b.StopTimer()
				time.Sleep(rand.N(time.Second))
				b.StartTimer()
				if w := post(b, a, "/start", fmt.Sprintf(`{"n": %d}`, i)).Code; w != 200 {
					b.Fatalf("POST /start: %d", w)
				}
				select {
				case s := <-started:
					lat = append(lat, s.Sub(enqueued))
				case <-time.After(wait):
					b.Fatalf("run %d did not start within %v", i, wait)
				}
			}
			b.StopTimer()
			reportLatencies(b, lat)
			slices.Sort(runDur)
			b.ReportMetric(float64(runDur[len(runDur)/2])/1e6, "enqueue-p50-ms")
		})
	}
}

// BenchmarkWakeLatencySleep measures how late a 200 ms durable sleep ends:
// from the wake time (drawn in a step before the sleep) to the flow running
// past the sleep, on one app. A run whose two step saves outlast the nap
// does not park; it is counted as unparked and left out.
func BenchmarkWakeLatencySleep(b *testing.B) {
	const nap = 200 * time.Millisecond
	for _, m := range wakeModes {
		b.Run(m.name, func(b *testing.B) {
			d := newDriver(b)
			late := make(chan time.Duration, 1)
			a := startApp(b, oke.Config{Driver: appDriver(d, m.notify), PollInterval: m.poll}, func(app *oke.App) {
				app.Handle(oke.POST("/nap"), oke.NewFlow("n.nap", oke.Options{Durable: true},
					func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[int], error) {
						wake, err := oke.Step(ctx, "wake", func(context.Context) (time.Time, error) {
							return time.Now().Add(nap), nil
						})
						if err != nil {
							return oke.Response[int]{}, err
						}
						if err := oke.SleepUntil(ctx, "nap", wake); err != nil {
							return oke.Response[int]{}, err
						}
						late <- time.Since(wake) //oke:ignore a benchmark's probe: how late this pick-up woke, sent to the benchmark, never saved
						return oke.OK(0), nil
					}))
			})
			lat := make([]time.Duration, 0, b.N)
			unparked := 0
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				time.Sleep(rand.N(time.Second)) // out of step with the poller, as above
				b.StartTimer()
				w := post(b, a, "/nap", `{}`)
				switch {
				case w.Code == 200:
					// Saving the two steps took longer than the nap: the
					// run never parked. Not a wake-up; left out.
					<-late
					unparked++
					continue
				case w.Code != 204:
					b.Fatalf("POST /nap: %d %s, want 204", w.Code, w.Body)
				}
				select {
				case l := <-late:
					lat = append(lat, l)
				case <-time.After(wait):
					b.Fatalf("sleep %d did not end within %v", i, wait)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(unparked), "unparked")
			if len(lat) > 0 {
				reportLatencies(b, lat)
			}
		})
	}
}
