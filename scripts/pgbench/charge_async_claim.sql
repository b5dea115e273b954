-- charge.sql with the claim's commit not waiting for its WAL flush
-- (SET LOCAL synchronous_commit = off): the experiment of docs/BENCHMARKS.md
-- section 6. The completing transaction still commits synchronously. The
-- claim's BEGIN, SET LOCAL, claim and COMMIT go in one pipeline (one round
-- trip, as a driver would send them with a pgx Batch); without it the three
-- extra round trips cost more than the flush saves (charge_async_claim_rt.sql).
--
-- The --@include lines take the shared parts in parts/ (see charge.sql). Run by scripts/pgbench/run with -D run=<n> -D n=0 -D fp=<64 hex>
-- -D lease=30000000 -D ttl=86400000000 (microseconds, as the driver passes
-- them). Every transaction claims a fresh key: :run, :client_id and this
-- client's transaction count :n make it unique; the owner token is the key
-- (unique per attempt, as oke's is); the fingerprint is one value, as oke's
-- is for one flow and body.
--
--@include fresh_key.sql

\startpipeline
BEGIN;

SET LOCAL synchronous_commit = off;

--@include claim.sql

COMMIT;
\endpipeline

BEGIN;

--@include charge_and_complete.sql

COMMIT;
