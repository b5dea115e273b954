// Package token makes the identifiers oke writes to its stores: owner
// tokens, which fence every lease (an Idempotency-Key claim, a journal run's
// pick-up), and run IDs. Each is a random per-process part and a counter:
// unique across processes and restarts without a read of crypto/rand per
// request.
package token

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"
)

var (
	processStart = time.Now()
	prefix       = func() string {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand never fails on the platforms Go supports
		}
		return hex.EncodeToString(b[:])
	}()
	seq atomic.Uint64
)

// Owner returns a token unique to one holder of a lease: one claim attempt
// of an Idempotency-Key, or one pick-up of a journal run. Only equality
// matters: a fenced write succeeds only for the current owner.
func Owner() string {
	return prefix + "-" + strconv.FormatUint(seq.Add(1), 36)
}

// RunID returns a new run ID: "run_", the time in milliseconds (hex, so IDs
// sort roughly by creation), the per-process part and a counter. The time
// is the process's start plus the monotonic time since: one clock read, and
// IDs of one process never go back when the wall clock is set back.
func RunID() string {
	return RunIDAt(processStart.Add(time.Since(processStart)))
}

// RunIDAt is RunID with the time now given.
func RunIDAt(now time.Time) string {
	var b [64]byte
	id := append(b[:0], "run_"...)
	id = strconv.AppendInt(id, now.UnixMilli(), 16)
	id = append(id, prefix[:12]...)
	id = append(id, '_')
	id = strconv.AppendUint(id, seq.Add(1), 36)
	return string(id)
}
