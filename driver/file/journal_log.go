package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/okengine/oke/driver"
)

// journal.json records. Each line has the same frame as idempotency.json (a
// CRC-32C and the payload, see log.go); the payload is one jrecord. Ops:
//
//	format  first record; v is the format version (2: chained, see log.go;
//	        1: an older oke's, unchained)
//	run     a run's whole state: written by CreateRun, and by compaction
//	lease   AcquireRun, RenewRun: status running, owner, leaseUntil,
//	        attempts, next (the run's NextAttempts)
//	finish  FinishRun: status, wakeAt, result, error; the owner is cleared
//	step    SaveStep: one saved step (the run's NextAttempts becomes 1)
//	start   no longer written: an older oke's StartStep, a step's attempt
//	        count so far; read as the run's NextAttempts when its seq is the
//	        run's next step (a run record may also carry them, as "starts")
//	resume  ResumeRun: a dead run becomes running, unowned, due at wakeAt,
//	        with NextAttempts and strikes 0
//	claim   ClaimKey: key is held by run id
//	signal  SendSignal (and compaction): a signal sent to run id — name,
//	        key, out (its payload), seq, at (when sent); wakeAt when the
//	        send woke the sleeping run; took, the step that received it
//	        (compaction only)
//	wake    WakeForSignal: the sleeping run's wakeAt
//	        (A step record with signal is TakeSignal's: that signal of the
//	        run is delivered to the step.) An older oke refuses a log with
//	        these ops, as written by a newer one.
//	drop    retention removed a finished run, its steps and its claims
const (
	jopFormat = "format"
	jopRun    = "run"
	jopLease  = "lease"
	jopFinish = "finish"
	jopStart  = "start"
	jopStep   = "step"
	jopClaim  = "claim"
	jopDrop   = "drop"
	jopResume = "resume"
	jopSignal = "signal"
	jopWake   = "wake"
)

// jrecord is one journal record's payload. Byte fields are base64 (as
// encoding/json writes []byte), so saved inputs and results come back byte
// for byte, whitespace included; times are RFC 3339 in UTC.
type jrecord struct {
	Op         string           `json:"op"`
	V          int              `json:"v,omitzero"`
	Gen        string           `json:"gen,omitempty"`  // format: the file's generation (see checkpoint.go)
	Prev       string           `json:"prev,omitempty"` // format: the generation it was compacted from
	ID         string           `json:"id,omitempty"`
	Flow       string           `json:"flow,omitempty"`
	Input      []byte           `json:"input,omitempty"`
	Tenant     string           `json:"tenant,omitempty"`
	Principal  string           `json:"principal,omitempty"`
	Status     string           `json:"status,omitempty"`
	Owner      string           `json:"owner,omitempty"`
	LeaseUntil time.Time        `json:"leaseUntil,omitzero"`
	WakeAt     time.Time        `json:"wakeAt,omitzero"`
	Attempts   int              `json:"attempts,omitzero"`
	Next       int              `json:"next,omitzero"`    // a run's NextAttempts
	Strikes    int              `json:"strikes,omitzero"` // a run's Strikes (lease, finish, run)
	ReplayOf   string           `json:"replayOf,omitempty"`
	Parent     string           `json:"parent,omitempty"`
	Event      string           `json:"event,omitempty"`
	DedupeKey  string           `json:"dedupeKey,omitempty"`
	IdemKey    *driver.Key      `json:"idemKey,omitempty"`
	Trace      string           `json:"trace,omitempty"` // a run's Trace (run); an older oke wrote none
	Result     *driver.Response `json:"result,omitempty"`
	Error      string           `json:"error,omitempty"`
	CreatedAt  time.Time        `json:"createdAt,omitzero"`
	At         time.Time        `json:"at,omitzero"`      // the run's UpdatedAt after this record
	Starts     []jstart         `json:"starts,omitempty"` // read only: an older oke's attempt counts
	Seq        int              `json:"seq,omitzero"`
	Name       string           `json:"name,omitempty"`
	Out        []byte           `json:"out,omitempty"`  // a step's Result
	Fail       []byte           `json:"fail,omitempty"` // a step's Failure
	StartedAt  time.Time        `json:"startedAt,omitzero"`
	FinishedAt time.Time        `json:"finishedAt,omitzero"`
	Key        string           `json:"key,omitempty"`   // a claimed business key; a signal's key
	Signal     int64            `json:"signal,omitzero"` // step: the Seq of the signal it took (TakeSignal)
	Took       int              `json:"took,omitzero"`   // signal: the step that took it
}

// jstart is the attempt count of a step that started and is not saved, as an
// older oke wrote it (start records; a run record's starts).
type jstart struct {
	Seq      int    `json:"seq"`
	Name     string `json:"name"`
	Attempts int    `json:"attempts"`
}

// jformatRecord is the first record of a journal of generation gen,
// compacted from generation prev ("" for a new log). An older oke wrote
// neither.
func jformatRecord(gen, prev string) *jrecord {
	return &jrecord{Op: jopFormat, V: formatVersion, Gen: gen, Prev: prev}
}

// journalFormatLine is the line of jformatRecord(gen, prev).
func journalFormatLine(gen, prev string) []byte {
	line, _ := appendJRecord(nil, jformatRecord(gen, prev), nil) // cannot fail: no times
	return line
}

// runRecord is the whole state of e.
func runRecord(e *jrun) *jrecord {
	r := &e.run
	rec := &jrecord{
		Op: jopRun, ID: r.ID, Flow: r.Flow, Input: r.Input, Tenant: r.Tenant, Principal: r.Principal,
		Status: r.Status.String(), Owner: r.Owner, LeaseUntil: r.LeaseUntil, WakeAt: r.WakeAt,
		Attempts: r.Attempts, Next: r.NextAttempts, ReplayOf: r.ReplayOf, Parent: r.Parent, Event: r.Event,
		DedupeKey: r.DedupeKey, IdemKey: r.IdemKey, Result: r.Result, Error: r.Error,
		CreatedAt: r.CreatedAt, At: r.UpdatedAt, Strikes: r.Strikes, Trace: r.Trace,
	}
	return rec
}

func leaseRecord(r *driver.Run) *jrecord {
	return &jrecord{Op: jopLease, ID: r.ID, Owner: r.Owner, LeaseUntil: r.LeaseUntil, Attempts: r.Attempts,
		Next: r.NextAttempts, At: r.UpdatedAt, Strikes: r.Strikes}
}

// finishRecord is a FinishRun (or CancelRun) of r; next is the NextAttempts
// the finish sets (0: unchanged).
func finishRecord(r *driver.Run, next int) *jrecord {
	return &jrecord{Op: jopFinish, ID: r.ID, Status: r.Status.String(), WakeAt: r.WakeAt,
		Result: r.Result, Error: r.Error, At: r.UpdatedAt, Strikes: r.Strikes, Next: next}
}

func resumeRecord(r *driver.Run) *jrecord {
	return &jrecord{Op: jopResume, ID: r.ID, WakeAt: r.WakeAt, At: r.UpdatedAt}
}

func stepRecord(id string, s *driver.Step, at time.Time) *jrecord {
	return &jrecord{Op: jopStep, ID: id, Seq: s.Seq, Name: s.Name, Out: s.Result, Fail: s.Failure,
		Attempts: s.Attempts, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, At: at}
}

// appendJRecord appends rec's line to dst, chained after *chain as
// appendRecord does (nil: unchained, a format record).
func appendJRecord(dst []byte, rec *jrecord, chain *uint32) ([]byte, error) {
	p, err := json.Marshal(rec)
	if err != nil {
		return dst, fmt.Errorf("oke file driver: encode journal record: %w", err)
	}
	start := len(dst)
	return endLine(append(beginLine(dst), p...), start, chain), nil
}

func parseRunStatus(s string) (driver.RunStatus, error) {
	for _, st := range []driver.RunStatus{driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed, driver.RunDead} {
		if s == st.String() {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown run status %q", s)
}

// replayRecord applies one record read at Open; size is its line's length.
// An error names what is wrong with an intact record (Open then refuses the
// file with a *CorruptError).
func (j *journal) replayRecord(payload []byte, size int) error {
	var rec jrecord
	if err := json.Unmarshal(payload, &rec); err != nil {
		return fmt.Errorf("checksum matches but the record does not decode: %v", err)
	}
	if rec.Op == jopFormat {
		if !readsVersion(rec.V) {
			return fmt.Errorf("format version %d; this oke reads versions 1 and %d (written by a newer oke?)", rec.V, formatVersion)
		}
		j.gen, j.prev, j.chained = rec.Gen, rec.Prev, rec.V >= 2
		return nil
	}
	if rec.Op == jopClaim {
		e := j.runs[rec.ID]
		if e == nil {
			return fmt.Errorf("claim of %q by run %q, which does not exist", rec.Key, rec.ID)
		}
		if _, ok := j.claims[rec.Key]; ok {
			return fmt.Errorf("key %q claimed twice", rec.Key)
		}
		j.addClaim(e, rec.Key, 0, size)
		return nil
	}
	if rec.Op == jopRun {
		if _, ok := j.runs[rec.ID]; ok || rec.ID == "" {
			return fmt.Errorf("run %q created twice (or without an ID)", rec.ID)
		}
		if o, ok := j.dedupe[rec.DedupeKey]; ok && rec.DedupeKey != "" {
			return fmt.Errorf("run %q has the dedupe key %q of run %q", rec.ID, rec.DedupeKey, o.run.ID)
		}
		status, err := parseRunStatus(rec.Status)
		if err != nil {
			return err
		}
		e := &jrun{idx: -1, head: int64(size)}
		e.run = driver.Run{
			ID: rec.ID, Flow: rec.Flow, Input: rec.Input, Tenant: rec.Tenant, Principal: rec.Principal,
			Status: status, Owner: rec.Owner, LeaseUntil: rec.LeaseUntil, WakeAt: rec.WakeAt,
			Attempts: rec.Attempts, NextAttempts: rec.Next, ReplayOf: rec.ReplayOf, Parent: rec.Parent, Event: rec.Event,
			DedupeKey: rec.DedupeKey, IdemKey: rec.IdemKey, Result: rec.Result, Error: rec.Error, Trace: rec.Trace,
			CreatedAt: rec.CreatedAt, UpdatedAt: rec.At, Strikes: rec.Strikes,
		}
		for _, s := range rec.Starts {
			e.legacyStart(s)
		}
		j.addRun(e)
		return nil
	}
	e := j.runs[rec.ID]
	if e == nil {
		return fmt.Errorf("%s record for run %q, which does not exist", rec.Op, rec.ID)
	}
	r := &e.run
	switch rec.Op {
	case jopLease:
		if r.Status.Finished() {
			return fmt.Errorf("lease of run %q, which is finished", r.ID)
		}
		r.Status, r.Owner, r.LeaseUntil, r.Attempts = driver.RunRunning, rec.Owner, rec.LeaseUntil, rec.Attempts
		r.Strikes = rec.Strikes
		if rec.Next > 0 {
			// Written by this oke: it supersedes an older oke's counts. (A
			// lease record without it, from an older oke, leaves them.)
			r.NextAttempts, e.starts = rec.Next, nil
		}
		if !rec.At.IsZero() {
			r.UpdatedAt = rec.At
		}
	case jopFinish:
		if r.Status.Finished() {
			return fmt.Errorf("finish of run %q, which is finished", r.ID)
		}
		status, err := parseRunStatus(rec.Status)
		if err != nil {
			return err
		}
		r.Strikes = rec.Strikes
		if rec.Next > 0 {
			r.NextAttempts, e.starts = rec.Next, nil
		}
		j.applyFinish(e, status, rec.WakeAt, rec.Result, rec.Error, rec.At, 0, size)
	case jopResume:
		if r.Status != driver.RunDead {
			return fmt.Errorf("resume of run %q, which is %v, not dead", r.ID, r.Status)
		}
		j.applyResume(e, rec.WakeAt, rec.At, 0, size)
	case jopStart:
		e.legacyStart(jstart{Seq: rec.Seq, Name: rec.Name, Attempts: rec.Attempts})
	case jopStep:
		if rec.Seq != len(e.steps)+1 {
			return fmt.Errorf("step %d of run %q follows step %d", rec.Seq, r.ID, len(e.steps))
		}
		s := driver.Step{Seq: rec.Seq, Name: rec.Name, Result: rec.Out, Failure: rec.Fail,
			Attempts: rec.Attempts, StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt}
		j.addStep(e, s, rec.At, 0, size)
		if rec.Signal != 0 {
			return e.deliver(rec.Signal, rec.Seq)
		}
	case jopSignal, jopWake:
		return j.replaySignal(e, &rec, size)
	case jopDrop:
		j.removeRun(e)
	default:
		return fmt.Errorf("unknown journal record op %q (written by a newer oke?)", rec.Op)
	}
	return nil
}

// errNoRunID is returned by CreateRun for a run without an ID.
var errNoRunID = errors.New("oke file driver: create run: the run has no ID")
