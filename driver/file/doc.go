// Package file is oke's embedded default driver: idempotency rows kept in one
// folder on local disk (by default .oke/ beside the app), with no server to
// run. It is for one process at a time; several app instances sharing one
// store need the Postgres driver.
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
//
// and, later, the journal file beside them. idempotency.json.compact may appear
// for a moment while the log is compacted; a leftover one is deleted on Open.
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
// # Crash safety
//
// A record is written with a single write(2) at the end of the log. A crash
// (SIGKILL, panic, power loss) can therefore only leave a torn record at the
// tail: a last line without its newline, with a bad checksum, or zero bytes
// after an OS crash. Open ignores such a tail and truncates it (then fsyncs),
// so the next record starts on a clean line. A damaged line followed by valid
// records is not a torn tail: Open refuses the file with a *CorruptError
// naming the file and line, rather than silently drop the good rows after it.
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
// If an fsync fails the driver stops: every later call fails with
// driver.ErrUnavailable (fail closed), because after a failed fsync the kernel
// may have dropped the unwritten pages and nothing written since can be
// trusted. Reopen the folder (restart the process) to continue from what is
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
// # What is weak
//
//   - One process. The lock makes a second one fail fast; it does not let two
//     share the folder.
//   - Every row lives in memory, and Open reads the whole log: about 3µs per
//     record (a log of 100 000 completed rows, 200 000 records, opens in about
//     0.6s on a small cloud VM; see bench_test.go).
//   - Compaction runs inline, holding the driver's lock: writes pause while
//     the live rows are rewritten and fsynced (about 1.7µs per live row: a
//     pause of ~170ms at 100 000 rows, under 1µs per write amortized).
//   - List sorts every key on each call: fine for a console, not for a hot
//     path.
//   - Times come from the wall clock (time.Now in UTC, as stored in the file),
//     so a clock step moves leases and TTLs with it.
//   - A damaged middle of the file needs a person: restore it or move it
//     aside. Open never guesses.
package file
