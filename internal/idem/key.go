// Package idem holds the driver-agnostic rules of Idempotency-Key handling:
// key validation, TTL parsing, fingerprints, and the claim state machine that
// turns a driver's atomic primitives into the outcomes of DESIGN.md section 3.
package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Key length bounds, in characters (all characters are single-byte ASCII).
const (
	MinKeyLen = 16
	MaxKeyLen = 255
)

// ErrKeyInvalid is returned by ValidateKey.
var ErrKeyInvalid = errors.New("idempotency key must be 16–255 printable ASCII characters")

// ValidateKey reports whether k is 16–255 characters, each printable ASCII
// (0x20–0x7E).
func ValidateKey(k string) error {
	if len(k) < MinKeyLen || len(k) > MaxKeyLen {
		return ErrKeyInvalid
	}
	return validateChars(k)
}

// ValidateDedupeKey checks a webhook dedupe key taken from a payload: 1–255
// printable ASCII characters (providers' event ids are often short).
func ValidateDedupeKey(k string) error {
	if len(k) < 1 || len(k) > MaxKeyLen {
		return ErrKeyInvalid
	}
	return validateChars(k)
}

func validateChars(k string) error {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7E {
			return ErrKeyInvalid
		}
	}
	return nil
}

// DefaultTTL is how long a stored response is kept when a flow names no TTL.
const DefaultTTL = 24 * time.Hour

// MaxTTL bounds TTLs so that deadlines never overflow time.Time arithmetic.
const MaxTTL = 100 * 365 * 24 * time.Hour

// ParseTTL parses a TTL: a positive integer followed by one unit of ms, s,
// m, h or d ("500ms", "2s", "15m", "24h", "7d"). Nothing else is accepted:
// no sign, no spaces, no fractions, no compound values.
func ParseTTL(s string) (time.Duration, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("TTL %q: want a positive integer followed by ms, s, m, h or d (e.g. \"24h\")", s)
	}
	var unit time.Duration
	switch s[i:] {
	case "ms":
		unit = time.Millisecond
	case "s":
		unit = time.Second
	case "m":
		unit = time.Minute
	case "h":
		unit = time.Hour
	case "d":
		unit = 24 * time.Hour
	default:
		return 0, fmt.Errorf("TTL %q: unit must be one of ms, s, m, h, d (e.g. \"24h\")", s)
	}
	n, err := strconv.ParseUint(s[:i], 10, 63)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("TTL %q: the number must be a positive integer", s)
	}
	if n > uint64(MaxTTL/unit) {
		return 0, fmt.Errorf("TTL %q: longer than the maximum of 100 years", s)
	}
	return time.Duration(n) * unit, nil
}

// FormatTTL writes d in the largest unit of ParseTTL's that divides it
// ("24h", "7d", "2s", "500ms"); ParseTTL(FormatTTL(d)) == d for a positive
// whole number of milliseconds.
func FormatTTL(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d >= u.d && d%u.d == 0 {
			if u.name == "d" && d/u.d == 1 {
				return "24h" // as spec 004 writes the default
			}
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// Fingerprint is the hex SHA-256 of the flow name and the canonical encoding
// of the validated input. A zero byte separates the two so that no flow name
// and input can collide with another pair.
func Fingerprint(flow string, canonicalInput []byte) string {
	h := sha256.New()
	h.Write([]byte(flow))
	h.Write([]byte{0})
	h.Write(canonicalInput)
	var sum [sha256.Size]byte
	var out [2 * sha256.Size]byte // one allocation: the string
	hex.Encode(out[:], h.Sum(sum[:0]))
	return string(out[:])
}
