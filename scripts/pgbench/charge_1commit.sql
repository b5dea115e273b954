-- One commit per request (an experiment, not what oke does): the claim runs
-- inside the flow's transaction, so the claim, the charge INSERT and the
-- completion commit together. See docs/BENCHMARKS.md section 6.
--
--@include fresh_key.sql

BEGIN;

--@include claim.sql

--@include charge_and_complete.sql

COMMIT;
