package deadline

import (
	"testing"
	"unsafe"
)

// TestBoundIs128Bytes: every store call makes a bound, so its size (a
// size class of the allocator) is part of each request's cost.
func TestBoundIs128Bytes(t *testing.T) {
	if got := unsafe.Sizeof(bound{}); got > 128 {
		t.Errorf("a bound takes %d bytes, want at most 128", got)
	}
}
