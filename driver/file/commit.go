package file

import "sync"

// committer makes writes durable with group commit: callers that need their
// write fsynced wait in waitDurable; the first becomes the leader and fsyncs
// everything written so far, the others wait for it, and one of those whose
// write came too late for that fsync leads the next. No goroutine runs in the
// background. Every fsync of a log goes through its committer, one at a
// time, so a failed one is never hidden by another that ran beside it.
type committer struct {
	mu     sync.Mutex
	cond   sync.Cond // L is &mu
	busy   bool      // a leader is fsyncing, or the log file is being swapped
	synced uint64    // every write with seq <= synced is durable
	// err: an fsync failed, so nothing written after synced can be
	// trusted until a rewrite heals the log (resume with healed).
	err   error
	syncs uint64 // fsyncs done by leaders (for benchmarks)
}

// waitDurable returns once the write with sequence number seq is fsynced.
// It does not hold the log owner's mutex while it waits or syncs. After a
// failed fsync it fails at once for every write the last good fsync did not
// cover, and succeeds for those it did.
func (l *logFile) waitDurable(seq uint64) error {
	c := &l.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.synced < seq {
		if c.err != nil {
			return c.err
		}
		if c.busy {
			c.cond.Wait()
			continue
		}
		l.leadSync()
	}
	return nil
}

// forceSync fsyncs the log now, even if every write is durable (after a
// write was taken back by truncating the file, to make that durable).
func (l *logFile) forceSync() error {
	c := &l.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.busy {
		c.cond.Wait()
	}
	if c.err == nil {
		l.leadSync()
	}
	return c.err
}

// leadSync fsyncs everything written so far and then records it in the
// checkpoint (a pwrite, no fsync), and wakes the waiters. c.mu held and
// not busy; it is released during the fsync. A failure stops the log's
// writes until heal rewrites it.
func (l *logFile) leadSync() {
	c := &l.commit
	c.busy = true
	// Everything written before Sync starts is covered by it.
	m := l.loadTail()
	f := l.file.Load()
	c.mu.Unlock()
	err := l.hooks.sync(f, l.name)
	if err == nil {
		// Only after the fsync: the checkpoint never claims more than
		// is durable.
		l.ck.synced(l.ckIdx, m)
	} else {
		l.ck.markSuspect(l.ckIdx)
	}
	c.mu.Lock()
	c.busy = false
	c.syncs++
	if err != nil {
		c.err = l.unavailable("fsync", err)
		l.setFault(c.err, true)
	} else {
		c.synced = max(c.synced, m.seq)
	}
	c.cond.Broadcast()
}

// durable is the last write known to be durable.
func (c *committer) durable() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// pause waits for an fsync in flight and keeps new leaders out, so the log
// file can be swapped or closed. The caller holds the log owner's mutex, so
// nothing is written meanwhile.
func (c *committer) pause() {
	c.mu.Lock()
	for c.busy {
		c.cond.Wait()
	}
	c.busy = true
	c.mu.Unlock()
}

// resume ends a pause. If err is nil, every write up to synced is durable;
// otherwise err is what waiting callers get. healed: the log was rewritten
// whole, so an earlier fsync failure no longer matters.
func (c *committer) resume(synced uint64, err error, healed bool) {
	c.mu.Lock()
	c.busy = false
	if healed {
		c.err = nil
	}
	if err != nil {
		if c.err == nil {
			c.err = err
		}
	} else {
		c.synced = max(c.synced, synced)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}
