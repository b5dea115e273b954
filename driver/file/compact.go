package file

import (
	"context"

	"github.com/okengine/oke/driver"
)

// maybeCompact compacts the log when dead records dominate: at least
// cfg.compactMin of them and more than twice the live rows. mu held. A failed
// compaction leaves the log as it was (the write that triggered it has
// succeeded); it is tried again after another cfg.compactMin writes.
func (d *Driver) maybeCompact() {
	live := len(d.rows)
	dead := d.records - live
	if dead < d.cfg.compactMin || dead <= 2*live || d.records < d.retryAt {
		return
	}
	if err := d.compactLocked(); err != nil {
		d.retryAt = d.records + d.cfg.compactMin
	}
}

// Compact rewrites both logs with only what is live, now. The driver compacts
// on its own when dead records dominate; Compact is for tools and tests.
func (d *Driver) Compact() error {
	if d.ro {
		return readOnlyError("compact", d.dir)
	}
	d.mu.Lock()
	err := d.compactRows()
	d.mu.Unlock()
	if err != nil {
		return err
	}
	j := &d.jr
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(context.Background()); err != nil {
		return err
	}
	return j.compactLocked()
}

// compactRows compacts idempotency.json now. mu held.
func (d *Driver) compactRows() error {
	if d.closed {
		return driver.ErrClosed
	}
	return d.compactLocked()
}

// compactLocked writes every live row to a new log and swaps it in (see
// logFile.rewrite). mu held.
func (d *Driver) compactLocked() error {
	var buf []byte
	return d.rewrite(func(format []byte, chain *uint32, add func(line []byte) error) error {
		if err := add(format); err != nil {
			return err
		}
		for _, e := range d.rows {
			var err error
			if buf, err = appendRecord(buf[:0], putRecord(&e.row), chain); err != nil {
				return err
			}
			if err := add(buf); err != nil {
				return err
			}
		}
		return nil
	})
}
