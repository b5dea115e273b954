-- Two commits per request, what oke does once the charge INSERT and the
-- stored response commit together: (1) the claim, autocommit; (2) BEGIN;
-- INSERT the charge; UPDATE … complete (fenced by the owner token); COMMIT.
--
-- The --@include lines take the shared parts in parts/ (lib.sh's
-- pgb_expand): the driver's claim (claimSQL, checked by a Go test), a fresh
-- key, the demo's charge INSERT and the completion. Run by scripts/pgbench/run with -D run=<n> -D n=0 -D fp=<64 hex>
-- -D lease=30000000 -D ttl=86400000000 (microseconds, as the driver passes
-- them). Every transaction claims a fresh key: :run, :client_id and this
-- client's transaction count :n make it unique; the owner token is the key
-- (unique per attempt, as oke's is); the fingerprint is one value, as oke's
-- is for one flow and body.
--
--@include fresh_key.sql

--@include claim.sql

BEGIN;

--@include charge_and_complete.sql

COMMIT;
