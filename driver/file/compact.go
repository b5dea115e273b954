package file

import "github.com/okengine/oke/driver"

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

// Compact rewrites the log with only the live rows, now. The driver compacts
// on its own when dead records dominate; Compact is for tools and tests.
func (d *Driver) Compact() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return driver.ErrClosed
	}
	if fe := d.fault.Load(); fe != nil {
		return fe.err
	}
	return d.compactLocked()
}

// compactLocked writes every live row to a new log and swaps it in (see
// logFile.rewrite). mu held.
func (d *Driver) compactLocked() error {
	var buf []byte
	return d.rewrite(func(add func(line []byte) error) error {
		var err error
		if buf, err = appendRecord(buf[:0], formatRecord()); err != nil {
			return err
		}
		if err := add(buf); err != nil {
			return err
		}
		for _, e := range d.rows {
			if buf, err = appendRecord(buf[:0], putRecord(&e.row)); err != nil {
				return err
			}
			if err := add(buf); err != nil {
				return err
			}
		}
		return nil
	})
}
