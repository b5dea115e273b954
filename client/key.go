package client

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// The Idempotency-Key rule shared with the server: 16–255 characters, each
// printable ASCII (0x20–0x7E).
const (
	MinKeyLen = 16
	MaxKeyLen = 255
)

// HeaderIdempotencyKey and HeaderReplayed are the header names of the
// idempotency contract; HeaderPrefer and HeaderPreferenceApplied those of
// RFC 7240, with which a retry asks the server to hold it while the first
// call with its key runs (Prefer: wait=N) and the server says it did
// (Preference-Applied: wait=N).
const (
	HeaderIdempotencyKey    = "Idempotency-Key"
	HeaderReplayed          = "Idempotent-Replayed"
	HeaderPrefer            = "Prefer"
	HeaderPreferenceApplied = "Preference-Applied"
)

// NewKey returns a fresh random Idempotency-Key: a version 4 UUID drawn from
// crypto/rand, 36 characters long. The client mints one per logical call on
// its own; call NewKey when you want to keep the key yourself (for example,
// stored beside a checkout attempt) and pass it with [Key] on every try.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])  // crypto/rand.Read never fails (it crashes instead).
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// ValidateKey reports whether key obeys the server's rule: 16–255 characters,
// each printable ASCII 0x20–0x7E. It also rejects a key that starts or ends
// with a space: HTTP strips such spaces from header values, so the server
// would see a different (perhaps too short) key than the one the caller
// holds. The error it returns matches [ErrKeyInvalid] with errors.Is. The
// client runs it on every key passed with [Key] before anything is sent.
func ValidateKey(key string) error {
	if n := len(key); n < MinKeyLen || n > MaxKeyLen {
		return &keyError{reason: fmt.Sprintf("it is %d bytes long, want %d–%d printable ASCII characters", n, MinKeyLen, MaxKeyLen)}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return &keyError{reason: fmt.Sprintf("byte %d is %#02x, not printable ASCII (0x20–0x7E)", i, c)}
		}
	}
	if key[0] == ' ' || key[len(key)-1] == ' ' {
		return &keyError{reason: "it starts or ends with a space, which HTTP strips from header values"}
	}
	return nil
}

// keyError is a key rejected on the client, before sending. It matches
// ErrKeyInvalid (the same rule the server applies), or, when missing,
// ErrKeyMissing (a flow that requires a key called with NoKey), but is not
// an *Error: no response exists.
type keyError struct {
	reason  string
	missing bool
}

func (e *keyError) Error() string {
	if e.missing {
		return "oke client: " + e.reason
	}
	return "oke client: invalid Idempotency-Key: " + e.reason
}

func (e *keyError) Is(target error) bool {
	if e.missing {
		return target == ErrKeyMissing
	}
	return target == ErrKeyInvalid
}
