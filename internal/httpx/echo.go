package httpx

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// EchoLimit is how many bytes of a value a client sent (an id, a key, a
// path, a field name) an error message or a log line repeats: a 60 KB id
// is not echoed back in full.
const EchoLimit = 64

// MaxMessage bounds an error envelope's message, whatever built it: a
// longer one is cut (Envelope), so no answer echoes a client's input
// unbounded even where Quote was not used.
const MaxMessage = 512

// Quote is s quoted (strconv.Quote) for an error message or a log, cut to
// its first EchoLimit bytes when longer, with its length:
// "abc…" (61440 bytes).
func Quote(s string) string {
	if len(s) <= EchoLimit {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s (%d bytes)", strconv.Quote(cut(s, EchoLimit)+"…"), len(s))
}

// Cut is s unquoted, cut like Quote: abc…(61440 bytes).
func Cut(s string) string {
	if len(s) <= EchoLimit {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", cut(s, EchoLimit), len(s))
}

// cut is s's first n bytes at most, not splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// capMessage cuts a message longer than MaxMessage.
func capMessage(m string) string {
	if len(m) <= MaxMessage {
		return m
	}
	return cut(m, MaxMessage-16) + fmt.Sprintf("…(%d bytes)", len(m))
}
