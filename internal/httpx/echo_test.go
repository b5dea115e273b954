package httpx

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestQuoteAndCut(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes: a cut at 64 falls on a rune boundary
	for _, tc := range []struct{ got, want string }{
		{Quote("ch_1"), `"ch_1"`},
		{Quote("a\nb"), `"a\nb"`},
		{Quote(strings.Repeat("x", 100)), `"` + strings.Repeat("x", 64) + `…" (100 bytes)`},
		{Quote(long), `"` + strings.Repeat("é", 32) + `…" (80 bytes)`},
		{Quote("x" + long), `"x` + strings.Repeat("é", 31) + `…" (81 bytes)`}, // not half an é
		{Cut("/charges/1"), "/charges/1"},
		{Cut(strings.Repeat("y", 70)), strings.Repeat("y", 64) + "…(70 bytes)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

// The last bound: an envelope's message is cut at MaxMessage, whoever
// built it, and stays valid JSON.
func TestEnvelopeBoundsItsMessage(t *testing.T) {
	b := Envelope("NotFound", "No thing has id "+strings.Repeat("z", 60<<10)+".")
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil || len(b) > MaxMessage+100 || !strings.HasSuffix(e.Error.Message, "…(61457 bytes)") {
		t.Fatalf("%d bytes, %v: %.200s", len(b), err, b)
	}
	if m := "short."; string(Envelope("X", m)) != `{"error":{"code":"X","message":"short."}}`+"\n" {
		t.Fatal("a short message changed")
	}
}
