-- charge.sql sent the way oke sends it (three round trips, two commits):
-- (1) the claim, autocommit; (2) BEGIN with the charge INSERT, one pipeline
-- (oke's lazy BEGIN); (3) the completion, fenced by the owner token, with
-- the COMMIT, one pipeline. pgbench cannot \gset inside a pipeline, so the
-- stored body carries a placeholder id of the same length as the real one
-- (the INSERT still returns the row); the server does the same work.
--
-- The --@include lines take the shared parts in parts/ (see charge.sql).
--
--@include fresh_key.sql

--@include claim.sql

\startpipeline
--@include begin_charge.sql
\endpipeline

\startpipeline
UPDATE oke.oke_idempotency SET
		state = 2, owner = '', lease_until = NULL, completed_at = now(),
		expires_at = now() + :ttl * interval '1 microsecond',
		resp_status = 201, resp_content_type = 'application/json', resp_location = '/charges/ch_000000000000000000000000',
		resp_body = convert_to('{"id":"ch_000000000000000000000000","amount":1000,"currency":"usd","createdAt":"' || now() || '"}', 'UTF8')
	WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key AND owner = :owner AND state = 1;
COMMIT;
\endpipeline
