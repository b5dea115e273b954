package file

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// Run with: go test -run '^$' -bench . -benchmem ./driver/file/
// Record results, with the machine they came from, in docs/BENCHMARKS.md.

// preload fills a new store with n rows that have already expired (lease and
// TTL 0), so claiming one of them again replaces it: the store stays at n rows
// however long the benchmark runs, as a store whose TTLs pass does.
func preload(b *testing.B, n int) (*Driver, []driver.Key) {
	b.Helper()
	d := open(b, b.TempDir())
	keys := make([]driver.Key, n)
	for i := range keys {
		keys[i] = key(i)
		r := claimReq(keys[i], "preload")
		r.Lease, r.TTL = 0, 0
		mustClaim(b, d, r)
	}
	return d, keys
}

// BenchmarkClaim measures one Claim (a map lookup and one write(2), no fsync)
// on a store holding 1 000 and 100 000 rows. Compaction runs when its
// threshold is met, as in production, and is part of the cost.
func BenchmarkClaim(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			d, keys := preload(b, n)
			ctx := context.Background()
			r := driver.ClaimRequest{Fingerprint: "fp", Owner: "bench"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r.Key = keys[i%n]
				res, err := d.Claim(ctx, r)
				if err != nil || !res.Claimed {
					b.Fatalf("Claim: %v, claimed %v", err, res.Claimed)
				}
			}
			b.StopTimer()
			if len(d.rows) != n {
				b.Fatalf("store holds %d rows, want %d", len(d.rows), n)
			}
		})
	}
}

// BenchmarkComplete measures Complete, which returns only after an fsync.
// Sequential: one caller, so one fsync per Complete. Parallel: 16 callers per
// CPU wait together and share fsyncs (group commit); fsyncs/op shows how many.
func BenchmarkComplete(b *testing.B) {
	resp := driver.Response{Status: 201, ContentType: "application/json", Location: "/charges/ch_1",
		Body: make([]byte, 1024)}
	setup := func(b *testing.B) (*Driver, []driver.Key) {
		d := open(b, b.TempDir())
		keys := make([]driver.Key, b.N)
		for i := range keys {
			keys[i] = key(i)
			mustClaim(b, d, claimReq(keys[i], "bench"))
		}
		return d, keys
	}
	report := func(b *testing.B, d *Driver, syncsBefore uint64) {
		d.commit.mu.Lock()
		syncs := d.commit.syncs - syncsBefore
		d.commit.mu.Unlock()
		b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/op")
	}

	b.Run("sequential", func(b *testing.B) {
		d, keys := setup(b)
		ctx := context.Background()
		before := d.commit.syncs
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := d.Complete(ctx, keys[i], "bench", resp, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		report(b, d, before)
	})

	b.Run("parallel", func(b *testing.B) {
		d, keys := setup(b)
		ctx := context.Background()
		var next atomic.Int64
		before := d.commit.syncs
		b.SetParallelism(16)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1) - 1
				if err := d.Complete(ctx, keys[i], "bench", resp, time.Hour); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		report(b, d, before)
	})
}

// BenchmarkOpen measures replaying a log of 100 000 completed rows.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	d, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100_000 {
		k := key(i)
		mustClaim(b, d, claimReq(k, "o"))
		// Completes without waiting for an fsync each: the benchmark is Open.
		d.mu.Lock()
		e := d.rows[k]
		row := e.row
		row.State, row.Owner, row.CompletedAt = driver.Completed, "", row.CreatedAt
		row.Response = &driver.Response{Status: 201, ContentType: "application/json", Body: make([]byte, 256)}
		seq, err := d.write(putRecord(&row))
		if err != nil {
			b.Fatal(err)
		}
		d.rows[k] = &entry{row: row, seq: seq}
		d.mu.Unlock()
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d, err := Open(dir, WithCompactAfter(1<<30))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(d.rows) != 100_000 {
			b.Fatalf("%d rows", len(d.rows))
		}
		_ = d.Close()
		b.StartTimer()
	}
}

// BenchmarkCompact measures one compaction of a log of 100 000 live rows
// (the pause writes see while it runs). Divided by the 200 000 writes that
// must come between two compactions of such a log, it is the amortized cost
// compaction adds to each write.
func BenchmarkCompact(b *testing.B) {
	d, _ := preload(b, 100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := d.Compact(); err != nil {
			b.Fatal(err)
		}
	}
}
