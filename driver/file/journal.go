package file

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/okengine/oke/driver"
)

var _ driver.Journal = (*Driver)(nil)

// journal is the runs of a Driver and their log, journal.json. It has its own
// mutex and its own group commit, so runs and idempotency rows do not wait on
// each other.
type journal struct {
	mu sync.Mutex
	logFile
	cfg       config
	closed    bool
	replaying bool

	runs     map[string]*jrun
	byID     []*jrun            // every run in ID order, and removed ones (gone) until tidied
	gone     int                // runs in byID that were removed
	dedupe   map[string]*jrun   // DedupeKey → run
	claims   map[string]*jclaim // business key → holder
	due      dueHeap            // every run that is not finished, by when it is due
	done     []*jrun            // finished runs, oldest finish first from doneHead (retention)
	doneHead int                // done[:doneHead] were dropped

	// What a compaction would keep: the format record, one record per run,
	// step and claim. liveBytes estimates its size (a finished run's finish
	// record counts, since compaction folds it into the run's record).
	liveRecs  int
	liveBytes int64
}

// jrun is one run in memory.
type jrun struct {
	run     driver.Run
	steps   []driver.Step
	starts  map[int]jstart // read at Open from an older log's start records (see legacyStart)
	claims  []string       // business keys the run holds
	due     int64          // Unix ns from which AcquireRun takes it (unfinished runs)
	idx     int            // index in journal.due; -1 when finished
	gone    bool           // removed (retention); still in journal.byID until it is tidied
	durable uint64         // last write that must be durable before the run is shown

	// Bytes of its records that a compaction would keep (see liveBytes).
	head, fin, stepBytes, claimBytes int64

	signals     []driver.Signal // signals sent to the run, in Seq order (signal.go)
	signalBytes int64           // bytes of their records, as above
}

type jclaim struct {
	id  string // the run that holds the key
	seq uint64 // the write of the claim (0 if read at Open)
}

func (e *jrun) liveBytes() int64 {
	return e.head + e.fin + e.stepBytes + e.claimBytes + e.signalBytes
}

// legacyStart applies an attempt count that an older oke wrote (a start
// record, or the starts of a compacted run record): how many executions had
// begun step s.Seq. When that step is the run's next one, it is the run's
// NextAttempts; a count for a later step is kept until the steps before it
// are replayed (a compacted run record comes before its steps).
func (e *jrun) legacyStart(s jstart) {
	if s.Seq == len(e.steps)+1 {
		e.run.NextAttempts = s.Attempts
		return
	}
	if s.Seq > len(e.steps) {
		if e.starts == nil {
			e.starts = make(map[int]jstart)
		}
		e.starts[s.Seq] = s
	}
}

// nanos is t in Unix nanoseconds, clamped to int64.
func nanos(t time.Time) int64 {
	switch {
	case t.Year() >= 2262:
		return math.MaxInt64
	case t.Year() <= 1677:
		return math.MinInt64
	}
	return t.UnixNano()
}

// dueAt is when AcquireRun may take an unfinished run: once a holder's lease
// has ended (and WakeAt passed), or for an unowned run at WakeAt, or, with no
// WakeAt, from when it became unowned (created or released).
func dueAt(r *driver.Run) int64 {
	if r.Status == driver.RunDead {
		return math.MaxInt64 // never, until resumed
	}
	if r.Owner != "" {
		return max(nanos(r.LeaseUntil), nanos(r.WakeAt))
	}
	if !r.WakeAt.IsZero() {
		return nanos(r.WakeAt)
	}
	return nanos(r.UpdatedAt)
}

// --- the due heap --------------------------------------------------------------

// dueHeap is a min-heap of unfinished runs by (due, ID): DueRuns reads its
// first few, AcquireRun and RenewRun move one run, each in O(log n).
type dueHeap []*jrun

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(a, b int) bool {
	if h[a].due != h[b].due {
		return h[a].due < h[b].due
	}
	return h[a].run.ID < h[b].run.ID
}
func (h dueHeap) Swap(a, b int) {
	h[a], h[b] = h[b], h[a]
	h[a].idx, h[b].idx = a, b
}
func (h *dueHeap) Push(x any) {
	e := x.(*jrun)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.idx = -1
	*h = old[:len(old)-1]
	return e
}

// firstDue returns the IDs of up to limit runs of flows (every flow when
// empty) due at now, in heap order, visiting only the due runs it passes
// and their children: a frontier heap holds the candidates, the smallest of
// which is always the next in order. Due runs of other flows are visited
// and skipped.
func (h dueHeap) firstDue(now int64, flows []string, limit int) []string {
	var out []string
	f := frontier{h: h}
	if len(h) > 0 {
		f.idx = append(f.idx, 0)
	}
	for f.Len() > 0 && (limit < 1 || len(out) < limit) {
		i := heap.Pop(&f).(int)
		if h[i].due > now {
			break // the smallest left is not due: nothing else is
		}
		if len(flows) == 0 || slices.Contains(flows, h[i].run.Flow) {
			out = append(out, h[i].run.ID)
		}
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h) {
				heap.Push(&f, c)
			}
		}
	}
	return out
}

type frontier struct {
	h   dueHeap
	idx []int
}

func (f *frontier) Len() int           { return len(f.idx) }
func (f *frontier) Less(a, b int) bool { return f.h.Less(f.idx[a], f.idx[b]) }
func (f *frontier) Swap(a, b int)      { f.idx[a], f.idx[b] = f.idx[b], f.idx[a] }
func (f *frontier) Push(x any)         { f.idx = append(f.idx, x.(int)) }
func (f *frontier) Pop() any {
	i := f.idx[len(f.idx)-1]
	f.idx = f.idx[:len(f.idx)-1]
	return i
}

// --- state changes, shared by the primitives and the replay at Open --------------

// addRun inserts e, whose head is the size of its run record.
func (j *journal) addRun(e *jrun) {
	j.runs[e.run.ID] = e
	j.indexRun(e)
	if k := e.run.DedupeKey; k != "" {
		j.dedupe[k] = e
	}
	j.liveRecs++
	j.liveBytes += e.head
	e.idx = -1
	if e.run.Status.Finished() {
		if !j.replaying {
			j.done = append(j.done, e)
		}
		return
	}
	e.due = dueAt(&e.run)
	heap.Push(&j.due, e)
}

// indexRun puts e in byID. Runs made by oke come in ID order (their IDs
// begin with the time), so this is mostly an append. While the log is
// replayed at Open, runs are appended as they come, and sorted once at the
// end.
func (j *journal) indexRun(e *jrun) {
	n := len(j.byID)
	if j.replaying || n == 0 || j.byID[n-1].run.ID < e.run.ID {
		j.byID = append(j.byID, e)
		return
	}
	i := sort.Search(n, func(k int) bool { return j.byID[k].run.ID > e.run.ID })
	j.byID = slices.Insert(j.byID, i, e)
}

// tidyIndex drops removed runs from byID.
func (j *journal) tidyIndex() {
	j.byID = slices.DeleteFunc(j.byID, func(e *jrun) bool { return e.gone })
	j.gone = 0
}

// moved re-sorts e in the due heap after its lease or WakeAt changed.
func (j *journal) moved(e *jrun) {
	e.due = dueAt(&e.run)
	heap.Fix(&j.due, e.idx)
}

// applyFinish ends or parks e (FinishRun); size is the finish record's.
func (j *journal) applyFinish(e *jrun, status driver.RunStatus, wake time.Time, result *driver.Response, msg string, at time.Time, seq uint64, size int) {
	r := &e.run
	r.Status, r.Owner, r.LeaseUntil, r.WakeAt = status, "", time.Time{}, wake
	r.Result, r.Error, r.UpdatedAt = result, msg, at
	j.liveBytes += int64(size) - e.fin
	e.fin = int64(size)
	if seq > 0 {
		e.durable = seq
	}
	if !status.Finished() {
		j.moved(e)
		return
	}
	heap.Remove(&j.due, e.idx)
	if !j.replaying {
		j.done = append(j.done, e)
	}
}

// applyResume makes dead e due at wake (ResumeRun); size is the resume
// record's, which a compaction folds into the run's record.
func (j *journal) applyResume(e *jrun, wake, at time.Time, seq uint64, size int) {
	r := &e.run
	r.Status, r.Owner, r.LeaseUntil, r.WakeAt = driver.RunRunning, "", time.Time{}, wake
	r.Strikes, r.NextAttempts, r.UpdatedAt, e.starts = 0, 0, at, nil
	j.liveBytes += int64(size) - e.fin
	e.fin = int64(size)
	if seq > 0 {
		e.durable = seq
	}
	j.moved(e)
}

func (j *journal) addStep(e *jrun, s driver.Step, at time.Time, seq uint64, size int) {
	e.steps = append(e.steps, s)
	if !at.IsZero() {
		// A SaveStep. (A step record without at is compaction's: the run
		// record before it already holds the run's state.)
		e.run.UpdatedAt = at
		e.run.NextAttempts = 1
	}
	if e.starts != nil { // an older oke's log: its count of the step after this one
		delete(e.starts, s.Seq)
		if n, ok := e.starts[s.Seq+1]; ok {
			e.run.NextAttempts = n.Attempts
			delete(e.starts, s.Seq+1)
		}
	}
	j.liveRecs++
	j.liveBytes += int64(size)
	e.stepBytes += int64(size)
	if seq > 0 {
		e.durable = seq
	}
}

func (j *journal) addClaim(e *jrun, key string, seq uint64, size int) {
	j.claims[key] = &jclaim{id: e.run.ID, seq: seq}
	e.claims = append(e.claims, key)
	j.liveRecs++
	j.liveBytes += int64(size)
	e.claimBytes += int64(size)
}

// removeRun forgets e, its steps, its dedupe key and its claims (retention).
func (j *journal) removeRun(e *jrun) {
	delete(j.runs, e.run.ID)
	e.gone = true
	j.gone++
	if j.gone > 1024 && j.gone > len(j.byID)/2 {
		j.tidyIndex()
	}
	if k := e.run.DedupeKey; k != "" && j.dedupe[k] == e {
		delete(j.dedupe, k)
	}
	for _, k := range e.claims {
		delete(j.claims, k)
	}
	if e.idx >= 0 {
		heap.Remove(&j.due, e.idx)
	}
	j.liveRecs -= 1 + len(e.steps) + len(e.claims) + len(e.signals)
	j.liveBytes -= e.liveBytes()
}

// --- open, write, maintain, close ----------------------------------------------

// open replays dir/journal.json, checking it against the checkpoint and
// repairing a torn tail, and (unless read-only) applies the retention and
// compaction rules once.
func (j *journal) open(dir string, ck *checkpoint, cfg config, ro bool) error {
	j.cfg = cfg
	j.initLog(dir, journalName, 1, ck, &cfg)
	j.ro = ro
	j.format = journalFormatLine
	j.rebuild = j.compactLocked
	j.runs = make(map[string]*jrun)
	j.dedupe = make(map[string]*jrun)
	j.claims = make(map[string]*jclaim)
	j.replaying = true
	j.liveRecs, j.liveBytes = 1, int64(len(journalFormatLine(newGen(), newGen())))
	if err := j.load(j.replayRecord); err != nil {
		return err
	}
	j.replaying = false
	j.tidyIndex()
	slices.SortFunc(j.byID, func(a, b *jrun) int { return strings.Compare(a.run.ID, b.run.ID) })
	for _, e := range j.runs {
		e.starts = nil // an older oke's counts of steps that never became next
		if e.run.Status.Finished() {
			j.done = append(j.done, e)
		}
	}
	slices.SortFunc(j.done, func(a, b *jrun) int {
		return cmp.Or(a.run.UpdatedAt.Compare(b.run.UpdatedAt), cmp.Compare(a.run.ID, b.run.ID))
	})
	return nil
}

// usable reports why the journal cannot serve a call, if it cannot: only
// when it is closed or ctx is done. A journal whose write or fsync failed
// tries to heal here (see logFile.heal); if it cannot yet, calls that write
// fail, and calls that show what is durable go on. mu held.
func (j *journal) usable(ctx context.Context) error {
	if j.closed {
		return driver.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.fault.Load() != nil {
		_ = j.heal(false)
	}
	return nil
}

// write appends recs in one write and returns its sequence number and the
// size of the first record's line. mu held. On error nothing was appended.
func (j *journal) write(recs ...*jrecord) (seq uint64, size int, err error) {
	buf, chain := j.buf[:0], j.last
	for i, r := range recs {
		n := len(buf)
		if buf, err = appendJRecord(buf, r, &chain); err != nil {
			return 0, 0, err
		}
		if i == 0 {
			size = len(buf) - n
		}
	}
	seq, err = j.appendLines(buf, len(recs), j.last, chain)
	return seq, size, err
}

// maintain drops runs past the retention and compacts the log when dead
// records dominate. mu held. Both are best effort: a failure leaves the log
// as it was, to be tried again later.
func (j *journal) maintain() {
	j.expire()
	live := j.liveRecs
	dead := j.records - live
	deadBytes := j.size - j.liveBytes
	if dead < j.cfg.compactMin || deadBytes <= 2*j.liveBytes || j.records < j.retryAt {
		return
	}
	if err := j.compactLocked(); err != nil {
		j.retryAt = j.records + j.cfg.compactMin
	}
}

// maxDrops bounds the drop records one write carries.
const maxDrops = 1024

// expire drops finished runs whose last update is older than the retention
// (oldest first, a batch per write). mu held.
func (j *journal) expire() {
	if j.cfg.retention <= 0 || j.doneHead == len(j.done) {
		return
	}
	cutoff := now().Add(-j.cfg.retention)
	var recs []*jrecord
	for i := j.doneHead; i < len(j.done) && len(recs) < maxDrops; i++ {
		if j.done[i].run.UpdatedAt.After(cutoff) {
			break
		}
		recs = append(recs, &jrecord{Op: jopDrop, ID: j.done[i].run.ID})
	}
	if len(recs) == 0 {
		return
	}
	if _, _, err := j.write(recs...); err != nil {
		return // a dropped run that comes back is harmless; try again later
	}
	for range recs {
		j.removeRun(j.done[j.doneHead])
		j.done[j.doneHead] = nil
		j.doneHead++
	}
	if j.doneHead > len(j.done)/2 {
		j.done = slices.Delete(j.done, 0, j.doneHead)
		j.doneHead = 0
	}
}

// compactLocked writes every run (one run record each, then its steps) and
// every claim to a new log and swaps it in (see logFile.rewrite). mu held.
func (j *journal) compactLocked() error {
	ids := make([]string, 0, len(j.runs))
	for id := range j.runs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var (
		buf              []byte
		liveRecs         int
		liveBytes        int64
		heads, stepBytes = make([]int64, len(ids)), make([]int64, len(ids))
		claimBytes       = make([]int64, len(ids))
		signalBytes      = make([]int64, len(ids))
	)
	err := j.rewrite(func(format []byte, chain *uint32, add func(line []byte) error) error {
		put := func(rec *jrecord) (int64, error) {
			var err error
			if buf, err = appendJRecord(buf[:0], rec, chain); err != nil {
				return 0, err
			}
			liveRecs++
			liveBytes += int64(len(buf))
			return int64(len(buf)), add(buf)
		}
		liveRecs, liveBytes = 1, int64(len(format))
		if err := add(format); err != nil {
			return err
		}
		for i, id := range ids {
			e := j.runs[id]
			var err error
			if heads[i], err = put(runRecord(e)); err != nil {
				return err
			}
			for k := range e.steps {
				n, err := put(stepRecord(id, &e.steps[k], time.Time{}))
				if err != nil {
					return err
				}
				stepBytes[i] += n
			}
			for _, key := range e.claims {
				n, err := put(&jrecord{Op: jopClaim, Key: key, ID: id})
				if err != nil {
					return err
				}
				claimBytes[i] += n
			}
			for k := range e.signals {
				n, err := put(signalRecord(id, &e.signals[k], time.Time{}))
				if err != nil {
					return err
				}
				signalBytes[i] += n
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, id := range ids {
		e := j.runs[id]
		e.head, e.fin, e.stepBytes, e.claimBytes = heads[i], 0, stepBytes[i], claimBytes[i]
		e.signalBytes = signalBytes[i]
	}
	j.liveRecs, j.liveBytes = liveRecs, liveBytes
	return nil
}

// close fsyncs and closes journal.json. Closing twice is a no-op.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if j.f == nil {
		return nil
	}
	err := j.closeLog()
	j.runs, j.byID, j.dedupe, j.claims, j.due, j.done = nil, nil, nil, nil, nil, nil
	return err
}

// --- copies and checks -------------------------------------------------------------

func copyResponse(p *driver.Response) *driver.Response {
	if p == nil {
		return nil
	}
	c := *p
	c.Body = slices.Clone(p.Body)
	return &c
}

// copyRun returns a copy of r that shares no memory with it.
func copyRun(r *driver.Run) driver.Run {
	c := *r
	c.Input = slices.Clone(r.Input)
	if r.IdemKey != nil {
		k := *r.IdemKey
		c.IdemKey = &k
	}
	c.Result = copyResponse(r.Result)
	return c
}

func copySteps(steps []driver.Step) []driver.Step {
	out := make([]driver.Step, len(steps))
	for i, s := range steps {
		out[i] = s
		out[i].Result = slices.Clone(s.Result)
		out[i].Failure = slices.Clone(s.Failure)
	}
	return out
}

// checkUTF8 refuses strings that JSON would store as U+FFFD: after a restart
// they would name another run, step, owner or key.
func checkUTF8(op string, fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if !utf8.ValidString(fields[i+1]) {
			return fmt.Errorf("oke file driver: %s: %s %+q is not valid UTF-8 and cannot be stored", op, fields[i], fields[i+1])
		}
	}
	return nil
}

// storedResponse is a copy of p as it reads back from the log: strings that
// are not UTF-8 get U+FFFD in place of their bad bytes.
func storedResponse(p *driver.Response) *driver.Response {
	c := copyResponse(p)
	if c != nil {
		c.ContentType = strings.ToValidUTF8(c.ContentType, "\uFFFD")
		c.Location = strings.ToValidUTF8(c.Location, "\uFFFD")
	}
	return c
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// held returns run id held by owner. mu held.
func (j *journal) held(id, owner string) (*jrun, error) {
	e := j.runs[id]
	if e == nil || owner == "" || e.run.Owner != owner {
		return nil, driver.ErrNotOwner
	}
	return e, nil
}

// --- driver.Journal ------------------------------------------------------------------

// CreateRun implements driver.Journal. It returns once the run is fsynced.
func (d *Driver) CreateRun(ctx context.Context, run driver.Run, lease time.Duration) (driver.Run, error) {
	if d.ro {
		return driver.Run{}, readOnlyError("create run", d.dir)
	}
	if run.ID == "" {
		return driver.Run{}, errNoRunID
	}
	fields := []string{"ID", run.ID, "flow", run.Flow, "tenant", run.Tenant, "principal", run.Principal,
		"owner", run.Owner, "replayOf", run.ReplayOf, "parent", run.Parent, "event", run.Event,
		"dedupe key", run.DedupeKey}
	if k := run.IdemKey; k != nil {
		fields = append(fields, "idempotency key", k.Tenant+k.Principal+k.Flow+k.Key)
	}
	if err := checkUTF8("create run", fields...); err != nil {
		return driver.Run{}, err
	}
	switch run.Status {
	case 0:
		run.Status = driver.RunRunning
	case driver.RunRunning, driver.RunSleeping:
	default:
		return driver.Run{}, fmt.Errorf("oke file driver: create run %q: status %v; a run starts running or sleeping", run.ID, run.Status)
	}
	if run.Status == driver.RunSleeping && run.Owner != "" {
		return driver.Run{}, fmt.Errorf("oke file driver: create run %q: a sleeping run has no owner", run.ID)
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return driver.Run{}, err
	}
	if run.DedupeKey != "" {
		if o := j.dedupe[run.DedupeKey]; o != nil {
			existing, seq := copyRun(&o.run), o.durable
			j.mu.Unlock()
			if err := j.waitDurable(seq); err != nil {
				return driver.Run{}, err
			}
			return existing, driver.ErrDuplicate
		}
	}
	if _, ok := j.runs[run.ID]; ok {
		j.mu.Unlock()
		return driver.Run{}, fmt.Errorf("oke file driver: create run: a run with ID %q exists", run.ID)
	}
	t := now()
	r := copyRun(&run)
	r.CreatedAt, r.UpdatedAt = t, t
	r.WakeAt = utc(r.WakeAt)
	r.Result, r.Error, r.LeaseUntil, r.Attempts, r.NextAttempts = nil, "", time.Time{}, 0, 0
	if r.Owner != "" {
		r.LeaseUntil = t.Add(lease)
		r.Attempts, r.NextAttempts = 1, 1
	}
	e := &jrun{run: r}
	seq, size, err := j.write(runRecord(e))
	if err != nil {
		j.mu.Unlock()
		return driver.Run{}, err
	}
	e.head, e.durable = int64(size), seq
	j.addRun(e)
	out := copyRun(&e.run)
	j.maintain()
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return driver.Run{}, err
	}
	return out, nil
}

// GetRun implements driver.Journal.
func (d *Driver) GetRun(ctx context.Context, id string) (driver.Run, []driver.Step, error) {
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return driver.Run{}, nil, err
	}
	e := j.runs[id]
	if e == nil {
		j.mu.Unlock()
		return driver.Run{}, nil, driver.ErrNotFound
	}
	run, steps, seq := copyRun(&e.run), copySteps(e.steps), e.durable
	j.mu.Unlock()
	// Show only what is durable.
	if err := j.waitDurable(seq); err != nil {
		return driver.Run{}, nil, err
	}
	return run, steps, nil
}

// ListRuns implements driver.Journal. A limit < 1 lists every match. It
// walks the runs in ID order (journal.byID) from the cursor, so a page
// costs what it visits: its runs, and the runs the filters skip on the way,
// whatever the number of runs before the cursor.
func (d *Driver) ListRuns(ctx context.Context, f driver.RunFilter, limit int) ([]driver.Run, error) {
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return nil, err
	}
	var out []driver.Run
	var seq uint64
	visit := func(e *jrun) bool {
		if e.gone || !f.Match(&e.run) {
			return true
		}
		r := copyRun(&e.run)
		r.Steps = len(e.steps)
		out = append(out, r)
		seq = max(seq, e.durable)
		return limit < 1 || len(out) < limit
	}
	ids := j.byID
	if f.Desc {
		i := len(ids)
		if f.Before != "" {
			i = sort.Search(len(ids), func(k int) bool { return ids[k].run.ID >= f.Before })
		}
		for i--; i >= 0 && (f.After == "" || ids[i].run.ID > f.After); i-- {
			if !visit(ids[i]) {
				break
			}
		}
	} else {
		i := 0
		if f.After != "" {
			i = sort.Search(len(ids), func(k int) bool { return ids[k].run.ID > f.After })
		}
		for ; i < len(ids) && (f.Before == "" || ids[i].run.ID < f.Before); i++ {
			if !visit(ids[i]) {
				break
			}
		}
	}
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return nil, err
	}
	return out, nil
}

// AcquireRun implements driver.Journal. Its record is written, not fsynced
// (see the package doc).
func (d *Driver) AcquireRun(ctx context.Context, id, owner string, lease time.Duration) (driver.Run, []driver.Step, error) {
	if d.ro {
		return driver.Run{}, nil, readOnlyError("acquire run", d.dir)
	}
	if owner == "" {
		return driver.Run{}, nil, fmt.Errorf("oke file driver: acquire run %q: empty owner", id)
	}
	if err := checkUTF8("acquire run", "owner", owner); err != nil {
		return driver.Run{}, nil, err
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return driver.Run{}, nil, err
	}
	e := j.runs[id]
	if e == nil {
		j.mu.Unlock()
		return driver.Run{}, nil, driver.ErrNotFound
	}
	t := now()
	if e.run.Status.Finished() || nanos(t) < e.due {
		j.mu.Unlock()
		return driver.Run{}, nil, driver.ErrNotDue
	}
	r := e.run
	if r.Status == driver.RunSleeping {
		r.NextAttempts = max(r.NextAttempts, 1)
	} else {
		r.NextAttempts++
	}
	if r.Owner != "" {
		r.Strikes++ // its holder's lease lapsed
	}
	r.Status, r.Owner, r.LeaseUntil, r.UpdatedAt = driver.RunRunning, owner, t.Add(lease), t
	r.Attempts++
	if _, _, err := j.write(leaseRecord(&r)); err != nil {
		j.mu.Unlock()
		return driver.Run{}, nil, err
	}
	e.run = r
	j.moved(e)
	run, steps, seq := copyRun(&e.run), copySteps(e.steps), e.durable
	j.maintain()
	j.mu.Unlock()
	// The steps handed over must be durable: the new owner skips them.
	if err := j.waitDurable(seq); err != nil {
		return driver.Run{}, nil, err
	}
	return run, steps, nil
}

// RenewRun implements driver.Journal. Its record is written, not fsynced.
func (d *Driver) RenewRun(ctx context.Context, id, owner string, lease time.Duration) error {
	if d.ro {
		return readOnlyError("renew run", d.dir)
	}
	j := &d.jr
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(ctx); err != nil {
		return err
	}
	e, err := j.held(id, owner)
	if err != nil {
		return err
	}
	r := e.run
	r.LeaseUntil = now().Add(lease)
	if _, _, err := j.write(leaseRecord(&r)); err != nil {
		return err
	}
	e.run.LeaseUntil = r.LeaseUntil
	j.moved(e)
	j.maintain()
	return nil
}

// SaveStep implements driver.Journal. It appends one record, whatever the
// number of steps, and returns once it is fsynced.
func (d *Driver) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	if d.ro {
		return readOnlyError("save step", d.dir)
	}
	if err := checkUTF8("save step", "name", step.Name); err != nil {
		return err
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return err
	}
	e, err := j.held(id, owner)
	if err != nil {
		j.mu.Unlock()
		return err
	}
	if step.Seq != len(e.steps)+1 {
		j.mu.Unlock()
		return fmt.Errorf("oke file driver: save step %d of run %q after step %d: %w", step.Seq, id, len(e.steps), driver.ErrStepOrder)
	}
	s := step
	s.Result, s.Failure = slices.Clone(step.Result), slices.Clone(step.Failure)
	s.StartedAt, s.FinishedAt = utc(s.StartedAt), utc(s.FinishedAt)
	t := now()
	seq, size, err := j.write(stepRecord(id, &s, t))
	if err != nil {
		j.mu.Unlock()
		return err
	}
	j.addStep(e, s, t, seq, size)
	j.maintain()
	j.mu.Unlock()
	return j.waitDurable(seq)
}

// FinishRun implements driver.Journal. It returns once it is fsynced.
func (d *Driver) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	if d.ro {
		return readOnlyError("finish run", d.dir)
	}
	switch f.Status {
	case driver.RunCompleted, driver.RunFailed, driver.RunSleeping, driver.RunRunning, driver.RunDead:
	default:
		return fmt.Errorf("oke file driver: finish run %q: unknown status %v", id, f.Status)
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return err
	}
	e, err := j.held(id, owner)
	if err != nil {
		j.mu.Unlock()
		return err
	}
	r := e.run
	r.Status, r.WakeAt, r.UpdatedAt = f.Status, utc(f.WakeAt), now()
	r.Result, r.Error = storedResponse(f.Result), strings.ToValidUTF8(f.Error, "\uFFFD")
	r.Strikes = f.Strikes
	seq, size, err := j.write(finishRecord(&r, f.NextAttempts))
	if err != nil {
		j.mu.Unlock()
		return err
	}
	e.run.Strikes = f.Strikes
	if f.NextAttempts > 0 {
		e.run.NextAttempts = f.NextAttempts
	}
	j.applyFinish(e, r.Status, r.WakeAt, r.Result, r.Error, r.UpdatedAt, seq, size)
	j.maintain()
	j.mu.Unlock()
	return j.waitDurable(seq)
}

// DueRuns implements driver.Journal: it reads the first runs of a heap kept
// by due time, so its cost grows with limit, not with the number of runs. A
// limit < 1 lists every due run.
func (d *Driver) DueRuns(ctx context.Context, flows []string, limit int) ([]string, error) {
	j := &d.jr
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(ctx); err != nil {
		return nil, err
	}
	return j.due.firstDue(nanos(now()), flows, limit), nil
}

// ClaimKey implements driver.Journal. A win returns once it is fsynced; a
// loss or a repeat waits until the winner's claim is. runID must be a run in
// the journal (ErrNotFound otherwise), so that retention can drop a run's
// claims with it.
func (d *Driver) ClaimKey(ctx context.Context, key, runID string) (string, error) {
	if d.ro {
		return "", readOnlyError("claim key", d.dir)
	}
	if err := checkUTF8("claim key", "key", key, "run ID", runID); err != nil {
		return "", err
	}
	j := &d.jr
	j.mu.Lock()
	if err := j.usable(ctx); err != nil {
		j.mu.Unlock()
		return "", err
	}
	if c := j.claims[key]; c != nil {
		holder, seq := c.id, c.seq
		j.mu.Unlock()
		if err := j.waitDurable(seq); err != nil {
			return "", err
		}
		return holder, nil
	}
	e := j.runs[runID]
	if e == nil {
		j.mu.Unlock()
		return "", fmt.Errorf("oke file driver: claim %q for run %q: %w", key, runID, driver.ErrNotFound)
	}
	seq, size, err := j.write(&jrecord{Op: jopClaim, Key: key, ID: runID})
	if err != nil {
		j.mu.Unlock()
		return "", err
	}
	j.addClaim(e, key, seq, size)
	j.maintain()
	j.mu.Unlock()
	if err := j.waitDurable(seq); err != nil {
		return "", err
	}
	return runID, nil
}
