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
// Tools that only look (a CLI listing runs) use OpenReadOnly, which never
// writes a file (see Read-only open).
//
// # Layout
//
// The folder holds
//
//	LOCK               flock'ed while a driver has the folder open
//	idempotency.json   the rows, as an append-only log (below)
//	journal.json       the runs, their saved steps and claimed keys, the same way
//	CHECKPOINT         how much of each log was fsynced (see Damage)
//
// Both logs share one lock and one machinery: the line format, the crash-safe
// append, the replay at Open, group commit and compaction (logfile.go). Each
// has its own mutex and its own group commit, so claims and steps do not wait
// on each other. idempotency.json.compact or journal.json.compact may appear
// for a moment while a log is compacted, and CHECKPOINT.tmp while a folder
// gets its first checkpoint; a leftover one is deleted on Open.
//
// # Format
//
// idempotency.json is newline-delimited JSON: one record per line, each line a
// JSON object holding a CRC-32C (Castagnoli), the payload and, after the
// first line, the checksum of the line before it:
//
//	{"crc":"1c2d3e4f","rec":{"op":"format","v":2,"gen":"9f3c0a7e51d2b846","prev":"04be71c9a3f5d028"}}
//	{"crc":"8a9b0c1d","rec":{"op":"put","key":{"tenant":"acme","principal":"user:42","flow":"payments.charge","key":"..."},"fp":"...","state":"running","owner":"...","leaseUntil":"2026-01-02T03:04:35Z",...},"chain":"1c2d3e4f"}
//	{"crc":"5e6f7a8b","rec":{"op":"put",...,"state":"completed","response":{"status":201,"contentType":"application/json","location":"/charges/ch_1","body":"eyJpZCI6ImNoXzEifQ=="}},"chain":"8a9b0c1d"}
//	{"crc":"...","rec":{"op":"del","key":{...}},"chain":"5e6f7a8b"}
//
// The checksum covers the exact bytes between `"rec":` and the final `}`
// (the payload, and the chain field after it); the line is always written
// as the 8 hex digits first, so a reader checks it without re-encoding.
// The records are chained: each one names the checksum of the record
// written before it, and its own checksum covers that name, so a line is
// intact on its own and in its place only after the line it was written
// after. Lines reordered, removed from the middle or duplicated (a sort, a
// bad merge or copy, an edit) keep their checksums and even the file's
// size and record count, and would replay another history — the claim of
// an answered key after its completion runs the flow again; the chain is
// what tells (see Crash safety). A compacted file starts a new chain at its
// format record. Ops:
//
//	format  first record of every file, not chained; v is the format
//	        version (2: chained; 1: an older oke's, unchained), gen the
//	        file's generation and prev the one it was compacted from (see
//	        Damage; an older oke wrote neither)
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
// a line edited by hand still loads if it is valid JSON with a matching CRC
// — and the lines after it chained anew, each naming the new CRC of the one
// before: in practice a chained log is not edited by hand.
//
// A log of format version 1, written by an older oke (unchained, its frame
// otherwise the same), is read as it is; Open rewrites it once as version
// 2, chained, as a compaction does (OpenReadOnly leaves it as it is). What
// was reordered in it before that cannot be told. An older oke refuses a
// version 2 log (it names the version): to go back to one, restore a copy
// of the folder from before.
//
// journal.json has the same frame (a CRC-32C, the payload, the chain)
// around journal records (the chain fields are left out below):
//
//	{"crc":"...","rec":{"op":"format","v":2,"gen":"..."}}
//	{"crc":"...","rec":{"op":"run","id":"run_1","flow":"payments.refund","input":"eyJjaGFyZ2VJZCI6ImNoXzEifQ==","status":"running","owner":"...","leaseUntil":"...","attempts":1,"next":1,...}}
//	{"crc":"...","rec":{"op":"step","id":"run_1","seq":1,"name":"refund id","out":"IjliMmYuLi4i","attempts":1,"startedAt":"...","finishedAt":"...","at":"..."}}
//	{"crc":"...","rec":{"op":"lease","id":"run_1","owner":"...","leaseUntil":"...","attempts":2,"next":2,"at":"..."}}
//	{"crc":"...","rec":{"op":"claim","id":"run_1","key":"order:42"}}
//	{"crc":"...","rec":{"op":"finish","id":"run_1","status":"completed","result":{"status":201,...},"at":"..."}}
//	{"crc":"...","rec":{"op":"drop","id":"run_0"}}
//	{"crc":"...","rec":{"op":"signal","id":"run_1","name":"approval","key":"k1","out":"...","seq":1,"at":"...","wakeAt":"..."}}
//	{"crc":"...","rec":{"op":"wake","id":"run_1","wakeAt":"..."}}
//
// run is a run's whole state (CreateRun, and compaction); lease is AcquireRun
// and RenewRun, with the run's NextAttempts as next; step is one SaveStep
// (which sets NextAttempts to 1, so it carries no count; a step record
// without at is compaction's, after the run record that holds the run's
// state); finish is FinishRun (the owner is cleared; strikes and, for a
// release that carries it, next too); resume is ResumeRun (a dead run due
// again, its strikes and NextAttempts 0; an older oke refuses a log that
// holds one, as a record of a newer oke); claim is ClaimKey; drop
// is the retention forgetting a finished run. Lease, finish and run records
// carry the run's strikes (driver.Run.Strikes) when it has any. No record is written when a
// state); finish is FinishRun (the owner is cleared); claim is ClaimKey; drop
// is the retention forgetting a finished run. signal is SendSignal (wakeAt:
// the sleeping run it woke is due from then; compaction writes a signal
// record with took, the step that received it); the step record of
// TakeSignal carries signal, the seq of the signal the step took, so the
// take and the step are one record; wake is WakeForSignal. An older oke
// refuses a log with signal or wake records (an unknown op), as written by
// a newer one. No record is written when a
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
// clean line — but only past what CHECKPOINT says was fsynced (see Damage).
// A damaged line followed by valid records is not a torn tail:
// Open refuses the file with a *CorruptError naming the file and line, rather
// than silently drop the good records after it. So is an intact journal
// record that breaks a rule of the ones before it (a step out of order, a
// record for a run that does not exist), and, anywhere in a log, an intact
// record out of place: one not chained after the record before it (no torn
// write leaves that; lines were reordered, removed or duplicated), or
// without a chain field. Its error names the file, the line and its byte
// offset, and says what to do: put the lines back as they were written, or
// restore the file from a backup, or move the folder away to start empty.
// In a chained log, removing a damaged line by hand is no way out: the
// next line is chained after it.
// A failed write is truncated away at once, so an I/O error does not leave a
// torn record in the middle either (see Failed writes).
//
// # Damage
//
// A torn tail and a lost file look the same to a reader: a log cut short.
// To tell them apart, the folder keeps CHECKPOINT: for each log, its
// generation and how many bytes and records of it were fsynced. The group
// commit leader rewrites it after each fsync with one pwrite (no fsync: an
// OS crash can leave it older than the logs, which makes the check weaker,
// never wrong, since it is written only after the bytes it names are
// durable). Open and Close write it after their own fsync of the logs. It
// is two 512-byte slots, each one line in the logs' frame (a CRC-32C, then
// the payload, padded with spaces), written in turn:
//
//	{"crc":"…","rec":{"v":1,"seq":41,"logs":{"idempotency.json":{"gen":"9f3c0a7e51d2b846","size":4096,"records":41},"journal.json":{…}}}}
//
// Open reads the intact slot with the higher seq (a slot torn by an OS
// crash leaves the other, older one). Then, for each log, what was fsynced
// must still be there: the file exists, its format record names the
// checkpoint's generation, and its first size bytes are intact records,
// exactly records of them. Otherwise Open refuses the folder with a
// *LossError (it is ErrCorrupt) that names the file, what it holds and what
// was fsynced, and says what to do, e.g.
//
//	oke file driver: .oke/idempotency.json holds 812 bytes / 3 records, but 4096 bytes / 41 records
//	were fsynced: the file was truncated or replaced. ...
//
// That covers a log truncated (mid-line or at a line boundary), emptied,
// deleted (while the checkpoint says something was fsynced to it), damaged
// inside its fsynced part (an fsynced last line with a bad checksum is not a
// torn write), replaced by another file (another generation, even a longer
// one) or by an older oke's copy (no generation). Open changes nothing in a
// folder it refuses. The ways out: restore the folder from a backup; move it
// away to start empty (every stored response and run is forgotten); or
// delete CHECKPOINT to go on with the logs as they are, accepting the loss
// (Open then writes a new checkpoint). A CHECKPOINT with no intact slot is a
// *CorruptError saying the same. Damage past what was fsynced (records that
// were written but never acknowledged as durable: a claim, a renewal) is a
// torn tail, truncated as before.
//
// A compaction gives the log a new generation, in an order that keeps the
// check right through a crash at any point: the new file is written and
// fsynced; CHECKPOINT records it as the log's next generation and is fsynced
// (one fsync per compaction, none per write); the file is renamed over the
// log and the folder fsynced; then CHECKPOINT records the new generation as
// the log's. Open accepts the log under the generation the checkpoint names,
// or under next, each checked against its own size. A log whose prev is the
// checkpoint's generation was compacted from it, with the checkpoint writes
// since lost to an OS crash: it is accepted, with nothing to check it
// against. Tests copy the folder before every I/O call of a compaction (what
// a killed process leaves), also with every checkpoint write since lost and
// with the rename lost, and kill a real process at the main points.
//
// A folder made by an older oke has no CHECKPOINT and logs without a
// generation: Open rewrites each such log once (a compaction) and then
// writes the folder's first checkpoint; from then on it is checked. Such
// an older oke refuses the rewritten logs (format version 2, see Format).
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
// # Failed writes
//
// Every failure to write — a write(2), an fsync, ENOSPC (disk full) at
// either, a compaction — is returned as driver.ErrUnavailable with its cause
// wrapped (errors.Is finds syscall.ENOSPC), so the app answers 503 and never
// runs a flow unprotected. None stops the driver for good: once the disk
// works again, the next call succeeds, without a restart. Each log heals on
// its own (a journal that cannot be written does not stop the rows).
//
// A write(2) that fails may have put part of its record in the file. The
// driver truncates the log back to its last intact record and fsyncs that
// (so the part never comes back after an OS crash, ahead of later records),
// and the next write goes on. If the truncate fails too (a file made
// immutable, EIO), the log takes no write until a later call manages it, or
// rewrites the log (below).
//
// An fsync that fails is worse: Linux reports the error once and may mark
// the unwritten pages clean, so a second fsync succeeds with the data lost
// (PostgreSQL's "fsyncgate"). So after a failed fsync the driver trusts
// nothing of the file that was not durable before: every caller waiting on
// it, and every later one that would show a record written since, gets
// driver.ErrUnavailable; the log takes no write; and it heals only by a
// rewrite of every record from memory into a new file, fsynced and renamed
// over the log as a compaction does. Memory is the truth here: each write
// that reached the page cache took effect there, and its caller was told
// either that it is stored or that it may be (ErrUnavailable). A failed
// fsync of the folder after a compaction's rename is treated the same way.
// The failure also marks the log "suspect" in CHECKPOINT: if the process
// dies before the log heals, the next Open rewrites it from what it reads
// rather than trust its pages. A Complete whose fsync failed thus returns an
// error (the app answers 503 OutcomeUnknown) and its response is durable
// once the log heals: a retry with the same key replays it.
//
// Repairs are tried by the next call of any kind (after a failed attempt,
// again once ten times its duration has passed, between 10ms and 5s).
// Meanwhile calls that show only what was durable before the failure go
// on: replays of those completed rows through Claim and Get, List, GetRun
// and ListRuns when all they show was, and DueRuns. Close heals a broken log if it can, and otherwise
// returns driver.ErrUnavailable: what was written since the failure may be
// lost. Every fsync of a log goes through its group commit, one at a time,
// so a failure is never hidden by another fsync that ran beside it.
//
// CHECKPOINT writes after a group commit are best effort: a failed one fails
// no call (the next Open checks against an older checkpoint). A compaction
// whose checkpoint write fails does not rename its file.
//
// # Read-only open
//
// OpenReadOnly is for tools that only look, such as the CLI's runs and
// idempotency listings of a -data folder. It creates, truncates and writes
// no file: a folder that does not exist, or holds neither log, is an error
// matching ErrNoData that names it; a torn tail is left out in memory, not
// truncated; an older oke's logs are read as they are; a leftover compaction
// file is left alone. The logs are checked against CHECKPOINT as Open checks
// them. It takes a shared flock on LOCK for as long as it is open, so it
// fails with ErrLocked while an app has the folder open (ask the app's admin
// API then), and an Open meanwhile fails with ErrLocked; a folder without a
// LOCK file is read without one. Every method that would write returns an
// error matching ErrReadOnly, which is also driver.ErrUnavailable.
//
// # Lock
//
// Open takes an exclusive flock on dir/LOCK (LOCK_EX|LOCK_NB) and holds it
// until Close (OpenReadOnly a shared one, LOCK_SH). A second process, or a second Open in the same process, gets
// an error that is ErrLocked (a *LockedError naming the folder). The kernel
// drops the lock when the process dies, however it dies, so there is no stale
// lock to clean up. Open retries a busy lock for half a second before it gives
// up: a child process being started (between fork and exec) briefly holds a
// copy of the lock of a Driver that was just closed. The LOCK file is never deleted (deleting it would let two
// processes each lock a different inode). On systems without flock (Windows,
// Plan 9, Solaris, ...) the lock only excludes a second Open in the same
// process (and OpenReadOnly takes none).
//
// # Compaction
//
// Renewals, completions, takeovers, releases and sweeps leave dead records
// behind. When dead records outnumber live rows by more than 2 to 1 and there
// are at least 10 000 of them (WithCompactAfter changes the minimum), the
// next write compacts: it writes every live row to idempotency.json.compact
// (a new generation), fsyncs it, records it in CHECKPOINT, renames it over
// idempotency.json and fsyncs the folder (see Damage). A crash at any point
// leaves either the old log or the new one, both complete. Each
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
//   - A damaged middle of a log, or a log that lost fsynced records, needs a
//     person: restore it, move it aside, or delete CHECKPOINT to accept the
//     loss. Open never guesses. A record out of place in a chained log
//     (reordered, removed or duplicated lines) cannot be accepted as it is:
//     restore it or start empty; no tool re-chains a log.
//   - The chain tells a line out of place, not lines cut off at the end at
//     a line boundary (a truncation): that is CHECKPOINT's check, only for
//     what was fsynced. It is a CRC, not a MAC: it detects accidents, not
//     someone who rewrites the file and its checksums on purpose. A version
//     1 log (an older oke's) is not checked for order before Open rewrites
//     it chained.
//   - The damage check is only as good as CHECKPOINT: deleting both a log
//     and CHECKPOINT looks like a new folder; an OS crash can leave the
//     checkpoint older than the logs (what was fsynced since is then not
//     checked); records written but not fsynced (a claim, a renewal) are
//     never checked, since any crash may take them. Damage past what was
//     fsynced that intact records follow (an OS crash that wrote back later
//     pages first) is a *CorruptError, not a torn tail.
//   - An fsync failure costs a rewrite of the whole log, under its lock,
//     once the disk works (and failed attempts, while it does not, at most a
//     tenth of the time). Until then replays of what was durable go on, but
//     nothing new is stored.
//   - A read-only driver shows the logs as they were when it opened, and
//     while it is open the app cannot Open the folder.
package file
