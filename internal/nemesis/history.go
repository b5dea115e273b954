package nemesis

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Phase says when an operation was sent: under faults (PhaseLoad) or in
// the final retries that settle every key (PhaseSettle).
type Phase string

// The phases of a run.
const (
	PhaseLoad   Phase = "load"
	PhaseSettle Phase = "settle"
)

// An Op is one HTTP request of the history and what came of it.
type Op struct {
	Seq    int    // order of invocation, from 1
	Client int    // the recording client that sent it
	Target string // the instance it was sent to ("a", "b")
	Phase  Phase
	Route  string // the request's path: "/charges" or "/refunds"
	Key    string // the Idempotency-Key
	Amount int64  // a charge's amount: unique per key
	Body   string // the request body

	Call, Return time.Duration // since the start of the run

	// Status is the answer's HTTP status; 0 when no answer came (Err says
	// why).
	Status     int
	RespBody   string
	Location   string
	Replayed   bool   // Idempotent-Replayed: true
	RetryAfter string // Retry-After
	Code       string // the error envelope's code, if any
	Err        string // the transport error when Status is 0
	Timeout    bool   // Err is the client's timeout (no answer in time)
}

// Acked reports whether the answer is an acknowledgement: a 2xx.
func (o Op) Acked() bool { return o.Status >= 200 && o.Status < 300 }

// NotRun reports whether the answer says the request did nothing: a 409
// IdempotencyInProgress (the key is held elsewhere) or a 503 other than
// OutcomeUnknown (StoreUnavailable, Unavailable, ShuttingDown).
func (o Op) NotRun() bool {
	return (o.Status == 409 && o.Code == "IdempotencyInProgress") || (o.Status == 503 && o.Code != "OutcomeUnknown")
}

// MayHaveRun reports whether the request may have taken effect without
// saying so: no answer, a 503 OutcomeUnknown, or an unexpected error.
func (o Op) MayHaveRun() bool { return !o.Acked() && !o.NotRun() }

// Expected reports whether the answer is one the faults allow: a 2xx, a
// 409 IdempotencyInProgress, a 503, or no answer.
func (o Op) Expected() bool {
	return o.Status == 0 || o.Acked() || o.NotRun() || o.Status == 503
}

// answer is what a replay must repeat: status, body and Location.
func (o Op) answer() string {
	return fmt.Sprintf("%d %s %s", o.Status, o.Location, o.RespBody)
}

// AnswerID is the id in a 2xx answer's body: the charge's or the
// refund's ("" when none).
func (o Op) AnswerID() string {
	var c struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(o.RespBody), &c) != nil {
		return ""
	}
	return c.ID
}

// String is the op as one line of a history excerpt.
func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d c%d→%s %s %s key=%s [%.3fs,%.3fs] ", o.Seq, o.Client, o.Target, o.Phase, o.Route, o.Key,
		o.Call.Seconds(), o.Return.Seconds())
	if o.Status == 0 {
		fmt.Fprintf(&b, "no answer: %s", o.Err)
		return b.String()
	}
	fmt.Fprintf(&b, "%d", o.Status)
	if o.Replayed {
		b.WriteString(" replayed")
	}
	if o.Code != "" {
		fmt.Fprintf(&b, " %s", o.Code)
	}
	if o.RetryAfter != "" {
		fmt.Fprintf(&b, " Retry-After:%s", o.RetryAfter)
	}
	body := o.RespBody
	if len(body) > 160 {
		body = body[:160] + "…"
	}
	fmt.Fprintf(&b, " %s", body)
	return b.String()
}

// A Fault is one injected fault: its kind, what it hit, and when it began
// and ended (the instance or the store was back).
type Fault struct {
	Kind   string // e.g. "sigkill", "sigstop", "pg-pause"
	Target string // the instance ("a", "b") or "postgres" or "disk"
	// Disturbs lists the instances that could not answer during the fault
	// (stopped, killed, restarting): a request to them may get no answer.
	Disturbs   []string
	Start, End time.Duration
	Note       string // what was done, e.g. "appended 37 torn bytes to idempotency.json"
	Failed     string // the fault could not be injected or healed (a run failure)
}

// History is a run's record: every op and every fault.
type History struct {
	Ops    []Op
	Faults []Fault
}

// Effects is what the business store holds at the end: for each key, the
// ids of the rows it made — for a charge key the charges with its amount,
// for a refund key the refunds of its charge; Phantom lists the charges
// whose amount belongs to no key sent. Provider is, for each refund key,
// what the refund provider holds for its charge.
type Effects struct {
	Charges  map[string][]string
	Phantom  []string
	Provider map[string]ProviderCalls
}

// ProviderCalls is what the demo's fake refund provider holds for one
// charge: how many refunds (rows, one per Idempotency-Key it was sent) and
// how many requests they took in all (a repeat with the same key is
// deduped by the provider and counted).
type ProviderCalls struct {
	Refunds, Requests int
}

// Promise is what the driver promises about a flow's writes to the
// business database across crashes.
type Promise int

// The promises of docs/idempotency.md.
const (
	// ExactlyOnce: the charge and the stored answer commit together
	// (the Postgres driver, fx.Tx).
	ExactlyOnce Promise = iota
	// AtLeastOnce: the charge commits before the answer is stored (the
	// file driver with SQLite): a crash between the two leaves a charge
	// whose retry charges again — at most one more, and only for a key an
	// attempt of which may have run.
	AtLeastOnce
)

func (p Promise) String() string {
	if p == ExactlyOnce {
		return "exactly-once"
	}
	return "at-least-once (≤ 1 more)"
}
