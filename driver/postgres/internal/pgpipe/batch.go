package pgpipe

import (
	"reflect"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
)

// A batch is a pgconn.Batch kept with its connection, so that the buffers
// it grows as statements are queued (the wire messages, the statements'
// descriptions and result formats: about 4 KB and a dozen allocations for
// a claim's pipeline) serve every transaction of the connection instead of
// being grown again for each one.
//
// pgconn.Batch has no way to be emptied and used again, so reset empties
// it through a copy of its layout (batchFields), and only when that copy
// is exactly pgconn.Batch's, as checked once at start-up
// (batchLayoutMatches): should a pgx release change the type, each use
// starts from a zero Batch as before — slower, never wrong.
// TestBatchLayoutMatchesPgconn fails on such a release, so that the copy is
// brought up to date.
//
// A connection has one batch for its prelude's pipeline and one for its
// commit: each is reset only when the connection is about to send it
// again, long after the results of the one before were read (pgconn reads
// a batch's descriptions and formats until then).
type batch struct {
	b       pgconn.Batch
	formats []int16 // the result formats of the statements queued, one after the other
}

// batchFields is pgconn.Batch's layout in the pgx release go.mod requires.
type batchFields struct {
	buf                   []byte
	statementDescriptions []*pgconn.StatementDescription
	resultFormats         [][]int16
	err                   error
}

// maxKeptBatch is the largest wire buffer a batch keeps for the next use;
// a larger one (a statement with a large argument) is dropped.
const maxKeptBatch = 64 << 10

// batchLayoutMatches reports whether batchFields is pgconn.Batch's layout:
// the same fields, names, types and offsets, in the same order.
var batchLayoutMatches = sameLayout(reflect.TypeFor[pgconn.Batch](), reflect.TypeFor[batchFields]())

func sameLayout(a, b reflect.Type) bool {
	if a.Size() != b.Size() || a.NumField() != b.NumField() {
		return false
	}
	for i := range a.NumField() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Type != fb.Type || fa.Offset != fb.Offset {
			return false
		}
	}
	return true
}

// reset empties b for a new pipeline on pgc and returns it. It starts from
// a zero Batch instead when the layout does not match, or when pgc is
// busy (a result of b's may still be read: never, as this package uses
// its connections, but a busy connection is one ExecBatch refuses anyway).
func (b *batch) reset(pgc *pgconn.PgConn) *pgconn.Batch { return b.resetFor(pgc.IsBusy()) }

// resetFor is reset, for a connection that is busy or not.
func (b *batch) resetFor(busy bool) *pgconn.Batch {
	if !batchLayoutMatches || busy {
		b.b, b.formats = pgconn.Batch{}, nil
		return &b.b
	}
	f := (*batchFields)(unsafe.Pointer(&b.b))
	if cap(f.buf) > maxKeptBatch {
		f.buf = nil
	}
	f.buf = f.buf[:0]
	clear(f.statementDescriptions)
	f.statementDescriptions = f.statementDescriptions[:0]
	clear(f.resultFormats)
	f.resultFormats = f.resultFormats[:0]
	f.err = nil
	b.formats = b.formats[:0]
	return &b.b
}

// keep returns a copy of formats (which the next Build of the argument
// encoders overwrites) that lasts until the next reset, in b's own buffer.
func (b *batch) keep(formats []int16) []int16 {
	if len(formats) == 0 {
		return nil
	}
	start := len(b.formats)
	b.formats = append(b.formats, formats...)
	return b.formats[start:len(b.formats):len(b.formats)]
}
