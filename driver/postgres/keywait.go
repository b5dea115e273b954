package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/driver"
)

// Waits for keys across instances (driver.KeyWaiter; Prefer: wait).
//
// Every driver whose listener runs (HearWaiters, WaitFor, WatchDue) also
// LISTENs on WaitChannel, on the same connection as the wake-ups. Two
// messages go on it, each naming a key by the hex of the first 128 bits of
// a SHA-256 of its parts (keyHash):
//
//   - "w:<hash>": someone waits for the key. WaitFor sends it once its
//     listener LISTENs (and the listener sends it again for every key still
//     waited for after it reconnects). Every listening driver remembers the
//     hash for waitHeardTTL, longer than any wait the app allows (60 s).
//   - "d:<hash>": the key completed. A driver that completes a key whose
//     hash it remembers sends it with the completion: in the same statement
//     (Complete) or in the same pipeline before COMMIT (CommitComplete), so
//     it goes out when, and only if, the completion commits, with no round
//     trip of its own. Every listening driver forgets the hash and wakes its
//     waiters for it, which read the row.
//
// A completion of a key no one announced a wait for sends nothing: the
// completing driver checks an atomic count (zero: nothing heard) and, only
// when it is not zero, a map. The announcement reaches the holder of the
// key asynchronously; a completion that commits after the waiter read the
// row but before the holder's listener heard "w:" sends nothing, and the
// waiter sees it at its next poll (the app polls early on, and keeps
// polling, less often, as the fallback).

// waitHeardTTL is how long a driver remembers that a key is waited for.
const waitHeardTTL = 2 * time.Minute

// keyWatch is the part of watch (under its mutex) that waits for keys.
type keyWatch struct {
	chOnce  sync.Once
	channel string // WaitChannel
	// waiting holds this driver's waiters (WaitFor) by key hash.
	waiting map[string]map[chan struct{}]struct{}
	// heard holds the hashes announced as waited for, with when to forget
	// them; nHeard is its size, read without the mutex by completions.
	heard     map[string]time.Time
	nHeard    atomic.Int64
	nextPurge time.Time
}

var _ driver.KeyWaiter = (*Driver)(nil)

// WaitChannel returns the LISTEN/NOTIFY channel on which the driver's
// instances announce waits for keys and their completions: "oke_wait:" and
// the schema's name (hashed when the two would be longer than 63 bytes).
func (d *Driver) WaitChannel() string { return d.waitChannel() }

func (d *Driver) waitChannel() string {
	k := &d.watch.keys
	k.chOnce.Do(func() { k.channel = prefixedChannel("oke_wait:", d.schema) })
	return k.channel
}

// prefixedChannel is prefix and schema as a channel name, with the schema's
// SHA-256 prefix in its place when that is too long for an identifier.
func prefixedChannel(prefix, schema string) string {
	name := prefix + schema
	if len(name) <= maxIdentifier {
		return name
	}
	sum := sha256.Sum256([]byte(schema))
	return prefix + hex.EncodeToString(sum[:16])
}

// keyHash names k in the messages on WaitChannel: the hex of the first 128
// bits of a SHA-256 of its parts, each prefixed with its length.
func keyHash(k driver.Key) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range []string{k.Tenant, k.Principal, k.Flow, k.Key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// HearWaiters implements driver.KeyWaiter: it keeps the listener running,
// so that the driver hears the waits other instances announce and its
// completions of those keys notify them.
func (d *Driver) HearWaiters() (stop func()) {
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if d.closed.Load() {
		return func() {}
	}
	d.useListener()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			stop := d.leaveListener()
			w.mu.Unlock()
			stop()
		})
	}
}

// Hearing implements driver.KeyWaiter: the listener LISTENs right now.
func (d *Driver) Hearing() bool {
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live
}

// WaitFor implements driver.KeyWaiter. When the listener LISTENs already,
// the wait is announced before WaitFor returns (one round trip, on the
// pool); otherwise the listener announces it once it LISTENs, and signals.
func (d *Driver) WaitFor(ctx context.Context, key driver.Key) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h := keyHash(key)
	w := &d.watch
	w.mu.Lock()
	if d.closed.Load() {
		w.mu.Unlock()
		return c, func() {}
	}
	k := &w.keys
	if k.waiting == nil {
		k.waiting = make(map[string]map[chan struct{}]struct{})
	}
	if k.waiting[h] == nil {
		k.waiting[h] = make(map[chan struct{}]struct{})
	}
	k.waiting[h][c] = struct{}{}
	d.useListener()
	live := w.live
	w.mu.Unlock()
	if live {
		if _, err := d.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, d.waitChannel(), "w:"+h); err != nil {
			// The waiter polls; the listener announces again if it
			// reconnects.
			slog.Default().Debug("oke: postgres: announce a wait for a key", "err", err)
		}
	}
	var once sync.Once
	return c, func() {
		once.Do(func() {
			w.mu.Lock()
			if cs := k.waiting[h]; cs != nil {
				delete(cs, c)
				if len(cs) == 0 {
					delete(k.waiting, h)
				}
			}
			stop := d.leaveListener()
			w.mu.Unlock()
			stop()
		})
	}
}

// listenerUp is called once the listener LISTENs on conn: it announces the
// waits of this driver (any sent while it was down were not heard) and
// wakes their waiters, which read their rows again.
func (d *Driver) listenerUp(ctx context.Context, conn *pgx.Conn) error {
	w := &d.watch
	w.mu.Lock()
	w.live = true
	hashes := make([]string, 0, len(w.keys.waiting))
	for h, cs := range w.keys.waiting {
		hashes = append(hashes, "w:"+h)
		for c := range cs {
			poke(c)
		}
	}
	w.mu.Unlock()
	if len(hashes) == 0 {
		return nil
	}
	_, err := conn.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, d.waitChannel(), hashes)
	return err
}

// listenerDown is called when the listener stops LISTENing.
func (d *Driver) listenerDown() {
	w := &d.watch
	w.mu.Lock()
	w.live = false
	w.mu.Unlock()
}

// heard handles a message on WaitChannel.
func (d *Driver) heard(payload string) {
	kind, h, ok := strings.Cut(payload, ":")
	if !ok || h == "" {
		return
	}
	w := &d.watch
	k := &w.keys
	w.mu.Lock()
	defer w.mu.Unlock()
	switch kind {
	case "w":
		now := time.Now()
		if k.heard == nil {
			k.heard = make(map[string]time.Time)
		}
		k.heard[h] = now.Add(waitHeardTTL)
		k.purge(now)
	case "d":
		delete(k.heard, h)
		for c := range k.waiting[h] {
			poke(c)
		}
	}
	k.nHeard.Store(int64(len(k.heard)))
}

// completionNotice returns the message that wakes the waiters of key
// ("d:<hash>") when a wait for it was heard; ok is false, at the cost of
// an atomic load, when no wait at all was heard.
func (d *Driver) completionNotice(key driver.Key) (payload string, ok bool) {
	k := &d.watch.keys
	if k.nHeard.Load() == 0 {
		return "", false
	}
	h := keyHash(key)
	now := time.Now()
	d.watch.mu.Lock()
	until, ok := k.heard[h]
	k.purge(now) // waits whose keys were never completed (released, or a lost "d:")
	d.watch.mu.Unlock()
	if !ok || now.After(until) {
		return "", false
	}
	return "d:" + h, true
}

// purge forgets the waits heard that have expired, at most every half
// waitHeardTTL. The caller holds d.watch.mu.
func (k *keyWatch) purge(now time.Time) {
	if now.Before(k.nextPurge) {
		return
	}
	for x, until := range k.heard {
		if now.After(until) {
			delete(k.heard, x)
		}
	}
	k.nextPurge = now.Add(waitHeardTTL / 2)
	k.nHeard.Store(int64(len(k.heard)))
}

// poke sends a value on c unless one is pending.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

var _ driver.RowsGetter = (*Driver)(nil)

// GetRows implements driver.RowsGetter: one statement for all of keys,
// straight off the primary key. The app polls the keys its requests wait
// for with it, as the safety net under the notifications above.
func (d *Driver) GetRows(ctx context.Context, keys []driver.Key) ([]driver.Row, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	cols := make([][]string, 4)
	for _, k := range keys {
		for i, p := range []string{k.Tenant, k.Principal, k.Flow, k.Key} {
			cols[i] = append(cols[i], p)
		}
	}
	rows, err := d.pool.Query(ctx, d.sql(`SELECT `+rowCols+` FROM {s}.oke_idempotency
		WHERE (tenant, principal, flow, idem_key) IN
			(SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]))`),
		cols[0], cols[1], cols[2], cols[3])
	if err != nil {
		return nil, d.wrap("get rows", err)
	}
	defer rows.Close()
	out := make([]driver.Row, 0, len(keys))
	for rows.Next() {
		var s rowScan
		if err := rows.Scan(s.dest()...); err != nil {
			return nil, d.wrap("get rows", err)
		}
		r, _ := s.row()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap("get rows", err)
	}
	return out, nil
}
