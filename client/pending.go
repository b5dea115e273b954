package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// HeaderRunID names the durable run of a parked answer: a 204 No Content
// that says the call's run has not given its final response yet (oke's
// Oke-Run-Id).
const HeaderRunID = "Oke-Run-Id"

// ErrPending matches (errors.Is) the error of a call whose durable run has
// not finished: the server parked it (a durable sleep) and answered 204 with
// the run's ID, not the call's result. The work is under way; nothing needs
// to be sent again with a new key. Get the result by calling again with the
// same key ([Key] with Meta.IdempotencyKey) and [Wait], or ask with Wait in
// the first place. The error is a [*PendingError].
var ErrPending = errors.New("oke client: the call's durable run has not finished")

// PendingError is the error of a call answered with a parked 204 (see
// [ErrPending]). Meta.Pending is true and Meta.RunID names the run.
type PendingError struct {
	Flow           string // the flow called; "" for Call, Endpoint and Do
	Method, Path   string
	RunID          string // the server's durable run (Oke-Run-Id)
	IdempotencyKey string // the key that reaches the run's result; "" if none was sent
	Meta           Meta
}

func (e *PendingError) Error() string {
	how := "call again with client.Key(" + fmt.Sprintf("%q", e.IdempotencyKey) + ") and client.Wait to get its result"
	if e.IdempotencyKey == "" {
		how = "the call carried no Idempotency-Key, so no call reaches its result"
	}
	return fmt.Sprintf("oke client: %s%s %s: run %s has not finished (204, parked): %s", flowPrefix(e.Flow), e.Method, e.Path, e.RunID, how)
}

// Is makes errors.Is(err, ErrPending) true.
func (e *PendingError) Is(target error) bool { return target == ErrPending }

// Wait makes the call wait up to d, in all, for its final answer instead of
// a parked one: every attempt asks the server to hold it (Prefer: wait=N,
// with N at most 60 s, what is left of d, and a second short of ctx's
// deadline and of the http.Client's Timeout), and an answer that parks the
// call's durable run (204 with Oke-Run-Id) is sent again with the same
// Idempotency-Key until the run's final response comes back — the server
// answers it as soon as the run ends — or d passes, or ctx ends. A server
// that does not hold the request (no Preference-Applied) is asked again
// after the retry backoff ([Retry].BaseDelay doubling to MaxDelay).
//
// When d passes first the call still returns an error matching [ErrPending];
// when ctx ends, ctx's error. A call without a key ([NoKey]) cannot reach its
// run's result and is not sent again. d must be positive.
func Wait(d time.Duration) CallOption {
	return func(cc *callConfig) {
		if d <= 0 {
			cc.errs = append(cc.errs, fmt.Errorf("oke client: Wait(%s): the wait must be positive", d))
			return
		}
		cc.wait = d
	}
}

// pending reports whether resp is a parked answer: 204 naming its run.
func pending(h http.Header, status int) (string, bool) {
	id := h.Get(HeaderRunID)
	return id, status == http.StatusNoContent && id != ""
}

// waitPrefer is N for the Prefer: wait=N of an attempt of a call that waits
// until until (Wait): what is left, at most MaxPreferWait, a second short of
// ctx's deadline and of the http.Client's Timeout; 0 when under a second.
func (c *Client) waitPrefer(ctx context.Context, until time.Time) int {
	limit := min(until.Sub(c.now()), MaxPreferWait)
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, dl.Sub(c.now())-time.Second)
	}
	if t := c.http.Timeout; t > 0 {
		limit = min(limit, t-time.Second)
	}
	if limit < time.Second {
		return 0
	}
	return int(limit / time.Second)
}

// pendingError is the error of a call whose last answer was parked.
func (r *request) pendingError(m Meta) error {
	return &PendingError{Flow: r.flow, Method: r.method, Path: r.path, RunID: m.RunID, IdempotencyKey: m.IdempotencyKey, Meta: m}
}
