package oke_test

import (
	"errors"
	"testing"

	"github.com/okengine/oke"
)

// TestCatalogIsExact: the four Idempotency-Key codes, statuses and messages
// are a public contract.
func TestCatalogIsExact(t *testing.T) {
	for _, c := range []struct {
		err     *oke.Error
		code    string
		status  int
		message string
	}{
		{oke.ErrIdempotencyKeyMissing, "IdempotencyKeyMissing", 400, "This call requires an Idempotency-Key header."},
		{oke.ErrIdempotencyKeyInvalid, "IdempotencyKeyInvalid", 400, "Idempotency-Key must be 16–255 printable ASCII characters."},
		{oke.ErrIdempotencyKeyReused, "IdempotencyKeyReused", 422, "This Idempotency-Key was already used with a different request."},
		{oke.ErrIdempotencyInProgress, "IdempotencyInProgress", 409, "This Idempotency-Key is still running. Retry after the given delay."},
	} {
		if c.err.Code != c.code || c.err.Status != c.status || c.err.Message != c.message {
			t.Errorf("%s: got %d %q %q", c.code, c.err.Status, c.err.Code, c.err.Message)
		}
	}
}

func TestErrorIsMatchesByCode(t *testing.T) {
	err := oke.ErrIdempotencyKeyReused.WithMessage("details")
	if !errors.Is(err, oke.ErrIdempotencyKeyReused) || errors.Is(err, oke.ErrIdempotencyKeyMissing) {
		t.Fatal("errors.Is must match on the code")
	}
	cause := errors.New("disk full")
	if !errors.Is(oke.ErrStoreUnavailable.WithCause(cause), cause) {
		t.Fatal("WithCause must unwrap to the cause")
	}
}
