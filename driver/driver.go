// Package driver defines the storage contract every oke journal driver
// implements: a handful of atomic primitives over idempotency rows.
//
// A driver holds no business rule. It never decides which HTTP response a
// request gets, what a TTL means for a flow, or whether a failure deletes a
// row: the claim state machine in oke does that, once, for every driver. A
// driver only promises that each primitive is atomic and that fenced
// primitives (Renew, Complete, Release) succeed only for the current owner.
//
// Times are the store's: a driver computes lease and expiry deadlines from its
// own clock (Postgres uses now(); memory and file use the process clock), and
// reports that clock in ClaimResult.Now so callers never mix two clocks.
//
// The interface is young and may grow (journal primitives come with durable
// execution). A driver is correct when it passes driver/drivertest.
package driver

import (
	"context"
	"errors"
	"time"
)

// Errors a driver returns. Drivers wrap native errors so that errors.Is works
// with these values.
var (
	// ErrNotOwner: a fenced primitive was called by an owner that no longer
	// holds the row (its lease lapsed and another claim took the row, or the
	// row was deleted). The caller must not assume its write happened.
	ErrNotOwner = errors.New("driver: row is not held by this owner")
	// ErrNotFound: no row has that key.
	ErrNotFound = errors.New("driver: row not found")
	// ErrUnavailable: the store could not be read or written (I/O error,
	// connection lost, closed driver). The operation may or may not have
	// taken effect; callers fail closed.
	ErrUnavailable = errors.New("driver: store unavailable")
	// ErrClosed: the driver was closed. It is also ErrUnavailable.
	ErrClosed = &closedError{}
)

type closedError struct{}

func (*closedError) Error() string        { return "driver: closed" }
func (*closedError) Is(target error) bool { return target == ErrUnavailable }

// Key identifies one idempotency row: the scope (tenant, principal, flow) plus
// the client's Idempotency-Key. The same key in two scopes is two rows.
type Key struct {
	Tenant    string `json:"tenant"`
	Principal string `json:"principal"`
	Flow      string `json:"flow"`
	Key       string `json:"key"`
}

// State is where a row is in its life.
type State uint8

const (
	// Running: a request claimed the key and its flow has not finished. The
	// row is held by Owner until LeaseUntil.
	Running State = 1
	// Completed: the response is stored and is replayed until ExpiresAt.
	Completed State = 2
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Completed:
		return "completed"
	}
	return "unknown"
}

// Response is a stored HTTP response: what is replayed, and the trace of
// the request that produced it.
type Response struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	Location    string `json:"location,omitempty"`
	Body        []byte `json:"body,omitempty"`
	// Trace names the OpenTelemetry span of the request that produced the
	// response, when that request was traced: its trace ID and span ID in
	// hex, joined by "-" (32 + 1 + 16 characters). A replay's span links
	// to it. Empty when the request was not traced. A driver stores it
	// with the response and returns it as given; it is never replayed.
	Trace string `json:"trace,omitempty"`
}

// Row is one idempotency row as stored.
type Row struct {
	Key         Key
	Fingerprint string // hex SHA-256 of flow name + canonical input
	State       State
	Owner       string    // owner token of the current holder (Running rows)
	LeaseUntil  time.Time // Running rows: the holder's lease deadline
	ExpiresAt   time.Time // when the row may be deleted (TTL)
	CreatedAt   time.Time
	CompletedAt time.Time // zero while Running
	Response    *Response // set when Completed
	RunID       string    // journal run linked to this row (durable flows)
}

// Expired reports whether the row no longer protects its key at time now:
// its TTL has passed and no live lease holds it.
func (r *Row) Expired(now time.Time) bool {
	if r.State == Running && now.Before(r.LeaseUntil) {
		return false
	}
	return !now.Before(r.ExpiresAt)
}

// Lapsed reports whether the row is Running with a lease that has ended.
func (r *Row) Lapsed(now time.Time) bool {
	return r.State == Running && !now.Before(r.LeaseUntil)
}

// MayReplace is the replace rule of Claim, for drivers that keep their rows
// in Go (memory, file; a SQL driver states the same rule in its claim
// statement): a claim with fingerprint fp at time now may replace row when
// the row has Expired, or has Lapsed with the same fingerprint — then
// takeover is true: the same request resumes, keeping the row's run.
func MayReplace(row *Row, fp string, now time.Time) (ok, takeover bool) {
	switch {
	case row.Expired(now):
		return true, false
	case row.Lapsed(now) && row.Fingerprint == fp:
		return true, true
	}
	return false, false
}

// ClaimedRow is the Running row a claim creates at time now: owned by
// req.Owner, with its lease and TTL from now. On a takeover of old, the row
// keeps old's run (the same request resumes it).
func ClaimedRow(req ClaimRequest, old *Row, takeover bool, now time.Time) Row {
	row := Row{
		Key:         req.Key,
		Fingerprint: req.Fingerprint,
		State:       Running,
		Owner:       req.Owner,
		LeaseUntil:  now.Add(req.Lease),
		ExpiresAt:   now.Add(req.TTL),
		CreatedAt:   now,
		RunID:       req.RunID,
	}
	if takeover && old != nil && old.RunID != "" {
		row.RunID = old.RunID
	}
	return row
}

// ClaimRequest asks to claim a key.
type ClaimRequest struct {
	Key         Key
	Fingerprint string
	Owner       string        // a token unique to this attempt
	Lease       time.Duration // how long the claim holds without renewal
	TTL         time.Duration // how long the row lives from now (renewed on Complete)
	// RunID optionally links a journal run to a new row. On a takeover the
	// row keeps the run it already links (the same request resumes that
	// run); RunID only fills in a row that links none.
	RunID string
}

// ClaimResult is the outcome of a claim.
type ClaimResult struct {
	// Claimed: the caller now owns the row (Running, Owner = request's owner).
	Claimed bool
	// TookOver is set with Claimed when a lapsed Running row with the same
	// fingerprint was taken over (its Previous row is given, e.g. to resume
	// its journal run; Row.RunID keeps that run).
	TookOver bool
	// Row is the row after the claim: the caller's new row when Claimed,
	// otherwise the existing row that stopped the claim.
	Row Row
	// Previous is the row that was replaced when Claimed over an existing
	// row (expired, or lapsed with the same fingerprint); nil otherwise.
	Previous *Row
	// Now is the store's clock at the claim.
	Now time.Time
	// InTx is set with Claimed when the claim is held by the flow's
	// transaction (TxClaimer.BeginClaimed): no row exists until that
	// transaction commits, with the response (TxDriver.CommitComplete);
	// if it ends any other way, nothing of the claim remains. No lease is
	// needed: the claim lasts as long as the transaction.
	InTx bool
	// Busy is set, with Claimed false, when another claim holds the key
	// that the store cannot show as a row yet (one held by another
	// transaction: TxClaimer) and no row decides the claim: Row is empty.
	// BusySame says whether that claim's fingerprint is this request's.
	// The driver reports the fact; what it means for the request (409 or
	// 422) is the claim state machine's to say.
	Busy, BusySame bool
}

// Driver is the storage contract. All methods are safe for concurrent use.
//
// Claim is one atomic claim-or-read. It creates a Running row owned by
// req.Owner when
//   - no row has the key, or
//   - the row has Expired (TTL passed, no live lease), or
//   - the row has Lapsed (Running, lease ended) and has the same fingerprint
//     (the same request resumes; TookOver is set).
//
// Otherwise it returns the existing row unchanged with Claimed false. A row
// that is both Expired and Lapsed counts as Expired: the claim replaces it as
// a new row (TookOver false, its RunID not carried over).
//
// All strings (key parts, fingerprint, owner, content type, location) must be
// valid UTF-8; a driver may refuse others with an error. A limit of zero or
// less in List and Sweep means no limit. Close may be called more than once;
// later calls return nil or ErrClosed.
type Driver interface {
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Renew extends the lease of a Running row held by owner to now+lease.
	// ErrNotOwner if owner no longer holds it.
	Renew(ctx context.Context, key Key, owner string, lease time.Duration) error
	// Complete stores resp on a Running row held by owner, marks it
	// Completed and sets ExpiresAt to now+ttl. It returns only once the
	// response is durable. ErrNotOwner if owner no longer holds it.
	Complete(ctx context.Context, key Key, owner string, resp Response, ttl time.Duration) error
	// Release deletes a Running row held by owner. ErrNotOwner if owner no
	// longer holds it.
	Release(ctx context.Context, key Key, owner string) error
	// Get returns the row with key, expired or not. ErrNotFound if none.
	Get(ctx context.Context, key Key) (Row, error)
	// List returns up to limit rows in key order after the cursor key
	// (exclusive; the zero Key starts at the beginning), for consoles and CLIs.
	List(ctx context.Context, after Key, limit int) ([]Row, error)
	// Sweep deletes up to limit Expired rows and reports how many it deleted.
	Sweep(ctx context.Context, limit int) (int, error)
	// Close releases the driver's resources. Later calls fail with ErrClosed.
	Close() error
}

// RowDeleter is optional on a Driver: it deletes one row whatever its
// state, for an operator (the admin surface, oke idempotency delete). A
// deleted Running row's holder is fenced out: its Renew, Complete and
// Release fail with ErrNotOwner. The next request with the key runs as
// new. This interface is not stable yet.
type RowDeleter interface {
	// Delete deletes the row with key. ErrNotFound if there is none.
	// Durable when it returns.
	Delete(ctx context.Context, key Key) error
}

// IdleRowDeleter is optional on a Driver: it deletes one row unless a
// request still holds it, in one atomic step, for an operator's delete that
// must not free a key whose first execution is still going on (the next
// request would start a second one beside it). The admin surface and oke
// idempotency delete use it when the driver has it, and a look-up followed
// by a fenced Release or a Delete otherwise. This interface is not stable
// yet.
type IdleRowDeleter interface {
	// DeleteIdle deletes the row with key unless it is Running and its
	// lease has not ended on the store's clock; then it deletes nothing
	// and returns the row with held set. ErrNotFound if there is none.
	// Durable when it returns.
	DeleteIdle(ctx context.Context, key Key) (row Row, held bool, err error)
}

// RowFinder is optional on a Driver: it finds the rows of one
// Idempotency-Key across scopes, for an operator looking a key up (the
// admin surface, oke idempotency show). A driver without it is searched
// with List. This interface is not stable yet.
type RowFinder interface {
	// FindRows returns up to limit rows (zero or less: no limit) whose
	// Idempotency-Key is key.Key, in key order (KeyLess), expired or not;
	// each of key.Tenant, key.Principal and key.Flow that is not empty
	// narrows them to that scope part.
	FindRows(ctx context.Context, key Key, limit int) ([]Row, error)
}

// RowsGetter is optional on a Driver: it reads the rows of several keys in
// one call (one statement on Postgres). The app's safety-net poll of the
// keys that requests wait for (Prefer: wait) reads them all with one call
// instead of one Get per key. This interface is not stable yet.
type RowsGetter interface {
	// GetRows returns the rows of keys, in any order, expired or not; a
	// key with no row is left out.
	GetRows(ctx context.Context, keys []Key) ([]Row, error)
}

// MatchKey reports whether row key k is one FindRows(want) returns.
func MatchKey(k, want Key) bool {
	return k.Key == want.Key && (want.Tenant == "" || k.Tenant == want.Tenant) &&
		(want.Principal == "" || k.Principal == want.Principal) && (want.Flow == "" || k.Flow == want.Flow)
}

// KeyLess orders keys for List: tenant, principal, flow, key.
func KeyLess(a, b Key) bool {
	if a.Tenant != b.Tenant {
		return a.Tenant < b.Tenant
	}
	if a.Principal != b.Principal {
		return a.Principal < b.Principal
	}
	if a.Flow != b.Flow {
		return a.Flow < b.Flow
	}
	return a.Key < b.Key
}

// KeyWaiter is optional on a Driver whose rows several processes share
// (Postgres): it tells a process that waits for a key in progress (a
// request held by Prefer: wait) when another process completes that key,
// so that the waiter need not poll the row. Only keys some process waits
// for are notified: a completion nobody waits for costs nothing more.
// Notifications are hints: the waiter reads the row when woken, and still
// polls, less often, as the fallback — a hint may be lost (a listener that
// reconnects, a pooler where LISTEN does not work, a completion that raced
// the announcement of the wait). A driver that does not implement it
// (memory, file) has only its own process to hear from. This interface is
// not stable yet.
type KeyWaiter interface {
	// HearWaiters makes the driver learn of the waits WaitFor announces,
	// in any process, so that its completions of those keys notify the
	// waiters; until stop. A process calls it while it serves requests.
	HearWaiters() (stop func())
	// WaitFor announces that this process waits for key to complete and
	// returns a channel that receives a value whenever it may have: a
	// completion of key, by any process hearing waiters, was notified, or
	// the driver's listener (re)connected (notifications may have been
	// missed). Values coalesce: the channel holds at most one. The
	// announcement reaches the other processes asynchronously, so a
	// completion right after WaitFor may go unnotified: the caller reads
	// the row once WaitFor returns, and polls early on. Call stop when done.
	WaitFor(ctx context.Context, key Key) (c <-chan struct{}, stop func())
	// Hearing reports whether the driver hears notifications right now
	// (its listener is connected): the caller may poll less often then.
	Hearing() bool
}
