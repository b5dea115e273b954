package oke

import (
	"math"
	"time"
)

// RetryPolicy says how often a durable step whose function returns a plain
// error (not a declared failure) runs again, and how long it waits between
// attempts. Set it for a flow (Options.Retry) or for one step
// (Step(ctx, name, fn, oke.Retry(policy))); a step's own policy wins, then
// the flow's, then DefaultRetryPolicy. A zero field takes the default's
// value, so RetryPolicy{MaxAttempts: 10} changes only the attempts.
//
// Attempt n (n ≥ 1) that fails waits Backoff(n, u) before attempt n+1:
// InitialBackoff × Multiplier^(n-1), capped by MaxBackoff, then moved by up
// to ±Jitter of itself. A wait up to Config.RetryInline is spent inside the
// execution (the request, if one started the run, waits too); a longer one
// parks the run in the journal, due at the end of the wait, so it survives a
// restart (see docs/durable.md, "Retries and dead letters").
type RetryPolicy struct {
	// MaxAttempts is how many times the step's function may start in all,
	// the first included: 1 never retries. Zero means the default's.
	MaxAttempts int
	// InitialBackoff is the wait after the first failed attempt.
	InitialBackoff time.Duration
	// MaxBackoff caps every wait (before jitter).
	MaxBackoff time.Duration
	// Multiplier grows the wait after each failed attempt (at least 1).
	Multiplier float64
	// Jitter moves each wait by a random amount up to this fraction of it
	// (0.2: ±20 %), so that runs failing together do not retry together.
	// Zero means the default's; a negative value means none.
	Jitter float64
	// Permanent reports errors that retrying cannot fix (a bad request, a
	// refusal): the step fails at once. Nil means every plain error may be
	// retried. A declared failure (*Error, Fx.Fail) is never retried
	// whatever this says: it is saved as the step's outcome.
	Permanent func(error) bool
}

// DefaultRetryPolicy is the policy of a step when neither it nor its flow
// sets one: three attempts, waiting about 200 ms then 400 ms (±20 %), all
// spent in process with the default Config.RetryInline — enough for a
// dropped connection or a provider's blip, and short enough that the
// request that started the run gets its answer. Give a flow or a step a
// policy of its own for longer outages (longer waits park the run).
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:    3,
	InitialBackoff: 200 * time.Millisecond,
	MaxBackoff:     time.Minute,
	Multiplier:     2,
	Jitter:         0.2,
}

// NoRetry is a policy that never retries: a plain error fails the step at
// once (and the run, if the flow returns it), as oke did before retries.
var NoRetry = RetryPolicy{MaxAttempts: 1}

// withDefaults fills p's zero fields from d.
func (p RetryPolicy) withDefaults(d RetryPolicy) RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = d.InitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	if p.Multiplier == 0 {
		p.Multiplier = d.Multiplier
	}
	if p.Jitter == 0 {
		p.Jitter = d.Jitter
	}
	if p.Permanent == nil {
		p.Permanent = d.Permanent
	}
	return p
}

// nominal is the wait after failed attempt n before jitter:
// InitialBackoff × Multiplier^(n-1), capped by MaxBackoff.
func (p RetryPolicy) nominal(attempt int) time.Duration {
	p = p.withDefaults(DefaultRetryPolicy)
	if attempt < 1 {
		attempt = 1
	}
	m := max(p.Multiplier, 1)
	d := float64(p.InitialBackoff) * math.Pow(m, float64(attempt-1))
	if d > float64(p.MaxBackoff) || math.IsInf(d, 0) || math.IsNaN(d) {
		return p.MaxBackoff
	}
	return time.Duration(d)
}

// Backoff returns the wait after failed attempt n (1 for the first) with
// the jitter's random draw u in [0, 1): u = 0.5 is the nominal wait, 0 the
// shortest (nominal × (1-Jitter)), near 1 the longest (× (1+Jitter)). Zero
// fields take DefaultRetryPolicy's values. oke draws u at random; pass your
// own to see what a policy does.
func (p RetryPolicy) Backoff(attempt int, u float64) time.Duration {
	p = p.withDefaults(DefaultRetryPolicy)
	d := float64(p.nominal(attempt))
	if j := min(p.Jitter, 1); j > 0 {
		u = min(max(u, 0), 1)
		d *= 1 + j*(2*u-1)
	}
	return time.Duration(d)
}

// StepOption configures one step (Step's optional arguments).
type StepOption func(*stepOptions)

type stepOptions struct {
	retry *RetryPolicy
}

// Retry gives a step its own retry policy, in place of its flow's
// (Options.Retry) and the default.
func Retry(p RetryPolicy) StepOption {
	return func(o *stepOptions) { o.retry = &p }
}
