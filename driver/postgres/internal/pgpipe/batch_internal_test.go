package pgpipe

import (
	"bytes"
	"reflect"
	"testing"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestBatchLayoutMatchesPgconn fails when the pgx release go.mod requires
// changed pgconn.Batch: batches would then be grown anew for every
// pipeline (slower, not wrong) until batchFields is brought up to date.
func TestBatchLayoutMatchesPgconn(t *testing.T) {
	if !batchLayoutMatches {
		t.Fatalf("pgconn.Batch is no longer laid out as batchFields: update batchFields to %v", fieldsOf(reflect.TypeFor[pgconn.Batch]()))
	}
	type other struct {
		buf                   []byte
		statementDescriptions []*pgconn.StatementDescription
		err                   error
		resultFormats         [][]int16
	}
	if sameLayout(reflect.TypeFor[pgconn.Batch](), reflect.TypeFor[other]()) {
		t.Fatal("sameLayout took fields in another order for the same layout")
	}
}

func fieldsOf(t reflect.Type) []string {
	var fs []string
	for i := range t.NumField() {
		f := t.Field(i)
		fs = append(fs, f.Name+" "+f.Type.String())
	}
	return fs
}

// TestResetBatchIsAFreshOne: a batch used, reset and filled again holds
// what a zero Batch filled the same way holds, with nothing left of its
// first use.
func TestResetBatchIsAFreshOne(t *testing.T) {
	sd1 := &pgconn.StatementDescription{Name: "s1", SQL: "SELECT $1"}
	sd2 := &pgconn.StatementDescription{Name: "s2", SQL: "SELECT 2"}
	fill := func(b *pgconn.Batch, keep func([]int16) []int16, n int) {
		for i := range n {
			b.ExecStatement(sd1, [][]byte{[]byte("value-" + string(rune('a'+i)))}, []int16{1}, keep([]int16{1, 0}))
			b.ExecStatement(sd2, nil, nil, nil)
		}
	}
	var kept batch
	b := kept.resetFor(false)
	fill(b, kept.keep, 5) // a longer first use
	b = kept.resetFor(false)
	fill(b, kept.keep, 2)

	var fresh pgconn.Batch
	fill(&fresh, func(f []int16) []int16 { return append([]int16(nil), f...) }, 2)

	got, want := (*batchFields)(unsafe.Pointer(b)), (*batchFields)(unsafe.Pointer(&fresh))
	if !bytes.Equal(got.buf, want.buf) {
		t.Errorf("wire messages differ:\n got %q\nwant %q", got.buf, want.buf)
	}
	if !reflect.DeepEqual(got.statementDescriptions, want.statementDescriptions) {
		t.Errorf("descriptions: got %v, want %v", got.statementDescriptions, want.statementDescriptions)
	}
	if !reflect.DeepEqual(got.resultFormats, want.resultFormats) {
		t.Errorf("result formats: got %v, want %v", got.resultFormats, want.resultFormats)
	}
	if got.err != nil {
		t.Errorf("err: %v", got.err)
	}
}
