package app

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/okengine/oke"
)

// The durable flows of the demo: POST /pipeline and POST /reminders (the
// refund is in refunds.go). Each runs as a journal run (oke.Options{Durable:
// true}): its steps' results are saved, and after a crash the run picks up
// where it stopped — the steps saved before the crash are not run again. A
// retried Idempotency-Key resumes its run; the app's scheduler picks up runs
// whose process died, and wakes runs parked in a durable sleep.

// PipelineIn is the body of POST /pipeline.
type PipelineIn struct {
	Tag    string `json:"tag" minLength:"1" maxLength:"200"`  // names the pipeline
	Steps  int    `json:"steps" minimum:"0" maximum:"1000"`   // how many steps
	StepMs int    `json:"stepMs" minimum:"0" maximum:"60000"` // how long each step waits before it writes
}

// Pipeline is the answer of POST /pipeline once every step is done.
type Pipeline struct {
	Tag   string `json:"tag"`
	Steps int    `json:"steps"`
}

// pipelineFlow is demo.pipeline: steps 1…n, each of which waits stepMs and
// then adds 1 to the execution count of (tag, i) in the business database. GET
// /pipeline/{tag} shows the counts: after any number of crashes every count
// is 1, except that the step a crash cut off after its write (but before its
// result was saved) shows 2 — the one thing that runs again.
func (s *Server) pipelineFlow() *oke.Flow[PipelineIn, Pipeline] {
	return oke.NewFlow("demo.pipeline", oke.Options{
		Durable:     true,
		Description: "Run steps durably: step i waits stepMs, then counts its execution for (tag, i).",
	}, func(ctx context.Context, in PipelineIn, fx *oke.Fx) (oke.Response[Pipeline], error) {
		for i := 1; i <= in.Steps; i++ {
			_, err := oke.Step(ctx, fmt.Sprintf("step %d", i), func(ctx context.Context) (int, error) {
				if err := wait(ctx, time.Duration(in.StepMs)*time.Millisecond); err != nil {
					return 0, err
				}
				// In the step's transaction: the count and the step's saved
				// result commit together (on Postgres, where the journal is,
				// every step of the run commits once, with its answer).
				tx, err := fx.Tx(ctx)
				if err != nil {
					return 0, err
				}
				var n int
				err = tx.QueryRow(ctx,
					`INSERT INTO pipeline_counts (tag, step, executions) VALUES ($1, $2, 1)
					 ON CONFLICT (tag, step) DO UPDATE SET executions = pipeline_counts.executions + 1
					 RETURNING executions`, in.Tag, i).Scan(&n)
				if err != nil {
					return 0, fmt.Errorf("count step %d of pipeline %q: %w", i, in.Tag, err)
				}
				return n, nil
			})
			if err != nil {
				return oke.Response[Pipeline]{}, err
			}
		}
		return oke.Created(Pipeline{Tag: in.Tag, Steps: in.Steps}, "/pipeline/"+url.PathEscape(in.Tag)), nil
	})
}

// wait waits d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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

// RemindIn is the body of POST /reminders.
type RemindIn struct {
	To string `json:"to" minLength:"1" maxLength:"320"` // who to remind
	// Delay is a Go duration, e.g. "2s", "1h30m", "1500ms": each unit at
	// most once, in the order h, m, s, ms, us, ns, each number at most six
	// digits (so it never overflows; about 116 years at most). The tags are
	// the whole rule, so openapi.json states it exactly.
	Delay string `json:"delay" minLength:"1" pattern:"^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs|μs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$"`
}

// Validate writes the delay in its canonical form (what a tag cannot do), so
// "2000ms" and "2s" are the same request (and the same fingerprint).
func (in *RemindIn) Validate() error {
	d, err := time.ParseDuration(in.Delay)
	if err != nil { // the pattern admits only what parses
		return fmt.Errorf(`delay must be a duration such as "2s" or "1h30m", got %q`, in.Delay)
	}
	in.Delay = d.String()
	return nil
}

// scheduled is what the first step of demo.remind saves.
type scheduled struct {
	ID  int64     `json:"id"`
	Due time.Time `json:"due"`
}

// remindFlow is demo.remind: it records the reminder, sleeps durably until
// it is due — the request gets 204 at once, and a retry replays the 204 —
// and then a step marks it sent (and emits reminder.sent). The sleep
// survives restarts: the app's scheduler wakes the run when it is due, in
// whichever process holds the data folder then. The run's own answer is 204
// too, so a reminder due at once answers the same.
func (s *Server) remindFlow() *oke.Flow[RemindIn, struct{}] {
	return oke.NewFlow("demo.remind", oke.Options{
		Durable:     true,
		Description: "Remind someone after a delay: a durable sleep (204 at once), then a step marks the reminder sent.",
	}, func(ctx context.Context, in RemindIn, fx *oke.Fx) (oke.Response[struct{}], error) {
		delay, _ := time.ParseDuration(in.Delay) // validated
		r, err := oke.Step(ctx, "schedule", func(ctx context.Context) (scheduled, error) {
			due := fx.Now().UTC().Add(delay)
			var id int64
			err := fx.Store(s.db).QueryRow(ctx,
				`INSERT INTO reminders (recipient, delay_ms, due_at) VALUES ($1, $2, $3) RETURNING id`,
				in.To, delay.Milliseconds(), due.Format(timeLayout)).Scan(&id)
			if err != nil {
				return scheduled{}, fmt.Errorf("insert reminder: %w", err)
			}
			return scheduled{ID: id, Due: due}, nil
		})
		if err != nil {
			return oke.Response[struct{}]{}, err
		}
		if err := oke.SleepUntil(ctx, "wait until due", r.Due); err != nil {
			return oke.Response[struct{}]{}, err // oke.ErrSleeping: parked, 204
		}
		_, err = oke.Step(ctx, "send", func(ctx context.Context) (bool, error) {
			if _, err := fx.Store(s.db).Exec(ctx,
				`UPDATE reminders SET sent = 1, sent_at = $2 WHERE id = $1 AND sent = 0`,
				r.ID, fx.Now().UTC().Format(timeLayout)); err != nil {
				return false, fmt.Errorf("mark reminder %d sent: %w", r.ID, err)
			}
			return true, fx.Emit(ctx, "reminder.sent", Reminder{ID: r.ID, To: in.To, Sent: true})
		})
		if err != nil {
			return oke.Response[struct{}]{}, err
		}
		return oke.NoContent[struct{}](), nil
	})
}

// timeLayout is how the demo writes times (SQLite and Postgres alike): RFC 3339, UTC,
// milliseconds, like the schema's defaults.
const timeLayout = "2006-01-02T15:04:05.000Z"

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
