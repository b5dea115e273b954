package idem

// Settling a claim: what the outcome of a flow that ran under a claim means
// for its Idempotency-Key row (DESIGN.md section 3, "What is stored" and
// "Failures"; 6.1 "Honest 503s"). This is the one place that says it; the
// HTTP layer only carries it out.

// Ran is how a flow's function ended under a claim.
type Ran struct {
	Failed   bool // it returned an error (or panicked)
	Declared bool // the error is a declared failure (Fx.Fail, an *oke.Error)
	// NonRead: a non-read effect happened, or may have (a write, emit,
	// send, call, fetch, ask, embed, raw; a statement of a transaction
	// that committed or may have).
	NonRead bool
	// Unreachable: the error says a database or service the flow needs
	// could not be reached or written (it is not the request's fault).
	Unreachable bool
	Storable    bool // the response is a buffered JSON envelope
	TooLarge    bool // the response is larger than may be stored
}

// RowAction is what happens to the claimed row.
type RowAction uint8

const (
	// Release deletes the row: nothing changed the world, or nothing can be
	// replayed; the same key may run again.
	Release RowAction = iota + 1
	// StoreFailure stores the failure's error envelope: a declared failure
	// as itself, an undeclared one after a non-read effect as 500
	// InternalError (a new key is required).
	StoreFailure
	// StoreTombstone stores 410 IdempotentResponseNotStored: the response
	// was delivered once, too large to keep; the key never runs again.
	StoreTombstone
	// StoreResponse stores the response, replayed until the TTL.
	StoreResponse
)

// Answer is what the request is answered once the row is settled (or could
// not be: then the outcome is unknown, 503 OutcomeUnknown, whatever this
// says).
type Answer uint8

const (
	// AnswerLive sends the function's own result or error, as it is.
	AnswerLive Answer = iota + 1
	// AnswerUnavailable sends 503 Unavailable: nothing was changed and a
	// retry may work.
	AnswerUnavailable
)

// Settle is the table "outcome → what happens to the row, and the answer".
func Settle(r Ran) (RowAction, Answer) {
	switch {
	case r.Failed && !r.Declared && !r.NonRead && r.Unreachable:
		return Release, AnswerUnavailable // could not reach what it needed; changed nothing
	case r.Failed && !r.Declared && !r.NonRead:
		return Release, AnswerLive // failed before any non-read effect: may run again
	case r.Failed:
		return StoreFailure, AnswerLive // declared, or after a non-read effect
	case !r.Storable:
		return Release, AnswerLive // a stream or a raw non-JSON body: never stored
	case r.TooLarge:
		return StoreTombstone, AnswerLive
	}
	return StoreResponse, AnswerLive
}
