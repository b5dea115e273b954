// Package file is oke's embedded default driver: idempotency rows and the
// journal of durable runs kept in one folder on local disk (by default .oke/
// beside the app), with no server to run. It implements driver.Driver and
// driver.Journal. It is for one process at a time; several app instances
// sharing one store need the Postgres driver.
//
//	d, err := file.Open(".oke")
//	if err != nil {
//		log.Fatal(err) // e.g. file.ErrLocked: another process uses .oke
//	}
//	defer d.Close()
//
// # Layout
//
// The folder holds
//
//	LOCK               flock'ed while a driver has the folder open
//	idempotency.json   the rows, as an append-only log (below)
//	journal.json       the runs, their saved steps and claimed keys, the same way
//
// Both logs share one lock and one machinery: the line format, the crash-safe
// append, the replay at Open, group commit and compaction (logfile.go). Each
// has its own mutex and its own group commit, so claims and steps do not wait
// on each other. idempotency.json.compact or journal.json.compact may appear
// for a moment while a log is compacted; a leftover one is deleted on Open.
//
// # Format
//
// idempotency.json is newline-delimited JSON: one record per line, each line a
// JSON object holding a CRC-32C (Castagnoli) of its payload and the payload:
//
//	{"crc":"1c2d3e4f","rec":{"op":"format","v":1}}
//	{"crc":"8a9b0c1d","rec":{"op":"put","key":{"tenant":"acme","principal":"user:42","flow":"payments.charge","key":"..."},"fp":"...","state":"running","owner":"...","leaseUntil":"2026-01-02T03:04:35Z",...}}
//	{"crc":"...","rec":{"op":"put",...,"state":"completed","response":{"status":201,"contentType":"application/json","location":"/charges/ch_1","body":"eyJpZCI6ImNoXzEifQ=="}}}
//	{"crc":"...","rec":{"op":"del","key":{...}}}
//
// The checksum covers the exact bytes between `"rec":` and the final `}`;
// the line is always written as the 8 hex digits first, so a reader checks it
// without re-encoding. Ops:
//
//	format  first record of every file; v is the format version (1)
//	put     the whole row as it now is (claim, takeover, renew, complete)
//	del     the row is gone (release, sweep)
//
// Open replays the log into an in-memory map (the last put of a key wins; a
// del removes it), and every primitive works on that map and appends one
// record (Sweep appends one write of several). Claim therefore costs one map
// lookup and one write(2), however many rows are stored: the file is never
// rewritten per operation. Body bytes are base64, as encoding/json does for
// []byte; times are RFC 3339 in UTC. JSON strings are UTF-8, so Claim
// refuses a key that is not valid UTF-8 (other strings, such as a Location,
// would have invalid bytes replaced by U+FFFD). Records are written and read by a small
// hand-written codec (codec.go) for speed; encoding/json is the reference it
// is fuzzed against, and reads anything the fast path does not recognise, so
// a line edited by hand still loads if it is valid JSON with a matching CRC.
//
// journal.json has the same frame (a CRC-32C, then the payload) around
// journal records:
//
//	{"crc":"...","rec":{"op":"format","v":1}}
//	{"crc":"...","rec":{"op":"run","id":"run_1","flow":"payments.refund","input":"eyJjaGFyZ2VJZCI6ImNoXzEifQ==","status":"running","owner":"...","leaseUntil":"...","attempts":1,"next":1,...}}
//	{"crc":"...","rec":{"op":"step","id":"run_1","seq":1,"name":"refund id","out":"IjliMmYuLi4i","attempts":1,"startedAt":"...","finishedAt":"...","at":"..."}}
//	{"crc":"...","rec":{"op":"lease","id":"run_1","owner":"...","leaseUntil":"...","attempts":2,"next":2,"at":"..."}}
//	{"crc":"...","rec":{"op":"claim","id":"run_1","key":"order:42"}}
//	{"crc":"...","rec":{"op":"finish","id":"run_1","status":"completed","result":{"status":201,...},"at":"..."}}
//	{"crc":"...","rec":{"op":"drop","id":"run_0"}}
//
// run is a run's whole state (CreateRun, and compaction); lease is AcquireRun
// and RenewRun, with the run's NextAttempts as next; step is one SaveStep
// (which sets NextAttempts to 1, so it carries no count; a step record
// without at is compaction's, after the run record that holds the run's
// state); finish is FinishRun (the owner is cleared); claim is ClaimKey; drop
// is the retention forgetting a finished run. No record is written when a
// step begins: the steps of one execution after its first cost one step
// record each and nothing else. Logs written by an older oke also hold start
// records (its StartStep: how many attempts a step had begun) and run records
// with "starts"; Open reads the count of a run's next step from them as its
// NextAttempts, until a lease record with next supersedes it, and compaction
// writes them no more. Open replays the records into memory, where a
// run keeps its steps in order and every unfinished run sits in a heap by the
// time it is due. So SaveStep appends one record whatever the number of steps
// or runs, AcquireRun and RenewRun move one run in the heap (O(log n)), and
// DueRuns reads only the runs it returns. Inputs and saved results are bytes
// (base64 in the file), returned exactly as given, whitespace included. The
// journal refuses IDs, owners, step names, dedupe and business keys that are
// not valid UTF-8 (JSON would change them); a run's Error is stored with
// U+FFFD in place of bad bytes. Journal records are written and read with
// encoding/json (the rows' hand-written codec is not needed for them: a step
// costs an fsync, not an encode).
//
// # Crash safety
//
// Both logs are crash safe the same way. A record is written with a single
// write(2) at the end of its log. A crash (SIGKILL, panic, power loss) can
// therefore only leave a torn record at the tail: a last line without its
// newline, with a bad checksum, or zero bytes after an OS crash. Open ignores
// such a tail and truncates it (then fsyncs), so the next record starts on a
// clean line. A damaged line followed by valid records is not a torn tail:
// Open refuses the file with a *CorruptError naming the file and line, rather
// than silently drop the good records after it. So is an intact journal
// record that breaks a rule of the ones before it (a step out of order, a
// record for a run that does not exist).
// A failed write is truncated away at once, so an I/O error does not leave a
// torn record in the middle either.
//
// # Durability
//
// Complete returns only after its record is fsynced: a stored response counts
// as stored only then. Concurrent Completes share fsyncs (group commit): the
// first waiter becomes the leader and fsyncs everything written so far while
// the others wait; when it finishes, a waiter whose record came after the
// leader's fsync started leads the next one. No goroutine runs in the
// background. Under load one fsync covers many Completes (see bench_test.go).
//
// Claim, Renew and Release are written (the record is in the OS page cache, so
// it survives the process being killed) but not fsynced, which saves an fsync
// per request. What an OS crash or power loss can lose is therefore only
// state owned by processes that died in that crash: a lost claim or renewal
// is the same as a lease that lapsed, and the next request with the key runs
// the flow again (at-least-once, exactly as after any crash mid-flow). Two
// exceptions are fsynced like Complete:
//
//   - a Claim that links a journal run (ClaimRequest.RunID set), because that
//     link is what lets a retry resume the durable run instead of starting a
//     new one;
//   - any call that returns a Completed row (a replay through Claim, Get or
//     List) waits until that row's record is durable, so a client is never
//     shown a response the store could still lose.
//
// A lost Release brings the Running row back after an OS crash; it blocks the
// key until its lease lapses (same request) or its TTL passes (a different
// one). A lost Sweep brings expired rows back until the next sweep.
//
// The journal follows the same rule: what a caller may build on is fsynced
// before the call returns, and bookkeeping that a crash may lose is only
// written. CreateRun, SaveStep, FinishRun and a winning ClaimKey return only
// once their record is fsynced, through the journal's own group commit: one
// fsync per step for one run alone, and fewer than one per step when
// concurrent runs save steps together (see journal_bench_test.go). A step
// therefore costs one durable append. Calls that show a run (GetRun,
// ListRuns, AcquireRun, a losing ClaimKey, CreateRun's ErrDuplicate) first
// wait until what they show is durable, so a new owner never builds on a step
// an OS crash could still take back.
//
// AcquireRun and RenewRun are written but not fsynced. After an OS crash (not
// a process crash: the page cache survives that), a lost AcquireRun or
// RenewRun is a lease that lapsed sooner, so the run is taken over again; all
// its holders died in the crash anyway. A lost AcquireRun also takes back its
// count in NextAttempts, so the next step's attempts (Step.Attempts, and what
// the engine does with it) can come out one lower than the executions that
// really began it. SaveStep's reset of the count to 1 is fsynced with the
// step. Retention's drop
// records are not fsynced either: a lost drop brings an old finished run back
// until the next one.
//
// If an fsync fails the driver stops: every later call fails with
// driver.ErrUnavailable (fail closed), because after a failed fsync the kernel
// may have dropped the unwritten pages and nothing written since can be
// trusted. This holds across both logs: a failed fsync of either stops rows
// and runs. Reopen the folder (restart the process) to continue from what is
// on disk.
//
// # Lock
//
// Open takes an exclusive flock on dir/LOCK (LOCK_EX|LOCK_NB) and holds it
// until Close. A second process, or a second Open in the same process, gets
// an error that is ErrLocked (a *LockedError naming the folder). The kernel
// drops the lock when the process dies, however it dies, so there is no stale
// lock to clean up. Open retries a busy lock for half a second before it gives
// up: a child process being started (between fork and exec) briefly holds a
// copy of the lock of a Driver that was just closed. The LOCK file is never deleted (deleting it would let two
// processes each lock a different inode). On systems without flock (Windows,
// Plan 9, Solaris, ...) the lock only excludes a second Open in the same
// process.
//
// # Compaction
//
// Renewals, completions, takeovers, releases and sweeps leave dead records
// behind. When dead records outnumber live rows by more than 2 to 1 and there
// are at least 10 000 of them (WithCompactAfter changes the minimum), the
// next write compacts: it writes every live row to idempotency.json.compact,
// fsyncs it, renames it over idempotency.json and fsyncs the folder. A crash
// at any point leaves either the old log or the new one, both complete. Each
// compaction rewrites the live rows once after at least twice as many other
// writes, so its cost per write is constant (amortized); Open compacts too
// when the threshold is met. Compact does it on demand.
//
// journal.json is compacted the same way when its dead records dominate:
// at least the same minimum of them, and more dead bytes than twice the bytes
// a compaction would keep (bytes, not records, because a saved step can be
// large and a renewal is small). Finished runs are kept (the console and the
// CLI show them): compaction writes each run as one run record holding its
// final state, followed by its steps, and then the claims. Leases, renewals,
// attempt counts and finish records collapse into the run record. A long
// runner that renews its lease every few seconds thus costs only until the
// next compaction.
//
// # Retention
//
// By default every finished run is kept forever. WithRetention(d) forgets
// finished runs (completed or failed) d after they finished: the journal's
// next write drops them (a batch at a time, in the order they finished), and
// Open drops those already past it. A dropped run takes its steps, its
// DedupeKey and the business keys it claimed with it, so a duplicate event
// or a second claim that arrives after the retention starts over; pick a
// retention longer than duplicates can arrive late. Running and sleeping runs
// are never dropped.
//
// # What is weak
//
//   - One process. The lock makes a second one fail fast; it does not let two
//     share the folder.
//   - Every row and every run (with its steps) lives in memory, and Open
//     reads both logs whole: about 3µs per row record, 5µs per journal record
//     (encoding/json: a compacted journal of 20 000 runs of 4 steps, 100 000
//     records, opens in about 0.5s on a small cloud VM; see the benchmarks).
//     Without WithRetention the journal only grows.
//   - Compaction runs inline, holding the log's lock: writes to that log
//     pause while what is live is rewritten and fsynced (about 1.7µs per live
//     row: a pause of ~170ms at 100 000 rows; about 3µs per kept journal
//     record: ~300ms for 20 000 runs of 4 steps). Amortized over the writes
//     between two compactions it is under a few µs per write.
//   - List and ListRuns sort every match on each call: fine for a console,
//     not for a hot path.
//   - ClaimKey needs the run to exist in the journal (ErrNotFound otherwise),
//     so that retention can drop a run's claims with it.
//   - Times come from the wall clock (time.Now in UTC, as stored in the file),
//     so a clock step moves leases and TTLs with it.
//   - A damaged middle of the file needs a person: restore it or move it
//     aside. Open never guesses.
package file
