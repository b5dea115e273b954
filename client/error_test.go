package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorFromResponse(t *testing.T) {
	long := strings.Repeat("x", 500)
	tests := []struct {
		name     string
		reply    reply
		status   int
		code     string
		message  string
		retry    time.Duration
		errorTxt string
	}{
		{
			name: "envelope", status: 422, code: CodeKeyReused, message: ErrKeyReused.Message,
			reply:    envelope(422, CodeKeyReused, ErrKeyReused.Message),
			errorTxt: "oke client: POST /charges: 422 IdempotencyKeyReused: This Idempotency-Key was already used with a different request.",
		},
		{
			name: "envelope with Retry-After", status: 409, code: CodeInProgress, message: ErrInProgress.Message, retry: 3 * time.Second,
			reply:    inProgress,
			errorTxt: "oke client: POST /charges: 409 IdempotencyInProgress: This Idempotency-Key is still running. Retry after the given delay. (retry after 3s)",
		},
		{
			name: "non-JSON body gives an excerpt", status: 502, message: "<html> <body>bad gateway</body> </html>",
			reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(502)
				_, _ = w.Write([]byte("<html>\n  <body>bad gateway</body>\n</html>\n"))
			},
			errorTxt: "oke client: POST /charges: 502 Bad Gateway: <html> <body>bad gateway</body> </html>",
		},
		{
			name: "long body is cut", status: 500, message: strings.Repeat("x", excerptLen) + "…",
			reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(500)
				_, _ = w.Write([]byte(long))
			},
		},
		{
			name: "JSON without the envelope", status: 400, message: `{"detail":"nope"}`,
			reply: jsonReply(400, map[string]string{"detail": "nope"}),
		},
		{
			name: "empty body", status: 404,
			reply:    jsonReply(404, nil),
			errorTxt: "oke client: POST /charges: 404 Not Found",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, tt.reply)
			_, meta, err := post.Call(context.Background(), f.c, in1000)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if e.Status != tt.status || e.Code != tt.code || e.Message != tt.message || e.RetryAfter != tt.retry {
				t.Errorf("got {%d %q %q %v}, want {%d %q %q %v}", e.Status, e.Code, e.Message, e.RetryAfter,
					tt.status, tt.code, tt.message, tt.retry)
			}
			if e.Meta.Status != tt.status || e.Meta.IdempotencyKey != meta.IdempotencyKey || e.Meta.Attempts != 1 {
				t.Errorf("Error.Meta %+v, call meta %+v", e.Meta, meta)
			}
			if tt.errorTxt != "" && e.Error() != tt.errorTxt {
				t.Errorf("Error() =\n%q\nwant\n%q", e.Error(), tt.errorTxt)
			}
		})
	}
}

func TestErrorIs(t *testing.T) {
	reused := &Error{Status: 422, Code: CodeKeyReused, Message: "anything"}
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same code", reused, ErrKeyReused, true},
		{"wrapped", errors.Join(errors.New("ctx"), reused), ErrKeyReused, true},
		{"other code", reused, ErrInProgress, false},
		{"status-only target", reused, &Error{Status: 422}, true},
		{"status-only target, other status", reused, &Error{Status: 404}, false},
		{"in progress", &Error{Status: 409, Code: CodeInProgress}, ErrInProgress, true},
		{"missing", &Error{Status: 400, Code: CodeKeyMissing}, ErrKeyMissing, true},
		{"invalid from server", &Error{Status: 400, Code: CodeKeyInvalid}, ErrKeyInvalid, true},
		{"invalid from client", ValidateKey("short"), ErrKeyInvalid, true},
		{"missing is not invalid", &Error{Status: 400, Code: CodeKeyMissing}, ErrKeyInvalid, false},
		{"plain 409 is not in progress", &Error{Status: 409, Code: "Conflict"}, ErrInProgress, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}
}

func TestErrorRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want bool
	}{
		{"409 in progress", &Error{Status: 409, Code: CodeInProgress}, true},
		{"409 other", &Error{Status: 409, Code: "Conflict"}, false},
		{"503", &Error{Status: 503}, true},
		{"replayed 500", &Error{Status: 500, Meta: Meta{IdempotentReplayed: true}}, false},
		{"422", &Error{Status: 422, Code: CodeKeyReused}, false},
		{"429", &Error{Status: 429}, false},
	}
	for _, tt := range tests {
		if got := tt.err.Retryable(); got != tt.want {
			t.Errorf("%s: Retryable() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSentinelsCarryCatalogMessages(t *testing.T) {
	tests := []struct {
		err    *Error
		status int
		msg    string
	}{
		{ErrKeyMissing, 400, "This call requires an Idempotency-Key header."},
		{ErrKeyInvalid, 400, "Idempotency-Key must be 16–255 printable ASCII characters."},
		{ErrKeyReused, 422, "This Idempotency-Key was already used with a different request."},
		{ErrInProgress, 409, "This Idempotency-Key is still running. Retry after the given delay."},
	}
	for _, tt := range tests {
		if tt.err.Status != tt.status || tt.err.Message != tt.msg {
			t.Errorf("%s: {%d %q}, want {%d %q}", tt.err.Code, tt.err.Status, tt.err.Message, tt.status, tt.msg)
		}
	}
}

func TestExcerptKeepsValidUTF8(t *testing.T) {
	body := []byte(strings.Repeat("x", excerptLen-1) + "é and more")
	got := excerpt(body)
	if !strings.HasSuffix(got, "…") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("excerpt = %q: want a clean cut before the split rune", got)
	}
}
