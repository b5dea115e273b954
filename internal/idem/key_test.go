package idem

import (
	"strings"
	"testing"
	"time"
)

func TestValidateKey(t *testing.T) {
	for _, c := range []struct {
		name string
		key  string
		ok   bool
	}{
		{"empty", "", false},
		{"15 characters is too short", strings.Repeat("a", 15), false},
		{"16 characters", strings.Repeat("a", 16), true},
		{"255 characters", strings.Repeat("a", 255), true},
		{"256 characters is too long", strings.Repeat("a", 256), false},
		{"space 0x20 is printable", strings.Repeat(" ", 16), true},
		{"tilde 0x7E is printable", strings.Repeat("~", 16), true},
		{"DEL 0x7F", strings.Repeat("a", 15) + "\x7f", false},
		{"control 0x1F", "\x1f" + strings.Repeat("a", 15), false},
		{"newline", strings.Repeat("a", 15) + "\n", false},
		{"NUL", strings.Repeat("a", 15) + "\x00", false},
		{"UTF-8 é (16 bytes, 15 runes)", "é" + strings.Repeat("a", 14), false},
		{"a UUID", "123e4567-e89b-12d3-a456-426614174000", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := ValidateKey(c.key); (err == nil) != c.ok {
				t.Fatalf("ValidateKey(%q) = %v, want ok=%v", c.key, err, c.ok)
			}
		})
	}
}

func TestParseTTL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration // 0: an error
	}{
		{"1ms", time.Millisecond},
		{"500ms", 500 * time.Millisecond},
		{"2s", 2 * time.Second},
		{"15m", 15 * time.Minute},
		{"24h", 24 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"36500d", 36500 * 24 * time.Hour},
		{"", 0}, {"h", 0}, {"0s", 0}, {"-1s", 0}, {"+1s", 0}, {"1", 0}, {"1.5h", 0},
		{"1 h", 0}, {" 1h", 0}, {"1h ", 0}, {"1H", 0}, {"1w", 0}, {"1y", 0}, {"1h30m", 0},
		{"1us", 0}, {"1ns", 0}, {"99999999999999999999s", 0}, {"36501d", 0}, {"٣s", 0},
	} {
		got, err := ParseTTL(c.in)
		if c.want == 0 {
			if err == nil {
				t.Errorf("ParseTTL(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseTTL(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestFingerprintSeparatesFlowAndInput(t *testing.T) {
	if Fingerprint("a", []byte("bc")) == Fingerprint("ab", []byte("c")) {
		t.Fatal("flow name and input run together")
	}
	if Fingerprint("f", []byte(`{"a":1}`)) != Fingerprint("f", []byte(`{"a":1}`)) {
		t.Fatal("not deterministic")
	}
	if got := len(Fingerprint("f", nil)); got != 64 {
		t.Fatalf("hex SHA-256 has 64 characters, got %d", got)
	}
}

func TestRetryAfterIsWholeSecondsAtLeastOne(t *testing.T) {
	for _, c := range []struct {
		remaining time.Duration
		want      string
	}{
		{-time.Second, "1"}, {0, "1"}, {time.Millisecond, "1"}, {time.Second, "1"},
		{1001 * time.Millisecond, "2"}, {29500 * time.Millisecond, "30"}, {30 * time.Second, "30"},
	} {
		if got := RetryAfterHeader(c.remaining); got != c.want {
			t.Errorf("RetryAfterHeader(%v) = %s, want %s", c.remaining, got, c.want)
		}
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"", strings.Repeat("a", 16), strings.Repeat("~", 255), "é" + strings.Repeat("a", 15), "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		want := len(k) >= 16 && len(k) <= 255
		for _, r := range []byte(k) {
			if r < 0x20 || r > 0x7e {
				want = false
			}
		}
		if got := ValidateKey(k) == nil; got != want {
			t.Fatalf("ValidateKey(%q) ok=%v, want %v", k, got, want)
		}
	})
}

func FuzzParseTTL(f *testing.F) {
	for _, s := range []string{"24h", "1ms", "0s", "-1s", "1.5h", "99999999999999999999d", "7d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTTL(s)
		if err != nil {
			return
		}
		if d <= 0 || d > MaxTTL {
			t.Fatalf("ParseTTL(%q) = %v: out of range", s, d)
		}
		// Whatever parses is digits then exactly one unit.
		i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
		if i <= 0 {
			t.Fatalf("ParseTTL(%q) accepted input without a leading number", s)
		}
		switch s[i:] {
		case "ms", "s", "m", "h", "d":
		default:
			t.Fatalf("ParseTTL(%q) accepted unit %q", s, s[i:])
		}
	})
}

func TestFormatTTL(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{24 * time.Hour, "24h"}, {48 * time.Hour, "2d"}, {time.Hour, "1h"}, {90 * time.Minute, "90m"}, {2 * time.Second, "2s"}, {1500 * time.Millisecond, "1500ms"}} {
		got := FormatTTL(tc.d)
		if got != tc.want {
			t.Errorf("FormatTTL(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if back, err := ParseTTL(got); err != nil || back != tc.d {
			t.Errorf("ParseTTL(%q) = %v, %v", got, back, err)
		}
	}
}
