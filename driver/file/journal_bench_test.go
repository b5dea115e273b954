package file

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// Run with: go test -run '^$' -bench 'SaveStep|AcquireRun|DueRuns|JournalOpen' -benchmem ./driver/file/
// Record results, with the machine they came from, in docs/BENCHMARKS.md.

// preloadRuns adds n runs to d without an fsync each (the benchmarks are
// not about CreateRun): unowned and due since wake, or finished when done.
func preloadRuns(b *testing.B, d *Driver, n int, wake time.Time, done bool) []string {
	b.Helper()
	j := &d.jr
	ids := make([]string, n)
	j.mu.Lock()
	defer j.mu.Unlock()
	t := now()
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%08d", i)
		r := runOf(ids[i], "")
		r.Status, r.WakeAt, r.CreatedAt, r.UpdatedAt = driver.RunRunning, wake.Add(time.Duration(i)), t, t
		if done {
			r.Status, r.Result = driver.RunCompleted, &driver.Response{Status: 201, Body: []byte(`{"ok":true}`)}
		}
		e := &jrun{run: r}
		_, size, err := j.write(runRecord(e))
		if err != nil {
			b.Fatal(err)
		}
		e.head = int64(size)
		j.addRun(e)
	}
	return ids
}

func journalSyncs(d *Driver) uint64 {
	d.jr.commit.mu.Lock()
	defer d.jr.commit.mu.Unlock()
	return d.jr.commit.syncs
}

// benchStep is a step with a small JSON result, as most steps have.
func benchStep(seq int) driver.Step {
	t := time.Now()
	return driver.Step{Seq: seq, Name: fmt.Sprintf("step %d", seq),
		Result:   []byte(`{"id":"re_3MmlLrLkdIwHu7ix0snN0B15","amount":500,"currency":"usd","status":"succeeded"}`),
		Attempts: 1, StartedAt: t, FinishedAt: t}
}

// BenchmarkSaveStep measures SaveStep, which returns only after an fsync.
// Sequential: one caller saving the steps of 16 runs in turn, so one fsync
// per step. Parallel: 16 callers per CPU, each saving the steps of its own
// run; they share fsyncs (group commit), and fsyncs/op shows how many.
func BenchmarkSaveStep(b *testing.B) {
	b.Run("sequential", func(b *testing.B) {
		d := open(b, b.TempDir())
		ctx := context.Background()
		const runs = 16
		for i := range runs {
			mustCreateRun(b, d, runOf(fmt.Sprintf("run-%02d", i), "bench"), time.Hour)
		}
		before := journalSyncs(d)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := d.SaveStep(ctx, fmt.Sprintf("run-%02d", i%runs), "bench", benchStep(i/runs+1)); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(journalSyncs(d)-before)/float64(b.N), "fsyncs/op")
	})

	b.Run("parallel", func(b *testing.B) {
		d := open(b, b.TempDir())
		ctx := context.Background()
		var next atomic.Int64
		before := journalSyncs(d)
		b.SetParallelism(16)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			id := fmt.Sprintf("run-%02d", next.Add(1))
			if _, err := d.CreateRun(ctx, runOf(id, "bench"), time.Hour); err != nil {
				b.Error(err)
				return
			}
			for seq := 1; pb.Next(); seq++ {
				if err := d.SaveStep(ctx, id, "bench", benchStep(seq)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(journalSyncs(d)-before)/float64(b.N), "fsyncs/op")
	})
}

// BenchmarkAcquireRun measures taking a due run (a map lookup, a heap move,
// one write(2), no fsync) in a journal of 1 000 and 100 000 unfinished runs.
// Each is taken with a lease of 0, so it is due again at once and the
// journal stays the same size; compaction runs when its threshold is met,
// as in production, and is part of the cost.
func BenchmarkAcquireRun(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			d := open(b, b.TempDir())
			ids := preloadRuns(b, d, n, time.Now().Add(-time.Hour), false)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, _, err := d.AcquireRun(ctx, ids[i%n], "bench", 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDueRuns measures listing the 100 longest-due runs of a journal of
// 1 000 and 100 000 runs. "due": every run is due. "mostly-finished": all but
// 1% of the runs are finished (kept for the console), as in a journal that
// has run for a while.
func BenchmarkDueRuns(b *testing.B) {
	for _, shape := range []string{"due", "mostly-finished"} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/runs=%d", shape, n), func(b *testing.B) {
				d := open(b, b.TempDir())
				if shape == "due" {
					preloadRuns(b, d, n, time.Now().Add(-time.Hour), false)
				} else {
					preloadRuns(b, d, n-n/100, time.Now().Add(-time.Hour), true)
					j := &d.jr
					j.mu.Lock()
					for i := range n / 100 { // unfinished, due
						r := runOf(fmt.Sprintf("due-%08d", i), "")
						r.Status, r.WakeAt, r.UpdatedAt = driver.RunRunning, time.Now().Add(-time.Minute), now()
						j.addRun(&jrun{run: r})
					}
					j.mu.Unlock()
				}
				want := 100
				if shape != "due" {
					want = min(100, n/100)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					ids, err := d.DueRuns(ctx, nil, 100)
					if err != nil || len(ids) != want {
						b.Fatalf("DueRuns: %d ids, %v; want %d", len(ids), err, want)
					}
				}
			})
		}
	}
}

// BenchmarkJournalOpen measures replaying a journal of 20 000 finished runs
// of 4 steps each (100 000 records, compacted).
func BenchmarkJournalOpen(b *testing.B) {
	dir := b.TempDir()
	d, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	ids := preloadRuns(b, d, 20_000, time.Now().Add(-time.Hour), true)
	j := &d.jr
	j.mu.Lock()
	for _, id := range ids {
		e := j.runs[id]
		for seq := 1; seq <= 4; seq++ {
			s := benchStep(seq)
			_, size, err := j.write(stepRecord(id, &s, now()))
			if err != nil {
				b.Fatal(err)
			}
			j.addStep(e, s, now(), 0, size)
		}
	}
	j.mu.Unlock()
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(d.jr.runs) != 20_000 {
			b.Fatalf("%d runs", len(d.jr.runs))
		}
		_ = d.Close()
		b.StartTimer()
	}
}

// BenchmarkJournalCompact measures one compaction of a journal of 20 000
// finished runs of 4 steps each (the pause journal writes see while it runs).
func BenchmarkJournalCompact(b *testing.B) {
	d := open(b, b.TempDir())
	ids := preloadRuns(b, d, 20_000, time.Now().Add(-time.Hour), true)
	j := &d.jr
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		e := j.runs[id]
		for seq := 1; seq <= 4; seq++ {
			s := benchStep(seq)
			_, size, err := j.write(stepRecord(id, &s, now()))
			if err != nil {
				b.Fatal(err)
			}
			j.addStep(e, s, now(), 0, size)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := j.compactLocked(); err != nil {
			b.Fatal(err)
		}
	}
}
