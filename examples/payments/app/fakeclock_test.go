package app_test

import (
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/oketest"
)

// TestRemindersOnAFakeClock: a reminder due in a day is sent once the
// demo's clock (oketest.Clock, on the memory driver) says a day passed —
// not a moment before, and without waiting a day.
func TestRemindersOnAFakeClock(t *testing.T) {
	clk := oketest.NewClock()
	e := setup(t, fastScheduler, func(c *app.Config) { c.Driver, c.Clock = "memory", clk.Now })
	e.do("POST", "/reminders", `{"to":"later@example.com","delay":"24h"}`, "Idempotency-Key", newKey()).want(t, 204, "")
	sent := func() bool {
		var list app.ReminderList
		e.do("GET", "/reminders", "").decode(t, &list)
		return len(list.Reminders) == 1 && list.Reminders[0].Sent
	}
	waitFor(t, func() bool {
		runs := e.runsOf("demo.remind")
		return len(runs) == 1 && runs[0].Status == "sleeping"
	})
	clk.Advance(23 * time.Hour)
	time.Sleep(50 * time.Millisecond) // polls of the scheduler: nothing is due
	if sent() {
		t.Fatal("the reminder was sent an hour early")
	}
	clk.Advance(time.Hour)
	waitFor(t, sent)
	runs := e.runsOf("demo.remind")
	if len(runs) != 1 || e.run(runs[0].ID).Attempts != 2 {
		t.Fatalf("runs %+v: want one run, picked up once after its sleep", runs)
	}
}
