package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

// A claim held by the flow's transaction (driver.TxClaimer,
// oke.Idempotency.ClaimInTx) is made inside that transaction, in the round
// trip of its first statement, and commits with it:
//
//	lock · lookup · guard · BEGIN · query · Sync      (first round trip)
//	complete · COMMIT · Sync                           (second)
//
//   - lock (heldLockSQL) takes two transaction-scoped advisory locks: the
//     request's, on the key and fingerprint (shared: requests with the
//     same payload never wait for each other), then the key's (exclusive,
//     tried), both keyed by the schema too, so that schemas of one
//     database do not share them. It fails when another transaction holds
//     the key.
//   - lookup (heldLookupSQL) reads the key's row, if any, with a snapshot
//     taken after the lock, and says in a transaction-local setting
//     (oke.held_claim) whether the key is free: no row, or one a claim may
//     replace (mayReplaceSQL). The row it returns is the one to replay or
//     answer 422 from, or the one a replacing claim takes over.
//   - guard (heldGuardSQL) fails unless the lookup found the key free.
//   - BEGIN turns the implicit transaction the three opened into the
//     flow's, so the locks last until it ends.
//
// A failure skips the rest up to the Sync, which ends the implicit
// transaction and its locks: nothing of the flow's runs, and the connection
// is left idle. When the guard failed, the lookup's row decides (a replay,
// a 422, a 409 for a claim made on its own, running): one round trip, as
// for any claim. When the lock failed, the lookup did not run, and the
// driver asks, on the same connection, what stopped the claim
// (heldRefusedSQL, a round trip of its own): the key's row, which decides
// when there is one a claim may not replace, so that a completed key
// replays even while another transaction holds its lock, or else who holds
// the key. The claim is then Busy (driver.ClaimResult), and oke answers
// 409 or 422 from BusySame: whether the transaction holding the key also
// holds the request's lock of this fingerprint (the same request, running)
// or not (another payload under the key), read in one snapshot of pg_locks
// (oke_lock_holder). The holder took its request's lock before the key's,
// so there is no moment at which it holds the key's without its request's:
// the holder's payload is known from the moment it holds the key. When no
// row decided, the driver reads the row once more, with a snapshot taken
// after the locks were read: a holder that committed between the first
// look's snapshot and its read of pg_locks has let its lock go (or another
// request holds it for a moment, to find the row and refuse), and its row
// is visible by then (Postgres makes a commit visible before it releases
// the transaction's locks), so the row, not the locks, decides: 422 for
// another payload, never a 409 while the answer is knowable (issue 21).
//
// A free key — the common case — costs two lock calls, one index probe
// and two settings ahead of the flow's statement, in the same round trip;
// and a key this process has replayed once is answered without a claim at
// all (internal/idem/replayed.go).
//
// No row is written until the completion, which stores the response as the
// row (insertCompletedSQL, or replaceCompletedSQL over the row the lookup
// found) in the flow's transaction. One commit per request instead of two,
// and no row to renew: the lock lasts exactly as long as the transaction,
// so a request cut off leaves nothing to wait out. The lease still bounds
// it: the lookup sets the transaction's idle_in_transaction_session_timeout
// to the claim's lease (heldLeaseSQL), so a holder that sends nothing for
// a lease — its process paused, its flow stuck between statements — has
// its session ended by the server, its writes rolled back and the key let
// go (issue 21). Every statement the flow sends starts the count again, as
// a renewal would. Its late completion then fails (SQLSTATE 25P03, or a
// closed connection): nothing of it committed.
//
// The lookup must not take the key's lock itself: a lock taken after a
// statement's snapshot does not cover what the snapshot missed (a holder
// that committed its row and let the lock go in between), and two
// transactions would run the flow. Hence the lock's statement first. The
// lookup cannot fail the claim itself either: its row, which a replay
// needs, would be lost with its error. Hence the guard.
//
// Mixed: an instance claiming the same key on its own (ClaimFirst, e.g.
// during a deploy that turns ClaimInTx on) takes no lock, so both may run
// the flow; the completion is what decides. insertCompletedSQL fails on the
// other's row (a unique violation) and replaceCompletedSQL finds a row it
// may not replace: the transaction rolls back (ErrNotOwner), so writes
// through the transaction stay exactly-once.

// heldLockSQL takes the request's lock ($2: requestLockKey, shared; in a
// subquery the planner may not flatten, so it is taken before the key's)
// and tries the key's ($1: lockKey, exclusive), failing (oke_claim_refused,
// migration 012: SQLSTATE OKE01) when another transaction holds the key.
//
// The keys are the schema's (lockKey): two schemas of one database never
// share a lock. An oke before v0.1.0 took other keys, the same on every
// schema; v0.1.0 took both, so that it and an older instance excluded each
// other during a rolling deploy. This one takes only the schema's: it may
// run beside v0.1.0, not beside anything older (docs/postgres.md,
// "Upgrading to schema-scoped locks").
const heldLockSQL = `SELECT CASE WHEN pg_try_advisory_xact_lock($1) THEN 1
	ELSE {s}.oke_claim_refused('another transaction holds the key') END
	FROM (SELECT pg_advisory_xact_lock_shared($2) OFFSET 0) AS request_lock`

// heldLookupSQL reads the key's row, if any (rowValueCols: with its
// clock and two settings, sixteen columns, which pgconn describes without
// an allocation), and the server's clock, and
// sets oke.held_claim, for the rest of the transaction, to 1 when a claim
// with fingerprint $5 may go ahead (no row, or one it may replace), else 0.
// It also sets the transaction's idle_in_transaction_session_timeout to
// the claim's lease ($6, in milliseconds), unless the session's is shorter
// already: a holder that sends nothing for a whole lease — its process
// paused, or its flow stuck between two statements — has its session ended
// by the server, which rolls the transaction back and lets the key go.
var heldLookupSQL = `SELECT ` + prefixedValues("o") + `, now(),
	set_config('oke.held_claim', coalesce(o.idem_key IS NULL OR (` + mayReplaceSQL("o", "$5") + `), false)::int::text, true),
	` + heldLeaseSQL + `
	FROM (VALUES (1)) AS one LEFT JOIN {s}.oke_idempotency o ON ` + keyWhere

// heldLeaseSQL sets idle_in_transaction_session_timeout, for the rest of the
// transaction, to $6 milliseconds, unless it is set to less already.
const heldLeaseSQL = `set_config('idle_in_transaction_session_timeout',
		CASE WHEN current_setting('idle_in_transaction_session_timeout')::interval = interval '0'
			OR current_setting('idle_in_transaction_session_timeout')::interval > $6::bigint * interval '1 millisecond'
		THEN $6::bigint::text ELSE current_setting('idle_in_transaction_session_timeout') END, true)`

// heldGuardSQL fails (oke_claim_refused) unless the lookup found the key
// free. Should the lookup not have run, the setting is not there (an error
// of its own) or empty, from an earlier transaction, and it fails as well.
const heldGuardSQL = `SELECT CASE current_setting('oke.held_claim') WHEN '1' THEN 1
	ELSE {s}.oke_claim_refused('the key has a row this request may not take') END`

// heldRefusedSQL is what the driver asks when heldLockSQL or heldLookupSQL
// failed, after the pipeline: the key's row, if any, the server's clock
// and, unless the row decides (a claim with fingerprint $5 may not replace
// it), who holds the key's lock: {s}.oke_lock_holder (migration 011) with
// the key's lock as pg_locks shows a 64-bit key (classid $6, objid $7) and
// the request's ($8, $9); 0 when the row decides.
var heldRefusedSQL = `SELECT ` + prefixed("o") + `, now(),
	CASE WHEN o.idem_key IS NULL OR (` + mayReplaceSQL("o", "$5") + `)
		THEN {s}.oke_lock_holder($6, $7, $8, $9) ELSE 0 END::smallint
	FROM (VALUES (1)) AS one LEFT JOIN {s}.oke_idempotency o ON ` + keyWhere

// What oke_lock_holder says of a key held by another transaction.
const (
	holderSame  = 1 // it holds the request's lock of this fingerprint (or has let the key go)
	holderOther = 2 // it does not: another payload under the key
)

// insertCompletedSQL stores the response of a held claim on a key that had
// no row: the row is written completed, once. A unique violation means a
// claim made without the lock took the key meanwhile.
const insertCompletedSQL = `INSERT INTO {s}.oke_idempotency
		(tenant, principal, flow, idem_key, fingerprint, state, owner, expires_at, created_at, completed_at,
		 resp_status, resp_content_type, resp_location, resp_body, resp_trace)
	VALUES ($1, $2, $3, $4, $5, 2, '', now() + $6 * interval '1 microsecond', now(), now(), $7, $8, $9, $10, $11)`

// replaceCompletedSQL stores the response of a held claim over the row the
// lookup found (expired, or lapsed), or as a new row if the sweep deleted
// that one since, and fails (division by zero) when the row there now may
// not be replaced by the claim (mayReplaceSQL at the transaction's now(),
// the lookup's: the row the lookup found, unchanged, still may; a row that
// a claim made without the lock wrote since has a lease or TTL from a
// later now(), and may not).
var replaceCompletedSQL = `WITH u AS (INSERT INTO {s}.oke_idempotency AS t
		(tenant, principal, flow, idem_key, fingerprint, state, owner, expires_at, created_at, completed_at,
		 resp_status, resp_content_type, resp_location, resp_body, resp_trace)
	VALUES ($1, $2, $3, $4, $5, 2, '', now() + $6 * interval '1 microsecond', now(), now(), $7, $8, $9, $10, $11)
	ON CONFLICT (tenant, principal, flow, idem_key) DO UPDATE SET
		fingerprint = excluded.fingerprint, state = 2, owner = '', lease_until = NULL,
		expires_at = excluded.expires_at, created_at = excluded.created_at, completed_at = excluded.completed_at,
		resp_status = excluded.resp_status, resp_content_type = excluded.resp_content_type,
		resp_location = excluded.resp_location, resp_body = excluded.resp_body, resp_trace = excluded.resp_trace
	WHERE ` + mayReplaceSQL("t", "excluded.fingerprint") + `
	RETURNING 1) SELECT 1 / count(*) FROM u`

// heldLeaseMillis is lease in whole milliseconds, at least one (zero would
// turn the timeout off).
func heldLeaseMillis(lease time.Duration) int64 {
	return max(1, lease.Milliseconds())
}

// heldClaim is a claim the connection's open transaction holds.
type heldClaim struct {
	key       driver.Key
	owner, fp string
	prev      *driver.Row // the row the lookup found, if any
}

// completion is the statement, and its arguments, that stores resp as the
// key's row in the transaction.
func (h *heldClaim) completion(d *Driver, resp driver.Response, ttl time.Duration) (string, []any) {
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	k := h.key
	args := []any{k.Tenant, k.Principal, k.Flow, k.Key, h.fp, micros(ttl),
		resp.Status, resp.ContentType, resp.Location, body, nullText(resp.Trace)}
	if h.prev == nil {
		return d.sql(insertCompletedSQL), args
	}
	return d.sql(replaceCompletedSQL), args
}

// heldLocks are the advisory lock keys of a held claim (heldLockSQL):
// the key's and the request's.
type heldLocks struct {
	key, request int64
}

// locks computes the advisory lock keys of a claim of k with fingerprint
// fp on d's schema.
func (d *Driver) locks(k driver.Key, fp string) heldLocks {
	return heldLocks{
		key:     d.lockKey(k),
		request: hashParts(d.lockScope, k.Tenant, k.Principal, k.Flow, k.Key, fp),
	}
}

// lockKey is the advisory lock key of k in d's schema: the first 64 bits
// of a SHA-256 of the schema's name and k's parts, each prefixed with its
// length (lockScope). Two keys share a lock only by a collision of those
// bits (a request then gets a needless 409 while the other runs); the same
// key in two schemas of one database does not share one.
func (d *Driver) lockKey(k driver.Key) int64 {
	return hashParts(d.lockScope, k.Tenant, k.Principal, k.Flow, k.Key)
}

// lockScope is what lock keys on schema hash ahead of a key's parts, in
// their encoding: a tag and the schema's name, two parts more than the
// schema-less keys of an oke before v0.1.0 hashed, so that none of those
// keys' bytes are a schema's lock's (the encoding of a list of parts is
// the list's alone). Computed once, at Open.
func lockScope(schema string) []byte {
	var b []byte
	for _, p := range []string{"oke.schema", schema} {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// hashParts is the first 64 bits of a SHA-256 of scope then parts, each
// prefixed with its length. It allocates nothing unless they are longer
// than its buffer.
func hashParts(scope []byte, parts ...string) int64 {
	var buf [256]byte
	b := append(buf[:0], scope...)
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	sum := sha256.Sum256(b)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// lockParts is a 64-bit advisory lock key as pg_locks shows it: classid,
// the high 32 bits, and objid, the low ones.
func lockParts(key int64) (classid, objid uint32) {
	return uint32(uint64(key) >> 32), uint32(uint64(key))
}

// sendHeld sends req's claim, held by the transaction, ahead of the BEGIN
// and the first statement in pipe (see above), tells t the claim's result
// and returns the refusal t gives, if any. The claim goes alone when it
// cannot go in pipe.
func (p *claimPrelude) sendHeld(ctx context.Context, pipe *pgpipe.Pipeline, req driver.ClaimRequest) error {
	d, t, k := p.d, p.t, req.Key
	p.locks = d.locks(k, req.Fingerprint)
	l := &p.locks // pointers, so that the arguments take no allocation of their own
	err := pipe.Send(ctx,
		pgpipe.Statement{SQL: d.sql(heldLockSQL), Args: []any{&l.key, &l.request}},
		pgpipe.Statement{SQL: d.sql(heldLookupSQL), Args: []any{k.Tenant, k.Principal, k.Flow, k.Key, req.Fingerprint, heldLeaseMillis(req.Lease)}},
		pgpipe.Statement{SQL: d.sql(heldGuardSQL)},
	)
	if errors.Is(err, pgpipe.ErrNotSent) {
		// Claim on the driver's pool, and send the statement with its
		// BEGIN as usual.
		return p.claimAlone(ctx, req)
	}
	if err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}

	if err := readClosed(pipe); err != nil { // the lock
		if !claimRefused(err) {
			return p.claimFailed(d.wrap("claim", err))
		}
		return p.refused(ctx, pipe, req)
	}
	seen, existed, now, err := readLookup(pipe, pipe.TypeMap(), k)
	if err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}
	if err := readClosed(pipe); err != nil { // the guard
		if !claimRefused(err) {
			return p.claimFailed(d.wrap("claim", err))
		}
		res := driver.ClaimResult{Row: seen, Now: now}
		if ok, _ := driver.MayReplace(&seen, req.Fingerprint, now); !existed || ok {
			// Unreachable: the lookup said the key was taken, and
			// MayReplace, at the same now(), says otherwise. The
			// request may try again.
			res = driver.ClaimResult{Now: now, Busy: true, BusySame: true}
		}
		return p.refusal(res)
	}
	res := driver.ClaimResult{Claimed: true, InTx: true, Now: now, Row: driver.Row{
		Key: k, Fingerprint: req.Fingerprint, State: driver.Running, Owner: req.Owner,
		LeaseUntil: now.Add(req.Lease), ExpiresAt: now.Add(req.TTL), CreatedAt: now,
	}}
	h := &heldClaim{key: k, owner: req.Owner, fp: req.Fingerprint}
	if existed {
		prev := seen
		res.Previous, res.TookOver = &prev, !prev.Expired(now)
		h.prev = &prev
	}
	if err := t.Done(res, nil); err != nil {
		// Unreachable: a Claimed result goes to the flow. Should it not,
		// the refusal ends what began.
		return err
	}
	p.held = h
	return nil
}

// refused tells t why the claim of req, sent in pipe, did not go ahead when
// another transaction held its key (heldLockSQL failed): it ends the
// pipeline (the server skipped the rest of it and ended the
// implicit transaction, so the connection is idle and the claim's locks are
// gone) and reads, on the same connection, the key's row and who holds the
// key (heldRefusedSQL). It returns the refusal t gives.
func (p *claimPrelude) refused(ctx context.Context, pipe *pgpipe.Pipeline, req driver.ClaimRequest) error {
	d, k := p.d, req.Key
	conn, err := pipe.End()
	if err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}
	l := p.locks
	kc, ko := lockParts(l.key)
	rc, ro := lockParts(l.request)
	var (
		s      rowScan
		now    time.Time
		holder int16
	)
	if err := conn.QueryRow(ctx, d.sql(heldRefusedSQL), k.Tenant, k.Principal, k.Flow, k.Key, req.Fingerprint,
		int64(kc), int64(ko), int64(rc), int64(ro)).Scan(append(s.dest(), &now, &holder)...); err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}
	if seen, existed := s.row(); existed {
		if ok, _ := driver.MayReplace(&seen, req.Fingerprint, now); !ok {
			// The row decides, whoever holds the lock.
			return p.refusal(driver.ClaimResult{Row: seen, Now: now})
		}
	}
	// No row decided when the statement's snapshot was taken, and the
	// locks were read after it: a holder that committed in between has
	// let its lock go, or handed it to a request that will find its row
	// and refuse — the locks then say nothing of the payload the key
	// stores. Its row is visible before its locks go (Postgres ends a
	// transaction's visibility, then releases its locks), so a snapshot
	// taken now sees it: read the row again, and only when no row decides
	// still do the locks.
	var again rowScan
	if err := conn.QueryRow(ctx, d.sql(heldRowSQL), k.Tenant, k.Principal, k.Flow, k.Key).Scan(append(again.dest(), &now)...); err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}
	if seen, existed := again.row(); existed {
		if ok, _ := driver.MayReplace(&seen, req.Fingerprint, now); !ok {
			return p.refusal(driver.ClaimResult{Row: seen, Now: now})
		}
	}
	// Another transaction holds the key (holderOther: with another
	// payload, 422), or let it go since, rolled back or leaving a row a
	// claim may replace: the same request may try again (409).
	return p.refusal(driver.ClaimResult{Now: now, Busy: true, BusySame: holder != holderOther})
}

// heldRowSQL reads the key's row, if any, and the server's clock: the
// second look of refused.
var heldRowSQL = `SELECT ` + prefixed("o") + `, now()
	FROM (VALUES (1)) AS one LEFT JOIN {s}.oke_idempotency o ON ` + keyWhere

// refusal tells t the result res of a claim that did not go ahead, and
// returns the refusal t gives.
func (p *claimPrelude) refusal(res driver.ClaimResult) error {
	err := p.t.Done(res, nil)
	if err == nil { // unreachable: a result that is not Claimed never goes to the flow
		err = errors.New("postgres: claim: the key was refused, yet the claim went to the flow")
	}
	return err
}

// readClosed reads the next statement's results from pipe and discards
// them.
func readClosed(pipe *pgpipe.Pipeline) error {
	rr, err := pipe.Next()
	if err != nil {
		return err
	}
	_, err = rr.Close()
	return err
}

// readLookup reads heldLookupSQL's row, if any, and the server's clock.
// It decodes the row's raw values itself: for a new key, the common case,
// that is one timestamp, without the scan plans of a pgx.Rows.
func readLookup(pipe *pgpipe.Pipeline, m *pgtype.Map, k driver.Key) (row driver.Row, existed bool, now time.Time, err error) {
	rr, err := pipe.Next()
	if err != nil {
		return row, false, now, err
	}
	read := false
	for rr.NextRow() {
		if read {
			continue // unreachable: one row, the key's or NULLs
		}
		read = true
		fds, vals := rr.FieldDescriptions(), rr.Values()
		if len(vals) != rowValueDests+3 {
			err = fmt.Errorf("the lookup returned %d columns, want %d", len(vals), rowValueDests+3)
			continue
		}
		if err = m.Scan(fds[rowValueDests].DataTypeOID, fds[rowValueDests].Format, vals[rowValueDests], &now); err != nil {
			continue
		}
		if vals[1] == nil { // no row: the left join's NULLs (state is NOT NULL)
			continue
		}
		var s rowScan
		s.setKey(k)
		for i, dst := range s.appendValueDest(make([]any, 0, rowValueDests)) {
			if err = m.Scan(fds[i].DataTypeOID, fds[i].Format, vals[i], dst); err != nil {
				break
			}
		}
		if err == nil {
			row, existed = s.row() // its text and bytes are copies: the values are the connection's buffer
		}
	}
	if _, cerr := rr.Close(); err == nil {
		err = cerr
	}
	if err == nil && !read {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return driver.Row{}, false, now, err
	}
	return row, existed, now, nil
}

// claimRefused reports whether err is oke_claim_refused's: how the claim's
// lock and guard refuse.
func claimRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "OKE01"
}
