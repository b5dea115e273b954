package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/okengine/oke"
)

// The durable routes of the demo (POST /refunds, POST /pipeline, POST
// /reminders) need durable execution (oke.Step, durable sleep, the
// journal), which oke does not have yet. Until then they answer 501
// NotImplemented, after the gate, without running anything or storing an
// Idempotency-Key row, so a retry after the upgrade runs for real. Their
// reads (GET /pipeline/{tag}, GET /reminders) are real already.

// errDurable is the 501 answer of a durable route.
func errDurable(route, flow string) *oke.Error {
	return oke.Fail(http.StatusNotImplemented, "NotImplemented",
		fmt.Sprintf("%s runs the durable flow %s; durable execution arrives with the durable-execution work and is not available yet. Nothing was run or stored.", route, flow))
}

// notImplemented answers a durable route: the gate's 401/403 first, then
// 501.
func notImplemented(route, flow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := Gate(r, flow); err != nil {
			oke.WriteError(w, err)
			return
		}
		oke.WriteError(w, errDurable(route, flow))
	})
}

// PipelineLogIn holds GET /pipeline/{tag}'s path parameter.
type PipelineLogIn struct {
	Tag string `json:"tag"`
}

// PipelineStep is how many times one step of a pipeline ran.
type PipelineStep struct {
	Step       int `json:"step"`
	Executions int `json:"executions"`
}

// PipelineLog is the answer of GET /pipeline/{tag}.
type PipelineLog struct {
	Tag   string         `json:"tag"`
	Steps []PipelineStep `json:"steps"`
}

// pipelineLogFlow is demo.pipelineLog: how many times each step of the
// pipeline tagged tag ran. A tag that never ran has no steps.
func (s *Server) pipelineLogFlow() *oke.Flow[PipelineLogIn, PipelineLog] {
	return oke.NewFlow("demo.pipelineLog", oke.Options{
		Effects:     []oke.Effect{oke.EffectRead},
		Description: "How many times each step of a pipeline ran.",
	}, func(ctx context.Context, in PipelineLogIn, fx *oke.Fx) (oke.Response[PipelineLog], error) {
		rows, err := fx.Store(s.rdb).Query(ctx,
			`SELECT step, executions FROM pipeline_counts WHERE tag = $1 ORDER BY step`, in.Tag)
		if err != nil {
			return oke.Response[PipelineLog]{}, fmt.Errorf("read pipeline %q: %w", in.Tag, err)
		}
		defer rows.Close()
		out := PipelineLog{Tag: in.Tag, Steps: []PipelineStep{}}
		for rows.Next() {
			var st PipelineStep
			if err := rows.Scan(&st.Step, &st.Executions); err != nil {
				return oke.Response[PipelineLog]{}, fmt.Errorf("read pipeline %q: %w", in.Tag, err)
			}
			out.Steps = append(out.Steps, st)
		}
		if err := rows.Err(); err != nil {
			return oke.Response[PipelineLog]{}, fmt.Errorf("read pipeline %q: %w", in.Tag, err)
		}
		return oke.OK(out), nil
	})
}

// Reminder is one reminder as GET /reminders shows it.
type Reminder struct {
	ID   int64  `json:"id"`
	To   string `json:"to"`
	Sent bool   `json:"sent"`
}

// ReminderList is the answer of GET /reminders.
type ReminderList struct {
	Reminders []Reminder `json:"reminders"`
}

// remindersFlow is demo.reminders: every reminder and whether it was sent.
func (s *Server) remindersFlow() *oke.Flow[struct{}, ReminderList] {
	return oke.NewFlow("demo.reminders", oke.Options{
		Effects:     []oke.Effect{oke.EffectRead},
		Description: "List reminders and whether each was sent.",
	}, func(ctx context.Context, _ struct{}, fx *oke.Fx) (oke.Response[ReminderList], error) {
		rows, err := fx.Store(s.rdb).Query(ctx, `SELECT id, recipient, sent FROM reminders ORDER BY id`)
		if err != nil {
			return oke.Response[ReminderList]{}, fmt.Errorf("list reminders: %w", err)
		}
		defer rows.Close()
		out := ReminderList{Reminders: []Reminder{}}
		for rows.Next() {
			var r Reminder
			if err := rows.Scan(&r.ID, &r.To, &r.Sent); err != nil {
				return oke.Response[ReminderList]{}, fmt.Errorf("list reminders: %w", err)
			}
			out.Reminders = append(out.Reminders, r)
		}
		if err := rows.Err(); err != nil {
			return oke.Response[ReminderList]{}, fmt.Errorf("list reminders: %w", err)
		}
		return oke.OK(out), nil
	})
}
