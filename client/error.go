package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// The four idempotency error codes of the oke HTTP contract.
const (
	CodeKeyMissing = "IdempotencyKeyMissing" // 400: the flow requires a key and none was sent
	CodeKeyInvalid = "IdempotencyKeyInvalid" // 400: the key is not 16–255 printable ASCII characters
	CodeKeyReused  = "IdempotencyKeyReused"  // 422: the key was used with a different request
	CodeInProgress = "IdempotencyInProgress" // 409: the first call with this key is still running
)

// Sentinel errors for the four idempotency codes. Use them with errors.Is:
//
//	if errors.Is(err, client.ErrKeyReused) { /* mint a new key for the new payload */ }
//
// They match any [*Error] with the same Code, whatever its status or message.
// [ErrKeyInvalid] also matches a key the client rejected before sending.
var (
	ErrKeyMissing = &Error{Status: http.StatusBadRequest, Code: CodeKeyMissing,
		Message: "This call requires an Idempotency-Key header."}
	ErrKeyInvalid = &Error{Status: http.StatusBadRequest, Code: CodeKeyInvalid,
		Message: "Idempotency-Key must be 16–255 printable ASCII characters."}
	ErrKeyReused = &Error{Status: http.StatusUnprocessableEntity, Code: CodeKeyReused,
		Message: "This Idempotency-Key was already used with a different request."}
	ErrInProgress = &Error{Status: http.StatusConflict, Code: CodeInProgress,
		Message: "This Idempotency-Key is still running. Retry after the given delay."}
)

// The codes of the server's 503 answers. All three are retried (with the
// call's one key) when retries are configured; they differ in what the
// caller may conclude when it gives up:
const (
	// CodeStoreUnavailable: the idempotency store failed before the flow
	// started; nothing of the call ran.
	CodeStoreUnavailable = "StoreUnavailable"
	// CodeOutcomeUnknown: the flow started, then the store failed; the call
	// may have taken effect. Retry with the same key — never a new one,
	// which could do the work twice.
	CodeOutcomeUnknown = "OutcomeUnknown"
	// CodeUnavailable: the flow started but could not reach a database or
	// service before it changed anything; nothing was changed.
	CodeUnavailable = "Unavailable"
)

// Sentinels for the 503 codes, for errors.Is.
var (
	ErrStoreUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: CodeStoreUnavailable}
	ErrOutcomeUnknown   = &Error{Status: http.StatusServiceUnavailable, Code: CodeOutcomeUnknown}
	ErrUnavailable      = &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable}
)

// Error is a non-2xx answer from the server. The body
// {"error":{"code":"…","message":"…"}} fills Code and Message; a body that is
// not that envelope leaves Code empty and puts a short excerpt of it (or the
// status text, if it was empty) in Message.
//
// When retries are configured, the Error returned is the last attempt's, and
// Meta.Attempts says how many were made.
type Error struct {
	Status  int    // HTTP status code
	Code    string // stable error code, e.g. "IdempotencyKeyReused"; "" if the body had none
	Message string // human-readable message from the server, or a body excerpt

	// RetryAfter is the server's Retry-After header as a duration (0 when
	// absent). On 409 IdempotencyInProgress it is the time until the
	// running call's lease ends.
	RetryAfter time.Duration

	Flow   string // the flow called, e.g. "payments.charge"; "" for Call, Endpoint and Do
	Method string // request method, e.g. "POST"
	Path   string // request path with path parameters filled in, without the query

	Meta Meta // the response's metadata: key sent, attempts, headers
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("oke client: ")
	if e.Flow != "" {
		b.WriteString(e.Flow)
		b.WriteString(": ")
	}
	if e.Method != "" {
		b.WriteString(e.Method)
		b.WriteByte(' ')
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d ", e.Status)
	if e.Code != "" {
		b.WriteString(e.Code)
	} else {
		b.WriteString(http.StatusText(e.Status))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Is makes errors.Is(err, target) true when target is an *Error whose Code
// equals e's, or, when target has no Code, whose Status equals e's. So
// errors.Is(err, client.ErrKeyReused) matches any 422 IdempotencyKeyReused,
// and errors.Is(err, &client.Error{Status: 404}) matches any 404.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	if t.Code != "" {
		return t.Code == e.Code
	}
	return t.Status != 0 && t.Status == e.Status
}

// Retryable reports whether sending the same call again, with the same key,
// can give a different answer: a 409 IdempotencyInProgress (after
// RetryAfter), or a 5xx that was not a replay. A replayed response is the
// stored answer for that key; it will not change. Any other 4xx will not
// change either: fix the request, or for 422 mint a new key.
//
// With retries configured, the client has already retried what it could; a
// retryable Error means it ran out of attempts or time.
func (e *Error) Retryable() bool {
	if e.Meta.IdempotentReplayed {
		return false
	}
	if e.Status == http.StatusConflict {
		return e.Code == CodeInProgress
	}
	return e.Status >= 500 && e.Status <= 599
}

// excerptLen is how much of a non-envelope error body an Error keeps.
const excerptLen = 200

// newError builds the Error for a non-2xx response.
func newError(method, path string, meta Meta, body []byte, now time.Time) *Error {
	e := &Error{
		Status:     meta.Status,
		Method:     method,
		Path:       path,
		Meta:       meta,
		RetryAfter: parseRetryAfter(meta.Header.Get("Retry-After"), now),
	}
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err == nil && env.Error.Code != "" {
		e.Code = env.Error.Code
		e.Message = env.Error.Message
		return e
	}
	e.Message = excerpt(body)
	return e
}

// excerpt returns the start of body as one line of valid UTF-8, at most
// excerptLen bytes, with "…" when cut.
func excerpt(body []byte) string {
	s := strings.TrimSpace(string(body))
	cut := false
	if len(s) > excerptLen {
		s = s[:excerptLen]
		// Drop a rune split by the cut (at most UTFMax-1 trailing bytes).
		for i := 1; i < utf8.UTFMax && len(s) > 0; i++ {
			if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
				break
			}
			s = s[:len(s)-1]
		}
		cut = true
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Join(strings.Fields(s), " ")
	if cut {
		s += "…"
	}
	return s
}
