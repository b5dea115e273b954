package idem

import (
	"time"

	"github.com/okengine/oke/driver"
)

// Decide says what a request with fingerprint fp gets from row, the row of
// key read at now (this process's clock), without claiming it: Replay,
// InProgress or Reused, by the same rules as Begin — as Current does, for
// a row read by the caller (several keys' rows read at once:
// driver.RowsGetter). ok is false when the row no longer protects the key.
func (e *Engine) Decide(key driver.Key, fp string, row driver.Row, now time.Time) (d Decision, ok bool) {
	if row.Expired(now) {
		return Decision{}, false
	}
	return e.decide(key, "", 0, 0, fp, driver.ClaimResult{Row: row, Now: now}), true
}
