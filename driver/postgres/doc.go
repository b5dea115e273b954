// Package postgres is oke's driver for PostgreSQL: idempotency rows and the
// journal of durable runs in tables of one schema, shared safely by any
// number of app instances. It implements driver.Driver and driver.Journal
// on github.com/jackc/pgx/v5 (a pgxpool.Pool) and passes driver/drivertest
// against a real server.
//
// # Open and Migrate
//
// Open connects and checks that the server answers; Migrate creates the
// tables. Migrate is explicit — Open never changes the database — so that
// an operator decides when a schema changes:
//
//	d, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil {
//		log.Fatal(err) // errors.Is(err, driver.ErrUnavailable) when the server does not answer
//	}
//	defer d.Close()
//	if err := d.Migrate(ctx); err != nil {
//		log.Fatal(err)
//	}
//
// The DSN is anything pgx accepts: a postgres:// URL or a libpq key=value
// string, with pgxpool's pool_max_conns and friends. WithPool hands the
// driver a pool you built yourself (the driver then leaves closing it to you).
//
// # Schema
//
// Every table lives in one schema, "oke" unless WithSchema names another,
// and every query names it, so no search_path is needed and a pool shared
// with the app's own queries works. (Behind a transaction-mode pooler that
// does not support prepared statements, add default_query_exec_mode=exec to
// the DSN.) Several
// apps, or the tests, share one database with a schema each. The tables:
//
//	oke_idempotency   one row per Idempotency-Key in its scope (tenant, principal, flow)
//	oke_runs          one row per durable run; dedupe_key is unique; next_attempts
//	                  counts the executions that began its next step; strikes
//	                  its failed pick-ups in a row (migration 014), status 5
//	                  a dead-lettered run, outside the due index
//	oke_steps         saved steps, primary key (run_id, seq)
//	oke_step_starts   unused since migration 003 (an older oke's StartStep
//	                  counts; kept for older binaries during an upgrade)
//	oke_claims        business keys claimed by runs (oke.Claim)
//	oke_signals       signals sent to runs (oke.AwaitSignal), primary key
//	                  (run_id, seq), key unique per run; step: the step
//	                  that received it (0: not yet)
//	oke_migrations    which migrations have been applied
//
// Migrations are the embedded files migrations/NNN_name.sql, applied in
// order in one transaction under an advisory lock on the schema's name:
// Migrate is safe to run twice, and from several processes at once (the later
// ones wait, then find nothing to do). A failed migration leaves nothing
// behind; a schema migrated by a newer oke is ErrSchemaNewer. Key columns are COLLATE "C", so List and ListRuns page in Go's
// bytewise string order whatever the database's collation. Strings must be
// valid UTF-8 without NUL bytes (Postgres text refuses others, and the driver
// returns that error); inputs, results and response bodies are bytea and
// come back byte for byte.
//
// # The database clock
//
// Every time the driver writes — lease deadlines, TTLs, created, completed
// and updated times, and "is it due / expired / lapsed" — is computed from
// the server's now() inside the statement that uses it, never from the
// app's clock. Several instances with skewed clocks therefore agree on who
// holds a lease. ClaimResult.Now is that now(), so the claim state machine
// computes Retry-After from the same clock as the lease. now() is the start
// of the statement's transaction; every statement here is its own
// transaction, so now() is "when the statement ran". Durations become
// intervals in microseconds, Postgres's precision.
//
// # Claims and leases
//
// Claim is one statement (no check-then-insert): it locks the existing row
// if there is one (SELECT … FOR UPDATE in a CTE), then INSERT … ON CONFLICT
// DO UPDATE … WHERE the row has expired, or is a lapsed Running row with the
// same fingerprint, RETURNING the new row; the outer SELECT reports the new
// row, the locked old row and now(). The primary key decides between
// concurrent claims of a new key. One case needs a second read: when a
// concurrent claim inserted the key after this statement's snapshot and its
// row does not yield, the statement sees neither row; the decision (not
// claimed) is made, and a plain SELECT reports the winner's row.
//
// The statement runs inside a PL/pgSQL function, oke_claim_v2 (migration
// 016_claim_function_trace.sql, generated from the statement; it replaced
// 004's oke_claim, which returned no trace): a new key — the
// usual case — is first tried with a plain INSERT … ON CONFLICT DO NOTHING,
// and the whole statement runs only when the key exists. The outcome is
// the same; the server does about 15 % less work per claim of a new key.
//
// Renew, Complete and Release are UPDATE/DELETE … WHERE owner = $owner AND
// state = running: a stale holder whose row was taken over touches no row
// and gets driver.ErrNotOwner. Sweep deletes expired rows in batches of at
// most 1000 per statement (DELETE … WHERE ctid IN (SELECT … LIMIT n FOR
// UPDATE SKIP LOCKED)), so concurrent sweepers split the work.
//
// The journal works the same way: AcquireRun is one UPDATE … WHERE the run is
// due at now() (a concurrent acquirer waits for the row, re-checks it, and
// gets ErrNotDue, and the winner's UPDATE counts the pick-up in next_attempts
// unless the run was sleeping); RenewRun, SaveStep and FinishRun are fenced by
// owner; SaveStep updates the run (next_attempts = 1) and inserts the step in
// one statement only when the step is the next one (ErrStepOrder otherwise);
// CommitStep runs the same save in the flow's transaction, made to fail
// rather than report when it saves nothing, so that the COMMIT behind it in
// one pipeline is skipped (ErrNotOwner, ErrStepOrder); DueRuns reads due
// runs longest-due first with FOR UPDATE SKIP LOCKED, so schedulers on
// several instances do not hand out the same run; CreateRun and ClaimKey are
// INSERT … ON CONFLICT DO NOTHING, then a read of the winner.
//
// # Wake-ups
//
// The driver is a driver.Notifier. CreateRun of an unowned run that is due
// now, and FinishRun of a park (a release, a sleep), send pg_notify on the
// channel WakeChannel names ("oke_due:<schema>") in the same statement, so a
// notification goes out when the write commits and never for one rolled
// back. WatchDue LISTENs on a connection of its own (made from the pool's
// settings; it takes no slot in the pool), reconnects with backoff when the
// connection is lost, signals once after every LISTEN (notifications sent
// while it was down are gone), and pings the connection after 30 s of
// silence. NextDue reads the earliest wake time of a parked run from the
// partial index on wake_at, so the scheduler arms a timer for it. Polling
// stays the fallback: it covers a listener that is down and leases that
// lapse. LISTEN does not work through a pooler in transaction mode.
//
// # Round trips
//
// Per request with an Idempotency-Key: Claim is one round trip (two in the
// rare lost race above), Renew one per lease period, Complete or Release
// one. Each commits on its own (autocommit), so "durable when it returns"
// is Postgres's commit. A replay's claim reads the completed row without a
// lock: it writes nothing, so its commit waits for no WAL flush. A flow
// writing through Fx.Tx costs the claim, its own statements — the first one
// carries the transaction's BEGIN in the same pipeline (Begin sends
// nothing) — and one pipelined round trip for the fenced completion and the
// COMMIT: three round trips and two flushed commits for a charge of one
// INSERT. With the claim held by the transaction (oke.ClaimInTx;
// BeginClaimed, a driver.TxClaimer) the claim goes in the first
// statement's pipeline — the advisory locks of the request and of its key,
// a lookup of its row and a guard ahead of the BEGIN — and the completion
// writes the row once, completed, before the COMMIT: two round trips and
// one flushed commit for the charge, and a request whose key is not its own
// is one, its statement skipped by the server (two while another
// transaction holds the key; see heldclaim.go). Per
// durable step: SaveStep — or, for a step writing through Fx.Tx,
// the fenced save and the COMMIT in one pipeline — one round trip and one
// flushed commit (a step's attempts ride on the run row that CreateRun, SaveStep and
// AcquireRun write anyway, so beginning a step costs nothing). AcquireRun
// and GetRun one each (the run and its steps go as one pgx batch).
//
// # Exactly-once writes: the transaction twins
//
// The driver is a driver.TxDriver: DB returns a database/sql handle on its
// pool, Begin opens a transaction on one of its connections lazily (the
// BEGIN travels with the first statement; the rows of that statement are
// converted to exactly the values pgx's database/sql adapter gives, type by
// type; the handle and its lazy BEGIN are internal/pgpipe's, which knows
// no claim: the held claim rides on its hook, a Prelude sent ahead of the
// BEGIN), and
// CommitComplete and CommitStep run Complete's and SaveStep's
// fenced statements inside a caller's transaction and commit it. oke's Fx.Tx uses them, so a
// flow's writes to this database and its stored response (or a step's saved
// result) commit together: a crash never leaves one without the other, and
// an attempt whose lease lapsed finds another owner and must roll back.
// The transaction is a BEGIN on a connection of DB, so that CommitComplete
// can send the completion and the COMMIT as one pipeline; the completion
// then fails (division by zero) rather than touching no row when the owner
// lost the key, and the server skips the COMMIT. With Fx.Tx a live keyed
// request costs two commits: the claim, and the flow's writes with the
// response. See docs/postgres.md.
//
// # Errors
//
// One function translates pgx's errors: no rows is driver.ErrNotFound; a
// lost or refused connection, a server shutting down, too many connections,
// a serialization failure or deadlock is driver.ErrUnavailable (the
// statement may or may not have committed; callers fail closed); a closed
// driver is driver.ErrClosed; a cancelled context stays itself.
//
// # What is weak, and what is not done
//
//   - Every notification wakes every instance's scheduler (one DueRuns and
//     one NextDue query each, bursts coalesced); there is no leader that
//     hands runs out.
//   - GetRun reads the run and its steps in two statements of one batch
//     (READ COMMITTED, so two snapshots); steps are append-only, so a reader
//     may at worst see a run a moment older than its newest step.
//   - Claim locks an existing row even when it only reports it (a replay, a
//     409): ON CONFLICT DO UPDATE locks the row it conflicts with, and the
//     lock is what makes the decision atomic. Postgres writes that lock
//     into the row, so replays are small writes, not pure reads.
//   - DueRuns takes and at once releases row locks: it writes lock marks to
//     the rows it reads. On a busy journal prefer a bounded limit.
//   - Rows and runs are not partitioned; Sweep keeps oke_idempotency small,
//     and finished runs only go with WithRetention.
//   - Tested against PostgreSQL 15 by one process; several processes
//     sharing one schema rely on the same row locks but have no test of
//     their own yet.
package postgres
