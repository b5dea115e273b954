package file

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/okengine/oke/driver"
)

// The log is JSON and encoding/json is its reference: every payload must
// decode with json.Unmarshal into the record it was written from. encoding/json
// is slow for this (reflection, and it scans each value twice), so records are
// written by appendPayload and read by decodeFast, which only accepts the exact
// layout appendPayload writes and leaves anything else (a line edited by hand,
// an escape sequence) to json.Unmarshal. codec_test.go fuzzes both against
// encoding/json.

// appendPayload appends rec as a JSON object, fields in a fixed order, empty
// ones omitted as the struct tags of record say.
func appendPayload(b []byte, r *record) ([]byte, error) {
	b = append(b, `{"op":`...)
	b = appendString(b, r.Op)
	if r.V != 0 {
		b = append(b, `,"v":`...)
		b = strconv.AppendInt(b, int64(r.V), 10)
	}
	b = appendOptString(b, `,"gen":`, r.Gen)
	b = appendOptString(b, `,"prev":`, r.Prev)
	if k := r.Key; k != nil {
		b = append(b, `,"key":{"tenant":`...)
		b = appendString(b, k.Tenant)
		b = append(b, `,"principal":`...)
		b = appendString(b, k.Principal)
		b = append(b, `,"flow":`...)
		b = appendString(b, k.Flow)
		b = append(b, `,"key":`...)
		b = appendString(b, k.Key)
		b = append(b, '}')
	}
	b = appendOptString(b, `,"fp":`, r.Fingerprint)
	b = appendOptString(b, `,"state":`, r.State)
	b = appendOptString(b, `,"owner":`, r.Owner)
	var err error
	for _, t := range [...]struct {
		name string
		t    time.Time
	}{
		{`,"leaseUntil":`, r.LeaseUntil},
		{`,"expiresAt":`, r.ExpiresAt},
		{`,"createdAt":`, r.CreatedAt},
		{`,"completedAt":`, r.CompletedAt},
	} {
		if b, err = appendOptTime(b, t.name, t.t); err != nil {
			return b, err
		}
	}
	b = appendOptString(b, `,"runId":`, r.RunID)
	if p := r.Response; p != nil {
		b = append(b, `,"response":{"status":`...)
		b = strconv.AppendInt(b, int64(p.Status), 10)
		b = appendOptString(b, `,"contentType":`, p.ContentType)
		b = appendOptString(b, `,"location":`, p.Location)
		if len(p.Body) > 0 {
			b = append(b, `,"body":"`...)
			b = base64.StdEncoding.AppendEncode(b, p.Body)
			b = append(b, '"')
		}
		b = appendOptString(b, `,"trace":`, p.Trace)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func appendOptString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, name...), s)
}

// appendOptTime writes t as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds), and fails where it fails.
func appendOptTime(b []byte, name string, t time.Time) ([]byte, error) {
	if t.IsZero() {
		return b, nil
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return b, errors.New("encode record: time " + t.String() + " is outside years 0-9999")
	}
	b = append(b, name...)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string, as encoding/json does without HTML
// escaping: invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decode reads a payload: the fast path when it applies, else encoding/json.
func decode(payload []byte) (*record, error) {
	if r, ok := decodeFast(payload); ok {
		return r, nil
	}
	var r record
	if err := json.Unmarshal(payload, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// decodeFast parses exactly the layout appendPayload writes, with no escape
// sequences in strings. ok is false for anything else; whatever it accepts,
// json.Unmarshal decodes to the same record.
func decodeFast(p []byte) (_ *record, ok bool) {
	s := scanner{b: p, ok: true}
	r := &record{}
	s.lit(`{"op":`)
	r.Op = s.str()
	if s.try(`,"v":`) {
		r.V = s.int()
	}
	if s.try(`,"gen":`) {
		r.Gen = s.str()
	}
	if s.try(`,"prev":`) {
		r.Prev = s.str()
	}
	if s.try(`,"key":{"tenant":`) {
		k := &driver.Key{}
		k.Tenant = s.str()
		s.lit(`,"principal":`)
		k.Principal = s.str()
		s.lit(`,"flow":`)
		k.Flow = s.str()
		s.lit(`,"key":`)
		k.Key = s.str()
		s.lit(`}`)
		r.Key = k
	}
	if s.try(`,"fp":`) {
		r.Fingerprint = s.str()
	}
	if s.try(`,"state":`) {
		r.State = s.str()
	}
	if s.try(`,"owner":`) {
		r.Owner = s.str()
	}
	if s.try(`,"leaseUntil":`) {
		r.LeaseUntil = s.time()
	}
	if s.try(`,"expiresAt":`) {
		r.ExpiresAt = s.time()
	}
	if s.try(`,"createdAt":`) {
		r.CreatedAt = s.time()
	}
	if s.try(`,"completedAt":`) {
		r.CompletedAt = s.time()
	}
	if s.try(`,"runId":`) {
		r.RunID = s.str()
	}
	if s.try(`,"response":{"status":`) {
		resp := &driver.Response{}
		resp.Status = s.int()
		if s.try(`,"contentType":`) {
			resp.ContentType = s.str()
		}
		if s.try(`,"location":`) {
			resp.Location = s.str()
		}
		if s.try(`,"body":`) {
			resp.Body = s.base64()
		}
		if s.try(`,"trace":`) { // an older oke wrote none
			resp.Trace = s.str()
		}
		s.lit(`}`)
		r.Response = resp
	}
	s.lit(`}`)
	if !s.ok || s.i != len(s.b) {
		return nil, false
	}
	return r, true
}

// scanner reads p left to right; the first mismatch clears ok and every later
// read returns a zero value.
type scanner struct {
	b  []byte
	i  int
	ok bool
}

func (s *scanner) try(lit string) bool {
	if s.ok && len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

func (s *scanner) lit(lit string) {
	if !s.try(lit) {
		s.ok = false
	}
}

// raw returns the bytes of a string with no escapes and no control
// characters, in valid UTF-8.
func (s *scanner) raw() []byte {
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != '"' {
		s.ok = false
		return nil
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			if !ascii && !utf8.Valid(v) {
				s.ok = false
				return nil
			}
			s.i = j + 1
			return v
		case c == '\\' || c < 0x20:
			s.ok = false
			return nil
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	s.ok = false
	return nil
}

func (s *scanner) str() string { return string(s.raw()) }

func (s *scanner) int() int {
	if !s.ok {
		return 0
	}
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	digits := s.b[start:s.i]
	// JSON allows no leading zeros; leave signs and exponents to json.
	if len(digits) == 0 || len(digits) > 9 || (digits[0] == '0' && len(digits) > 1) {
		s.ok = false
		return 0
	}
	n, _ := strconv.Atoi(string(digits))
	return n
}

func (s *scanner) time() time.Time {
	var t time.Time
	if v := s.raw(); s.ok && t.UnmarshalText(v) != nil {
		s.ok = false
	}
	return t
}

func (s *scanner) base64() []byte {
	v := s.raw()
	if !s.ok {
		return nil
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(v)))
	n, err := base64.StdEncoding.Decode(out, v)
	if err != nil {
		s.ok = false
		return nil
	}
	return out[:n]
}
