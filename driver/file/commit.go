package file

import "sync"

// committer makes writes durable with group commit: callers that need their
// write fsynced wait in waitDurable; the first becomes the leader and fsyncs
// everything written so far, the others wait for it, and one of those whose
// write came too late for that fsync leads the next. No goroutine runs in the
// background.
type committer struct {
	mu     sync.Mutex
	cond   sync.Cond // L is &mu
	busy   bool      // a leader is fsyncing, or the log file is being swapped
	synced uint64    // every write with seq <= synced is durable
	err    error     // an fsync failed: nothing unsynced can be trusted
	syncs  uint64    // fsyncs done by leaders (for benchmarks)
}

// waitDurable returns once the write with sequence number seq is fsynced.
// It does not hold the log owner's mutex while it waits or syncs.
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
		// Lead: everything written before Sync starts is covered by it.
		c.busy = true
		target := l.written.Load()
		f := l.file.Load()
		c.mu.Unlock()
		err := f.Sync()
		c.mu.Lock()
		c.busy = false
		c.syncs++
		if err != nil {
			c.err = l.unavailable("fsync", err)
			l.fail(c.err)
		} else {
			c.synced = max(c.synced, target)
		}
		c.cond.Broadcast()
	}
	return nil
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
// otherwise err is what waiting callers get.
func (c *committer) resume(synced uint64, err error) {
	c.mu.Lock()
	c.busy = false
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
