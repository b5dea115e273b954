package oke

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/okengine/oke/internal/httpx"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/journal"
)

// Error is an error with an HTTP status and a stable code, sent to clients as
// the JSON envelope {"error":{"code":…,"message":…}}. A flow returns one to
// answer with a declared failure (see Fx.Fail); the catalog values below are
// the framework's own.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
	// Err is the cause, for errors.Unwrap; it is never sent to clients.
	Err error `json:"-"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s (%d): %s: %v", e.Code, e.Status, e.Message, e.Err)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same Code, so errors.Is(err,
// oke.ErrIdempotencyKeyReused) works on values that carry details.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// The Idempotency-Key catalog: these codes and messages are a public contract.
var (
	ErrIdempotencyKeyMissing = &Error{Status: http.StatusBadRequest, Code: "IdempotencyKeyMissing",
		Message: "This call requires an Idempotency-Key header."}
	ErrIdempotencyKeyInvalid = &Error{Status: http.StatusBadRequest, Code: "IdempotencyKeyInvalid",
		Message: "Idempotency-Key must be 16–255 printable ASCII characters."}
	ErrIdempotencyKeyReused = &Error{Status: http.StatusUnprocessableEntity, Code: "IdempotencyKeyReused",
		Message: "This Idempotency-Key was already used with a different request."}
	ErrIdempotencyInProgress = &Error{Status: http.StatusConflict, Code: "IdempotencyInProgress",
		Message: "This Idempotency-Key is still running. Retry after the given delay."}
)

// The framework's other errors.
var (
	// ErrInternal is what an unexpected failure of a flow answers. Its
	// message never carries the cause.
	ErrInternal = &Error{Status: http.StatusInternalServerError, Code: "InternalError",
		Message: "The server failed to complete this request."}
	// ErrStoreUnavailable: the idempotency store could not be read or
	// written before the flow's function started, so nothing of the request
	// ran (fail closed). Safe to retry, with the same key or a new one.
	ErrStoreUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "StoreUnavailable",
		Message: "The idempotency store is unavailable; the request was not run. Retry later with the same Idempotency-Key.", RetryAfter: 1}
	// ErrOutcomeUnknown: the flow's function started, then the store (or
	// the database of the flow's transaction) failed, so whether the
	// request took effect is not known, or its outcome could not be stored.
	// Retry with the same Idempotency-Key: the retry replays the outcome if
	// it was stored, and runs the flow again only if nothing of it was (a
	// durable run resumes). A new key could do the work twice.
	ErrOutcomeUnknown = &Error{Status: http.StatusServiceUnavailable, Code: "OutcomeUnknown",
		Message: "The request may have run; retry with the same Idempotency-Key.", RetryAfter: 1}
	// ErrUnavailable: the flow's function started and failed because a
	// database or service it needs could not be reached, before it changed
	// anything through fx (no non-read effect): its key, if any, was
	// released. Safe to retry.
	ErrUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "Unavailable",
		Message: "A database or service this request needs could not be reached; nothing was changed. Retry later.", RetryAfter: 1}
	// ErrResponseNotStored is replayed for a key whose first response was
	// too large to store (Config.MaxStoredResponse). The flow ran once and
	// its response was delivered once; it will not run again for that key.
	ErrResponseNotStored = &Error{Status: http.StatusGone, Code: "IdempotentResponseNotStored",
		Message: "This Idempotency-Key already ran, but its response was too large to store. Use a new key to run the call again."}
	ErrUnauthorized = &Error{Status: http.StatusUnauthorized, Code: "Unauthorized",
		Message: "Missing or invalid credentials."}
	ErrForbidden = &Error{Status: http.StatusForbidden, Code: "Forbidden",
		Message: "These credentials may not make this call."}
	ErrPayloadTooLarge = &Error{Status: http.StatusRequestEntityTooLarge, Code: "PayloadTooLarge",
		Message: "The request body is larger than the limit."}
	ErrUnsupportedMediaType = &Error{Status: http.StatusUnsupportedMediaType, Code: "UnsupportedMediaType",
		Message: "The request body must be JSON (Content-Type: application/json)."}
	ErrNotFound     = &Error{Status: http.StatusNotFound, Code: "NotFound", Message: "Not found."}
	ErrShuttingDown = &Error{Status: http.StatusServiceUnavailable, Code: "ShuttingDown",
		Message: "The server is shutting down; retry with the same Idempotency-Key.", RetryAfter: 1}
)

// codes of input errors (400).
const (
	CodeMalformedJSON    = "MalformedJSON"
	CodeUnknownField     = "UnknownField"
	CodeDuplicateField   = "DuplicateField"
	CodeInvalidInput     = "InvalidInput"
	CodeValidationFailed = "ValidationFailed"
)

// Fail returns a declared failure: an error the client is meant to see, with
// its own status and code (for example 402 PaymentDeclined). Under an
// Idempotency-Key it is stored and replayed like any response.
func Fail(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// WithMessage returns a copy of e with another message (the code and status
// stay).
func (e *Error) WithMessage(format string, args ...any) *Error {
	c := *e
	c.Message = fmt.Sprintf(format, args...)
	return &c
}

// WithCause returns a copy of e wrapping err (never shown to clients).
func (e *Error) WithCause(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

// Unauthorized returns a 401 error for a Gate to return.
func Unauthorized(message string) *Error { return ErrUnauthorized.WithMessage("%s", message) }

// Forbidden returns a 403 error for a Gate to return.
func Forbidden(message string) *Error { return ErrForbidden.WithMessage("%s", message) }

// envelopeBytes encodes the error envelope of e, without HTML escaping and
// with a trailing newline, like success bodies.
func envelopeBytes(e *Error) []byte { return httpx.Envelope(e.Code, e.Message) }

// asError converts any error to the *Error sent to clients: an *Error in the
// chain is used as is; anything else is ErrInternal wrapping it.
func asError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return ErrInternal.WithCause(err), false
}

// WriteError writes err as the JSON error envelope (an *Error in its chain,
// else 500 InternalError without the cause). Use it in handlers that share
// an oke app's error format.
func WriteError(w http.ResponseWriter, err error) {
	e, _ := asError(err)
	writeEnvelope(w, e)
}

func writeEnvelope(w http.ResponseWriter, e *Error) {
	httpx.WriteEnvelope(w, e.Status, e.Code, e.Message, e.RetryAfter)
}

// Errors a flow's effects and steps return (Go errors, not HTTP answers;
// returned from the flow's function, an undeclared one answers 500).

// ErrNotDurable is returned by Sleep, Claim and Run when the flow is not
// running as a journal run (set Options.Durable) or the driver keeps no
// journal.
var ErrNotDurable = errors.New("oke: needs a durable flow (Options{Durable: true}) on a driver with a journal")

// ErrSleeping is what Sleep returns when it parked the run: return it from
// the flow (wrapped or not). The response is 204 No Content; the scheduler
// continues the run when the sleep ends.
var ErrSleeping = journal.ErrParked

// ErrRetrying is what Step returns, wrapped, when a step's failed attempt
// parked the run until its retry (a backoff longer than
// Config.RetryInline): return it from the flow. A request waiting on the
// run gets 503 OutcomeUnknown with Retry-After; the scheduler runs the step
// again when the wait ends, even across restarts.
var ErrRetrying = journal.ErrRetrying

// StepFailedError is returned by Step when a step's function failed with a
// plain error and the step will not run again in this run: the error is
// permanent (RetryPolicy.Permanent), or it was the last attempt the policy
// allows. Returned from the flow, it fails the run (500, stored under the
// key like any undeclared failure) with its message as the run's error.
type StepFailedError struct {
	RunID     string
	Step      string
	Attempts  int  // the step's attempts, the failed one included
	Permanent bool // failed at once: RetryPolicy.Permanent said so
	Err       error
}

func (e *StepFailedError) Error() string {
	if e.Permanent {
		return fmt.Sprintf("run %s: step %q failed with a permanent error (attempt %d): %v", e.RunID, e.Step, e.Attempts, e.Err)
	}
	if e.Attempts == 1 {
		return fmt.Sprintf("run %s: step %q failed at its only attempt: %v", e.RunID, e.Step, e.Err)
	}
	return fmt.Sprintf("run %s: step %q failed after %d attempts; the last: %v", e.RunID, e.Step, e.Attempts, e.Err)
}

func (e *StepFailedError) Unwrap() error { return e.Err }

// StepMismatchError is returned by Step when the code no longer matches the
// run's journal: a step name used twice in one run, or a different step at a
// position the journal already holds.
type StepMismatchError = journal.MismatchError

// ErrNotConfigured is returned by an effect whose provider the app did not
// configure (Config.Sender, Config.LanguageModel, Config.Embedder).
var ErrNotConfigured = errors.New("oke: provider not configured")

// ErrSecretNotFound is returned for a secret that does not exist.
var ErrSecretNotFound = errors.New("oke: secret not found")

// ErrNoDatabase is returned by Fx.Tx when the app has no database to open a
// transaction on: use a driver that keeps its rows in SQL (driver/postgres),
// or set Config.DB.
var ErrNoDatabase = errors.New("oke: Fx.Tx needs a database: use the Postgres driver, or set Config.DB")

// ErrKeyNotClaimed is returned, wrapped, by the effect of a flow with a
// claim held by its transaction (ClaimInTx) that found its Idempotency-Key
// not the request's to run: the request is a replay, still in progress
// elsewhere (409) or another request under the same key (422). The effect
// did not happen, nor will any later one; return the error. The client gets
// the replay, 409 or 422, whatever the function returns.
var ErrKeyNotClaimed = idem.ErrNotClaimed

// ContractError is returned by Start when flows' options are invalid.
type ContractError struct {
	Problems []error
}

func (e *ContractError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "oke: %d problem(s) in the flows' contract:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems.
func (e *ContractError) Unwrap() []error { return e.Problems }

// ErrBadStep is returned by ReplayFrom for a step the run cannot be
// replayed from (steps count from 1, up to one past its saved steps).
var ErrBadStep = errors.New("oke: no such step to replay from")

// ErrRunCancelled is the result a cancelled run keeps (App.Cancel), and what
// a retry of the request that started it replays.
var ErrRunCancelled = &Error{Status: http.StatusConflict, Code: "RunCancelled",
	Message: "This run was cancelled by an operator before it finished."}

// Errors of App.Cancel, besides driver.ErrNotFound.
var (
	// ErrRunRunning: an execution holds the run now (a live lease); it can
	// be cancelled once it parks — sleeps, waits for a retry, or its
	// holder's lease lapses.
	ErrRunRunning = errors.New("oke: the run is running now; cancel it again when it parks (sleeps, waits for a retry, or its lease lapses)")
	// ErrRunFinished: the run has completed or failed already.
	ErrRunFinished = errors.New("oke: the run has finished; there is nothing to cancel")
	// ErrCannotCancel: the app's journal driver has no CancelRun.
	ErrCannotCancel = errors.New("oke: this app's journal driver cannot cancel runs (it does not implement driver.RunCanceller)")
)
