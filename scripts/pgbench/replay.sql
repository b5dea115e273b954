-- A replay: the claim of one completed key (scripts/pgbench/run completes
-- key 1 with charge.sql's statements first). One statement, one round trip.
-- Free of writes since the claim reads a completed, unexpired row without
-- a lock (its done CTE): no transaction id, no WAL, no flush. (Before that,
-- the claim locked the row it found, and replays of one key queued on that
-- lock, one per WAL flush.)
-- Run with -D tenant=default -D principal=anon -D flow=payments.charge
-- -D fp=<the fingerprint> -D lease=30000000 -D ttl=86400000000.
\set key 1
\set owner :client_id

--@include claim.sql
