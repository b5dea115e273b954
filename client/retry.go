package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retry is the retry policy set with [WithRetry]. Without it the client makes
// one attempt per call.
//
// What is retried, always with the call's one Idempotency-Key and an
// identical body:
//   - 409 IdempotencyInProgress: at once, asking the server to hold the
//     retry until the first call finishes (Prefer: wait=N, see PreferWait),
//     or after Retry-After when the server does not hold requests;
//   - network errors (no response: refused, reset, closed connection);
//   - 5xx, unless the response was a replay (Idempotent-Replayed: true): a
//     replayed 500 is the stored answer for that key and will not change.
//     This includes the server's three 503s: StoreUnavailable (nothing
//     ran), OutcomeUnknown (the call may have run: the retry with the same
//     key gets its stored outcome, never runs it twice where the server can
//     tell) and Unavailable (nothing was changed).
//
// Never retried: 422 IdempotencyKeyReused and every other 4xx, including
// 409s with another code and 429.
//
// A call that carries no key ([NoKey]) and whose method is not idempotent by
// HTTP (POST, PATCH, or any method other than GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE and QUERY) is never retried: without a key, a second attempt could
// run the work twice.
//
// Waits. The wait before retry n (n = 1 for the second attempt) is a jittered
// exponential backoff: a random duration in [c/2, c] with
// c = min(MaxDelay, BaseDelay·2^(n-1)). When the response carries
// Retry-After (seconds or an HTTP date), the wait is at least that long, even
// beyond MaxDelay: retrying sooner would only be told to wait again.
// MaxDelay caps the client's own backoff, not the server's request.
//
// The context bounds everything. The client stops as soon as ctx ends, and
// does not start a wait that would end after ctx's deadline; either way the
// error wraps both the context error and the last attempt's error.
//
// Waiting on the server. Retry-After on a 409 IdempotencyInProgress is the
// time left on the first call's lease (up to 30 s by default), however soon
// that call ends. So a retry of such a 409 is sent after the backoff only,
// with the header Prefer: wait=N (RFC 7240): a server that supports it holds
// the request until the first call with the key finishes, then answers its
// stored response (Idempotent-Replayed: true), or, after N seconds, answers
// 409 again; either way it says Preference-Applied: wait=N, and
// [Meta].Waited is true. A server that does not hold requests answers 409
// at once without Preference-Applied: the client then waits its Retry-After
// before the next attempt, as it would without Prefer. N is PreferWait in
// whole seconds, at most 60, and kept a second short of what is left of
// ctx's deadline (after the backoff) and of the http.Client's Timeout; when
// that leaves less than a second no Prefer is sent and Retry-After is
// honoured.
type Retry struct {
	// MaxAttempts is the most attempts per call, the first one included.
	// 0 or 1 means no retries.
	MaxAttempts int
	// BaseDelay is the backoff ceiling before the first retry; it doubles
	// on each later retry. 0 means 100ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff ceiling. 0 means 10s. It does not cap a
	// server's Retry-After.
	MaxDelay time.Duration
	// PreferWait is the longest a retry of a 409 IdempotencyInProgress
	// asks the server to hold it (Prefer: wait=N). 0 means
	// MaxPreferWait (60s, the most a server holds; more is read as 60s).
	// Otherwise at least 1s, or negative: no Prefer header is sent, and
	// every 409 is retried after its Retry-After.
	PreferWait time.Duration
}

// Defaults for the zero fields of Retry.
const (
	DefaultBaseDelay = 100 * time.Millisecond
	DefaultMaxDelay  = 10 * time.Second
	// MaxPreferWait is the longest wait a Prefer: wait=N asks for (and
	// PreferWait's default): oke's server holds a request at most 60s.
	MaxPreferWait = 60 * time.Second
)

// normalize fills defaults and rejects nonsense.
func (r Retry) normalize() (Retry, error) {
	if r.MaxAttempts < 0 || r.BaseDelay < 0 || r.MaxDelay < 0 {
		return r, errors.New("oke client: Retry fields must not be negative")
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 1
	}
	if r.BaseDelay == 0 {
		r.BaseDelay = DefaultBaseDelay
	}
	if r.MaxDelay == 0 {
		r.MaxDelay = DefaultMaxDelay
	}
	if r.MaxDelay < r.BaseDelay {
		return r, errors.New("oke client: Retry.MaxDelay is shorter than Retry.BaseDelay")
	}
	switch {
	case r.PreferWait == 0:
		r.PreferWait = MaxPreferWait
	case r.PreferWait > MaxPreferWait:
		r.PreferWait = MaxPreferWait // the server reads more as 60s anyway
	case r.PreferWait > 0 && r.PreferWait < time.Second:
		return r, fmt.Errorf("oke client: Retry.PreferWait %s is under a second, but Prefer: wait=N counts whole seconds; give at least 1s, or a negative value to send no Prefer", r.PreferWait)
	}
	return r, nil
}

// preferWait is N for the Prefer: wait=N of the next attempt, which will
// be sent after wait: r.PreferWait in whole seconds, kept a second short of
// the time left before ctx's deadline and of the http.Client's Timeout, so
// that the server's answer arrives before the client gives up on it. 0
// means send none.
func (c *Client) preferWait(ctx context.Context, r Retry, wait time.Duration) int {
	if r.PreferWait <= 0 {
		return 0
	}
	limit := r.PreferWait
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, dl.Sub(c.now().Add(wait))-time.Second)
	}
	if t := c.http.Timeout; t > 0 {
		limit = min(limit, t-time.Second)
	}
	if limit < time.Second {
		return 0
	}
	return int(limit / time.Second)
}

// addWait returns the Prefer header value prefer with wait=n added, unless
// the caller's own Prefer (set with Header) already has a wait.
func addWait(prefer string, n int) string {
	if prefer == "" {
		return "wait=" + strconv.Itoa(n)
	}
	for _, p := range strings.Split(prefer, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(name), "wait") {
			return prefer
		}
	}
	return prefer + ", wait=" + strconv.Itoa(n)
}

// waitApplied reports whether Preference-Applied values name wait (RFC
// 7240: "wait=N", among other preferences separated by commas, names
// case-insensitive).
func waitApplied(values []string) bool {
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(p), "=")
			name, _, _ = strings.Cut(name, ";")
			if strings.EqualFold(strings.TrimSpace(name), "wait") {
				return true
			}
		}
	}
	return false
}

// backoff returns the wait before retry n (n ≥ 1): a duration in [c/2, c]
// where c = min(max, base·2^(n-1)), placed by rnd() in [0, 1).
func backoff(n int, base, max time.Duration, rnd func() float64) time.Duration {
	c := base
	for i := 1; i < n && c < max; i++ {
		c *= 2 // c ≤ max ≤ MaxInt64 before doubling; check below catches overflow
		if c <= 0 {
			c = max
		}
	}
	if c > max {
		c = max
	}
	half := c / 2
	return half + time.Duration(rnd()*float64(c-half))
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3). Absent, malformed or past values are 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(24*time.Hour/time.Second)*365 { // absurd; avoid overflow
			secs = int64(24*time.Hour/time.Second) * 365
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// idempotentMethod reports whether a method may be resent without a key
// (RFC 9110 §9.2.2, plus QUERY, which is safe and idempotent).
func idempotentMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete, "QUERY":
		return true
	}
	return false
}

// sleepCtx waits d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// defaultRand is the jitter source: math/rand/v2's global generator, safe for
// concurrent use.
var defaultRand = rand.Float64
