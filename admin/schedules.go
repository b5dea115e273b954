package admin

import (
	"net/http"

	"github.com/okengine/oke"
	"github.com/okengine/oke/internal/httpx"
)

// SchedulesPage is the answer of GET /schedules: one entry per flow bound
// with oke.Cron — the flow, its spec, location and catch-up policy, the
// next tick, and the run of the newest tick the journal holds (last).
type SchedulesPage struct {
	Schedules []oke.ScheduleInfo `json:"schedules"`
}

// schedules serves GET /schedules.
func (a *api) schedules(w http.ResponseWriter, r *http.Request) {
	infos, err := a.app.Schedules(r.Context())
	if err != nil {
		oke.WriteError(w, storeError(err))
		return
	}
	if infos == nil {
		infos = []oke.ScheduleInfo{}
	}
	httpx.WriteJSON(w, http.StatusOK, SchedulesPage{Schedules: infos})
}
