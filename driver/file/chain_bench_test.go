package file

import (
	"bytes"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
)

// The line frame alone, without the write(2) or the decode around it: what
// chaining records costs (compare with the frame before it, docs/BENCHMARKS.md).

// benchRec is a claim's put record.
func benchRec() *record {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	row := driver.Row{Key: key(1), Fingerprint: "fp-0123456789abcdef0123456789abcdef", State: driver.Running,
		Owner: "owner-0123456789", LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(24 * time.Hour), CreatedAt: t0}
	return putRecord(&row)
}

// BenchmarkLineEncode encodes one claim's line, chained.
func BenchmarkLineEncode(b *testing.B) {
	rec := benchRec()
	buf := make([]byte, 0, 4096)
	var chain uint32
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = appendRecord(buf[:0], rec, &chain)
	}
}

// BenchmarkLineScan checks the frames and the chain of a log of 10 000
// such lines (the records are not decoded).
func BenchmarkLineScan(b *testing.B) {
	rec := benchRec()
	data := rowsFormatLine("g", "")
	chain, chained := lineCRC(data), true
	for range 10_000 {
		data, _ = appendRecord(data, rec, &chain)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := scanLog(bytes.NewReader(data), "x", func([]byte, int) error { return nil }, nil, &chained); err != nil {
			b.Fatal(err)
		}
	}
}
