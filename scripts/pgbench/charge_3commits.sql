-- Three commits per request, what the demo does before the exactly-once
-- change: the claim; the charge INSERT (autocommit); the completion.
--
-- The --@include lines take the shared parts in parts/ (see charge.sql). Run by scripts/pgbench/run with -D run=<n> -D n=0 -D fp=<64 hex>
-- -D lease=30000000 -D ttl=86400000000 (microseconds, as the driver passes
-- them). Every transaction claims a fresh key: :run, :client_id and this
-- client's transaction count :n make it unique; the owner token is the key
-- (unique per attempt, as oke's is); the fingerprint is one value, as oke's
-- is for one flow and body.
--
--@include fresh_key.sql

--@include claim.sql

--@include charge_and_complete.sql
