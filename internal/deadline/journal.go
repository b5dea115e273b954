package deadline

import (
	"context"
	"time"

	"github.com/okengine/oke/driver"
)

// Journal returns j with every call bounded by d (Bound; no bound when d
// is zero or less) and traced (Call), or nil when j is nil. The result is only a driver.Journal: look
// for j's optional interfaces (driver.Signaler, driver.Notifier, …) on j.
func Journal(j driver.Journal, d time.Duration) driver.Journal {
	if j == nil {
		return j
	}
	return &journal{j: j, d: d}
}

type journal struct {
	j driver.Journal
	d time.Duration
}

var _ driver.Journal = (*journal)(nil)

func (b *journal) CreateRun(ctx context.Context, run driver.Run, lease time.Duration) (driver.Run, error) {
	ctx, end := Call(ctx, b.d, "create_run")
	r, err := b.j.CreateRun(ctx, run, lease)
	return r, end(err)
}

func (b *journal) GetRun(ctx context.Context, id string) (driver.Run, []driver.Step, error) {
	ctx, end := Call(ctx, b.d, "get_run")
	r, s, err := b.j.GetRun(ctx, id)
	return r, s, end(err)
}

func (b *journal) ListRuns(ctx context.Context, f driver.RunFilter, limit int) ([]driver.Run, error) {
	ctx, end := Call(ctx, b.d, "list_runs")
	r, err := b.j.ListRuns(ctx, f, limit)
	return r, end(err)
}

func (b *journal) AcquireRun(ctx context.Context, id, owner string, lease time.Duration) (driver.Run, []driver.Step, error) {
	ctx, end := Call(ctx, b.d, "acquire_run")
	r, s, err := b.j.AcquireRun(ctx, id, owner, lease)
	return r, s, end(err)
}

func (b *journal) RenewRun(ctx context.Context, id, owner string, lease time.Duration) error {
	ctx, end := Call(ctx, b.d, "renew_run")
	return end(b.j.RenewRun(ctx, id, owner, lease))
}

func (b *journal) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	ctx, end := Call(ctx, b.d, "save_step")
	return end(b.j.SaveStep(ctx, id, owner, step))
}

func (b *journal) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	ctx, end := Call(ctx, b.d, "finish_run")
	return end(b.j.FinishRun(ctx, id, owner, f))
}

func (b *journal) DueRuns(ctx context.Context, flows []string, limit int) ([]string, error) {
	ctx, end := Call(ctx, b.d, "due_runs")
	ids, err := b.j.DueRuns(ctx, flows, limit)
	return ids, end(err)
}

func (b *journal) ClaimKey(ctx context.Context, key, runID string) (string, error) {
	ctx, end := Call(ctx, b.d, "claim_key")
	id, err := b.j.ClaimKey(ctx, key, runID)
	return id, end(err)
}
