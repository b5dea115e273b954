package file

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

var scaleRows = flag.String("scale-rows", "1e5,1e6", "row counts of BenchmarkAtScale, comma-separated (e.g. 1e5,1e6,1e7)")

// BenchmarkAtScale is the file driver's ceiling: a store of n completed
// rows shaped like the payments demo's charges (its key, a SHA-256
// fingerprint, a 120-byte JSON body, a location), for each n of
// -scale-rows:
//
//	go test ./driver/file/ -run '^$' -bench AtScale -benchtime 20000x -args -scale-rows 1e5,1e6,1e7
//
// It reports what a user sizing a deployment needs: open-s, Open's time
// (the log replayed into memory: an app's start, and its restart after a
// crash); heap-B/row, the Go heap the open store holds per row (after a
// GC); file-B/row, the log's bytes per row; and as ns/op one Claim of a
// fresh key (a map insert and one write(2), no fsync) at that size (the
// claims add rows: a few per cent of n). 10⁷ rows need about 8 GB of heap
// and, on a quiet 2-core machine, about four minutes in all (a minute of
// it the Open); docs/BENCHMARKS.md §25 has the figures, docs/production.md
// the sizing guide.
func BenchmarkAtScale(b *testing.B) {
	for _, f := range strings.Split(*scaleRows, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 1 {
			b.Fatalf("-scale-rows: %q is not a row count", f)
		}
		n := int(v)
		dir := filepath.Join(b.TempDir(), "oke")
		loadCharges(b, dir, n)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		d, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		open := time.Since(t0)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		rows := len(d.rows)
		if rows != n {
			b.Fatalf("%d rows after Open, want %d", rows, n)
		}
		st, err := os.Stat(filepath.Join(dir, logName))
		if err != nil {
			b.Fatal(err)
		}
		fresh := 0
		b.Run(fmt.Sprintf("rows=%.0e", v), func(b *testing.B) {
			ctx := context.Background()
			r := driver.ClaimRequest{Fingerprint: strings.Repeat("f", 64), Owner: "bench", Lease: time.Minute, TTL: 24 * time.Hour}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				fresh++
				r.Key = chargeKey(fmt.Sprintf("fresh-key-%012d", fresh))
				if res, err := d.Claim(ctx, r); err != nil || !res.Claimed {
					b.Fatalf("Claim: %v, claimed %v", err, res.Claimed)
				}
			}
			b.StopTimer()
			b.ReportMetric(open.Seconds(), "open-s")
			b.ReportMetric(float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc))/float64(rows), "heap-B/row")
			b.ReportMetric(float64(st.Size())/float64(rows), "file-B/row")
		})
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// chargeKey is a key as the payments demo's POST /charges stores it.
func chargeKey(k string) driver.Key {
	return driver.Key{Tenant: "default", Principal: "anon", Flow: "payments.charge", Key: k}
}

// loadCharges writes n completed charge rows to a new store in dir, the way
// Complete writes them (one put record each) but without waiting for an
// fsync per row, and closes it.
func loadCharges(b *testing.B, dir string, n int) {
	b.Helper()
	d, err := Open(dir, WithCompactAfter(1<<30))
	if err != nil {
		b.Fatal(err)
	}
	t := now()
	d.mu.Lock()
	for i := range n {
		id := fmt.Sprintf("ch_%024d", i)
		row := driver.Row{
			Key:         chargeKey(fmt.Sprintf("charge-key-%012d", i)),
			Fingerprint: fmt.Sprintf("%064x", i),
			State:       driver.Completed,
			ExpiresAt:   t.Add(24 * time.Hour),
			CreatedAt:   t,
			CompletedAt: t,
			Response: &driver.Response{Status: 201, ContentType: "application/json", Location: "/charges/" + id,
				Body: []byte(`{"id":"` + id + `","amount":1000,"currency":"usd","createdAt":"` + t.Format(time.RFC3339Nano) + `"}`)},
		}
		seq, err := d.write(putRecord(&row))
		if err != nil {
			d.mu.Unlock()
			b.Fatal(err)
		}
		d.rows[row.Key] = &entry{row: row, seq: seq}
	}
	d.mu.Unlock()
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
}
