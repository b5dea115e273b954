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
//     tried: it fails when another transaction holds the key). It fails
//     nothing: it reports whether this transaction holds the key, or, when
//     another does, whether that one has the same fingerprint (it holds the
//     request's lock of this fingerprint: the same request, running; 409)
//     or not (another request under the key; 422) — read in one snapshot
//     of pg_locks (oke_lock_holder, called only then), so there is no
//     moment where the holder has the key's lock without its request's.
//     Claims made on their own take no lock; see "Mixed" below.
//   - lookup reads the key's row, if any, with a snapshot taken after the
//     lock, for the decision and for a replay. It runs whatever the lock
//     found: a completed row replays even while another transaction holds
//     the key.
//   - guard fails unless lock took the key's lock (a transaction-local
//     setting says so) and the key is free: no row, or one a claim may
//     replace (mayReplaceSQL).
//   - BEGIN turns the implicit transaction the three opened into the
//     flow's, so the locks last until it ends.
//
// A failure skips the rest up to the Sync, which ends the implicit
// transaction and its locks: nothing of the flow's runs, and the connection
// is left idle. A replay, 409 or 422 is one round trip, as with any claim.
// The lookup's row decides when it does not let the claim go ahead;
// otherwise, when another transaction holds the key, the claim reports it
// Busy (driver.ClaimResult), and oke answers 409 or 422 from BusySame.
//
// No row is written until the completion, which stores the response as the
// row (insertCompletedSQL, or replaceCompletedSQL over the row the lookup
// found) in the flow's transaction. One commit per request instead of two,
// and no lease: the lock lasts exactly as long as the transaction, so a
// request cut off leaves nothing to wait out.
//
// Mixed: an instance claiming the same key on its own (ClaimFirst, e.g.
// during a deploy that turns ClaimInTx on) takes no lock, so both may run
// the flow; the completion is what decides. insertCompletedSQL fails on the
// other's row (a unique violation) and replaceCompletedSQL finds a row it
// may not replace: the transaction rolls back (ErrNotOwner), so writes
// through the transaction stay exactly-once.

// What heldLockSQL found.
const (
	lockHeld  = 0 // this transaction holds the key
	lockSame  = 1 // another transaction holds it, with this fingerprint (or just let it go)
	lockOther = 2 // another transaction holds it, with another fingerprint
)

// heldLockSQL takes the request's lock ($2: requestLockKey, shared; in a
// subquery the planner may not flatten, so it is taken before the key's)
// and tries the key's ($1: lockKey). When it gets it, it marks so in the
// transaction-local setting oke.held_key, which the guard checks, and says
// lockHeld. Otherwise {s}.oke_lock_holder (migration 011) reads one
// snapshot of pg_locks for whether the transaction holding the key also
// holds the request's lock (lockSame) or not (lockOther): $3 and $4 are
// the key's lock as pg_locks shows a 64-bit key (classid, objid), $5 and
// $6 the request's. A free key — the common case — costs the two lock
// calls and nothing else: the function is planned and run only when
// called. The holder took its request's lock before the key's, so there is
// no moment at which it holds the key's without its request's.
const heldLockSQL = `SELECT CASE
	WHEN pg_try_advisory_xact_lock($1) AND set_config('oke.held_key', $1::text, true) IS NOT NULL THEN 0
	ELSE {s}.oke_lock_holder($3, $4, $5, $6) END::smallint
	FROM (SELECT pg_advisory_xact_lock_shared($2) OFFSET 0) AS request_lock`

// heldLookupSQL reads the key's row, if any.
var heldLookupSQL = `SELECT ` + prefixed("o") + `, now()
	FROM (VALUES (1)) AS one LEFT JOIN {s}.oke_idempotency o ON ` + keyWhere

// heldGuardSQL fails, with a division by zero, unless heldLockSQL took the
// key's lock ($6) in this transaction — it says so in the transaction-local
// setting oke.held_key — and a claim of the key with fingerprint $5 may go
// ahead: no row, or one it may replace. Taking the lock here instead would
// be a race: a lock taken after this statement's snapshot does not cover
// what the snapshot missed (a holder that committed its row and let the
// lock go in between), and two transactions would run the flow.
var heldGuardSQL = `SELECT 1 / (coalesce(current_setting('oke.held_key', true) = $6::bigint::text, false)
	AND NOT EXISTS (SELECT 1 FROM {s}.oke_idempotency t WHERE ` + keyWhere + `
	AND NOT (` + mayReplaceSQL("t", "$5") + `)))::int`

// insertCompletedSQL stores the response of a held claim on a key that had
// no row: the row is written completed, once. A unique violation means a
// claim made without the lock took the key meanwhile.
const insertCompletedSQL = `INSERT INTO {s}.oke_idempotency
		(tenant, principal, flow, idem_key, fingerprint, state, owner, expires_at, created_at, completed_at,
		 resp_status, resp_content_type, resp_location, resp_body)
	VALUES ($1, $2, $3, $4, $5, 2, '', now() + $6 * interval '1 microsecond', now(), now(), $7, $8, $9, $10)`

// replaceCompletedSQL stores the response of a held claim over the row the
// lookup found (expired, or lapsed), or as a new row if the sweep deleted
// that one since, and fails (division by zero) when the row there now may
// not be replaced by the claim (mayReplaceSQL at the transaction's now(),
// the lookup's: the row the lookup found, unchanged, still may; a row that
// a claim made without the lock wrote since has a lease or TTL from a
// later now(), and may not).
var replaceCompletedSQL = `WITH u AS (INSERT INTO {s}.oke_idempotency AS t
		(tenant, principal, flow, idem_key, fingerprint, state, owner, expires_at, created_at, completed_at,
		 resp_status, resp_content_type, resp_location, resp_body)
	VALUES ($1, $2, $3, $4, $5, 2, '', now() + $6 * interval '1 microsecond', now(), now(), $7, $8, $9, $10)
	ON CONFLICT (tenant, principal, flow, idem_key) DO UPDATE SET
		fingerprint = excluded.fingerprint, state = 2, owner = '', lease_until = NULL,
		expires_at = excluded.expires_at, created_at = excluded.created_at, completed_at = excluded.completed_at,
		resp_status = excluded.resp_status, resp_content_type = excluded.resp_content_type,
		resp_location = excluded.resp_location, resp_body = excluded.resp_body
	WHERE ` + mayReplaceSQL("t", "excluded.fingerprint") + `
	RETURNING 1) SELECT 1 / count(*) FROM u`

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
		resp.Status, resp.ContentType, resp.Location, body}
	if h.prev == nil {
		return d.sql(insertCompletedSQL), args
	}
	return d.sql(replaceCompletedSQL), args
}

// lockKey is the advisory lock key of k: the first 64 bits of a SHA-256 of
// its parts, each prefixed with its length. Two keys share a lock only by
// a collision of those bits (a request then gets a needless 409 while the
// other runs).
func lockKey(k driver.Key) int64 { return hashParts(k.Tenant, k.Principal, k.Flow, k.Key) }

// requestLockKey is the advisory lock key of a request: its key k and its
// fingerprint fp, hashed as lockKey hashes k's parts.
func requestLockKey(k driver.Key, fp string) int64 {
	return hashParts(k.Tenant, k.Principal, k.Flow, k.Key, fp)
}

func hashParts(parts ...string) int64 {
	n := 8 * len(parts)
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
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
	kl, rl := lockKey(k), requestLockKey(k, req.Fingerprint)
	kc, ko := lockParts(kl)
	rc, ro := lockParts(rl)
	err := pipe.Send(ctx,
		pgpipe.Statement{SQL: d.sql(heldLockSQL), Args: []any{kl, rl, int64(kc), int64(ko), int64(rc), int64(ro)}},
		pgpipe.Statement{SQL: d.sql(heldLookupSQL), Args: []any{k.Tenant, k.Principal, k.Flow, k.Key}},
		pgpipe.Statement{SQL: d.sql(heldGuardSQL), Args: []any{k.Tenant, k.Principal, k.Flow, k.Key, req.Fingerprint, kl}},
	)
	if errors.Is(err, pgpipe.ErrNotSent) {
		// Claim on the driver's pool, and send the statement with its
		// BEGIN as usual.
		return p.claimAlone(ctx, req)
	}
	if err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}

	refused := func(res driver.ClaimResult) error {
		err := t.Done(res, nil)
		if err == nil { // unreachable: a result that is not Claimed never goes to the flow
			err = errors.New("postgres: claim: the key was refused, yet the claim went to the flow")
		}
		return err
	}
	m := pipe.TypeMap()
	lock, err := readLock(pipe, m)
	if err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}
	seen, existed, now, err := readLookup(pipe, m)
	if err != nil {
		return p.claimFailed(d.wrap("claim", err))
	}
	if err := readClosed(pipe); err != nil { // the guard
		if !divByZero(err) {
			return p.claimFailed(d.wrap("claim", err))
		}
		if existed {
			if ok, _ := driver.MayReplace(&seen, req.Fingerprint, now); !ok {
				// The row decides, whoever holds the lock.
				return refused(driver.ClaimResult{Row: seen, Now: now})
			}
		}
		// Another transaction holds the key (or, without its lock, a
		// claim made on its own wrote a row the lookup did not see: it
		// is running).
		return refused(driver.ClaimResult{Now: now, Busy: true, BusySame: lock != lockOther})
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
func readLookup(pipe *pgpipe.Pipeline, m *pgtype.Map) (row driver.Row, existed bool, now time.Time, err error) {
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
		if len(vals) != rowDests+1 {
			err = fmt.Errorf("the lookup returned %d columns, want %d", len(vals), rowDests+1)
			continue
		}
		last := len(vals) - 1
		if err = m.Scan(fds[last].DataTypeOID, fds[last].Format, vals[last], &now); err != nil {
			continue
		}
		if vals[0] == nil { // no row: the left join's NULLs
			continue
		}
		var s rowScan
		for i, dst := range s.dest() {
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

// readLock reads what heldLockSQL found (lockHeld, lockSame, lockOther).
func readLock(pipe *pgpipe.Pipeline, m *pgtype.Map) (int16, error) {
	rr, err := pipe.Next()
	if err != nil {
		return 0, err
	}
	var v int16
	read := false
	for rr.NextRow() {
		fds, vals := rr.FieldDescriptions(), rr.Values()
		if read || len(vals) != 1 {
			err = fmt.Errorf("the lock returned an unexpected row")
			continue
		}
		read = true
		err = m.Scan(fds[0].DataTypeOID, fds[0].Format, vals[0], &v)
	}
	if _, cerr := rr.Close(); err == nil {
		err = cerr
	}
	if err == nil && !read {
		err = pgx.ErrNoRows
	}
	return v, err
}

// divByZero reports whether err is the server's division by zero: how the
// claim's lock and guard refuse.
func divByZero(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22012"
}
