package oke

import (
	"context"
	"slices"
	"time"

	"github.com/okengine/oke/driver"
)

// runFlows are the flows whose journal runs this app executes: every bound
// unary flow (durable flows, targets of Run, event flows). The scheduler
// looks only for their runs, so that apps with different flows on one store
// leave each other's runs alone.
func (a *App) runFlows() []string {
	var names []string
	for _, n := range sortedNames(a.flows) {
		if a.flows[n].shape == shapeUnary {
			names = append(names, n)
		}
	}
	return names
}

// foreignRunsLook bounds how many unfinished runs Start reads to tell
// whether the store holds runs of flows this app does not bind.
const foreignRunsLook = 500

// warnForeignRuns logs, once after Start, when the store holds unfinished
// runs of flows this app does not bind: another app shares the journal
// (e.g. two apps on one Postgres schema). That is safe — each scheduler
// takes only runs of its own flows — but the apps' runs, keys and console
// are mixed; the hint is to give each app its own schema. It looks at the
// newest unfinished runs only, so it may miss a few old ones.
func (a *App) warnForeignRuns() {
	defer a.bg.Done()
	ctx, cancel := context.WithTimeout(a.base, 10*time.Second)
	defer cancel()
	runs, err := a.runs.ListRuns(ctx, driver.RunFilter{
		Status: []driver.RunStatus{driver.RunRunning, driver.RunSleeping}, Desc: true,
	}, foreignRunsLook)
	if err != nil {
		return // a store that does not answer is reported by what needs it
	}
	own := a.sched.Flows
	var foreign []string
	for _, r := range runs {
		if !slices.Contains(own, r.Flow) && !slices.Contains(foreign, r.Flow) {
			foreign = append(foreign, r.Flow)
		}
	}
	if len(foreign) == 0 {
		return
	}
	slices.Sort(foreign)
	a.log.Warn("oke: the journal holds unfinished runs of flows this app does not bind; another app shares its store. "+
		"This app leaves those runs to the app that binds them; to keep apps apart, give each its own store "+
		"(on Postgres its own schema: postgres.WithSchema)", "flows", foreign)
}
