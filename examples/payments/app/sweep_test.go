package app_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/examples/payments/app"
)

// TestNightlySweepRunsOnItsSchedule: with -sweep-cron "@every 1s" the
// sweep runs on its own, once per tick, deletes the expired Idempotency-Key
// rows and counts the charges made before its tick; GET /_oke/schedules
// lists it.
func TestNightlySweepRunsOnItsSchedule(t *testing.T) {
	e := setup(t, func(c *app.Config) { c.SweepCron = "@every 1s" })
	r := e.do("POST", "/charges", `{"amount":500,"currency":"usd"}`, "Idempotency-Key", "sweep-test-charge-0001")
	r.want(t, 201, "")
	// demo.note keeps its answers 2 s: this row expires, for the sweep.
	e.do("POST", "/notes", `{"text":"soon gone"}`, "Idempotency-Key", "sweep-test-note-00001").want(t, 201, "")

	var swept, counted bool
	deadline := time.Now().Add(60 * time.Second)
	for !(swept && counted) {
		if time.Now().After(deadline) {
			t.Fatalf("no sweep run deleted the expired row (%v) and counted the charge (%v) within a minute", swept, counted)
		}
		time.Sleep(50 * time.Millisecond)
		var page struct{ Schedules []oke.ScheduleInfo }
		e.do("GET", app.AdminPrefix+"/schedules", "").decode(t, &page)
		if len(page.Schedules) != 1 || page.Schedules[0].Flow != "demo.sweep" || page.Schedules[0].Spec != "@every 1s" {
			t.Fatalf("schedules: %+v", page.Schedules)
		}
		l := page.Schedules[0].Last
		if l == nil || l.Status != "completed" {
			continue
		}
		var run struct {
			Result struct {
				Status int
				Body   json.RawMessage
			}
		}
		e.do("GET", app.AdminPrefix+"/runs/"+l.RunID, "").decode(t, &run)
		var rep app.SweepReport
		if err := json.Unmarshal(run.Result.Body, &rep); err != nil || run.Result.Status != 200 {
			t.Fatalf("run %s: %d %s", l.RunID, run.Result.Status, run.Result.Body)
		}
		if !rep.Tick.Equal(l.Tick) {
			t.Fatalf("run %s reports the tick %v, the schedule %v", l.RunID, rep.Tick, l.Tick)
		}
		swept = swept || rep.Swept >= 1
		counted = counted || rep.Charges == 1
	}
}

// TestNoSweepScheduleWhenOff: -sweep-cron off binds no schedule.
func TestNoSweepScheduleWhenOff(t *testing.T) {
	off := setup(t, func(c *app.Config) { c.SweepCron = "off" })
	var page struct{ Schedules []oke.ScheduleInfo }
	off.do("GET", app.AdminPrefix+"/schedules", "").decode(t, &page)
	if len(page.Schedules) != 0 {
		t.Fatalf("-sweep-cron off: schedules %+v", page.Schedules)
	}
}
