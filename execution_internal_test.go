package oke

import (
	"testing"
	"unsafe"
)

// TestExecutionFitsItsSizeClass: an execution (its Exec, its context and the
// contexts of its first steps, its response) is one allocation per run;
// past 1 536 bytes it moves to the allocator's next size class, 1 792, and
// every run costs 17 % more memory. A field added to journal.Exec or
// runCtx must fit, or runCtxSteps shrink.
func TestExecutionFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(execution{}); n > 1536 {
		t.Errorf("an execution is %d bytes, over the 1 536-byte size class; trim a field or lower runCtxSteps (%d)", n, runCtxSteps)
	}
}
