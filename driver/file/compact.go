package file

import (
	"bufio"
	"os"
	"path/filepath"

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

// compactLocked writes every live row to a new file, fsyncs it, renames it
// over the log and fsyncs the folder. A crash at any point leaves the old log
// or the new one, each complete. mu held.
func (d *Driver) compactLocked() (err error) {
	tmp := filepath.Join(d.dir, compactName)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return d.unavailable("compact", err)
	}
	swapped := false
	defer func() {
		if !swapped {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var (
		buf     []byte
		size    int64
		records int
	)
	emit := func(rec *record) error {
		var err error
		if buf, err = appendRecord(buf[:0], rec); err != nil {
			return err
		}
		n, err := w.Write(buf)
		size += int64(n)
		records++
		return err
	}
	if err := emit(formatRecord()); err != nil {
		return d.unavailable("compact", err)
	}
	for _, e := range d.rows {
		if err := emit(putRecord(&e.row)); err != nil {
			return d.unavailable("compact", err)
		}
	}
	if err := w.Flush(); err != nil {
		return d.unavailable("compact", err)
	}
	if err := f.Sync(); err != nil {
		return d.unavailable("compact", err)
	}

	// Swap files with no fsync in flight on the old one.
	d.commit.pause()
	if err := os.Rename(tmp, d.path); err != nil {
		d.commit.resume(0, nil)
		return d.unavailable("compact", err)
	}
	swapped = true
	old := d.f
	d.f, d.size, d.records = f, size, records
	d.file.Store(f)
	_ = old.Close()
	// The new log holds every write so far and is fsynced; once the rename
	// is durable, so is every write.
	if err := syncDir(d.dir); err != nil {
		err = d.unavailable("fsync folder after compacting", err)
		d.fail(err)
		d.commit.resume(0, err)
		return err
	}
	d.commit.resume(d.seq, nil)
	d.compactions++
	d.retryAt = 0
	return nil
}
