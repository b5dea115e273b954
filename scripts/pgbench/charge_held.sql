-- One commit per request, in two round trips: what oke sends for a keyed
-- charge whose claim is held in the charge's transaction
-- (oke.Idempotency.ClaimInTx, the demo's -claim-in-tx; heldclaim.go in
-- driver/postgres): (1) the key's advisory lock, the lookup of its row and
-- the guard, then BEGIN and the charge INSERT, one pipeline; (2) the
-- completed row INSERT and COMMIT, one pipeline. The lock key is the key
-- itself here (oke's is 64 bits of a SHA-256 of the key's parts, computed
-- in Go). pgbench cannot \gset inside a pipeline, so the stored body
-- carries a placeholder id of the same length as the real one, as in
-- charge_pipelined.sql; the server does the same work.
--
--@include fresh_key.sql

\startpipeline
SELECT 1 / pg_try_advisory_xact_lock(:key)::int;
SELECT o.tenant, o.principal, o.flow, o.idem_key, o.fingerprint, o.state, o.owner, o.lease_until,
	o.expires_at, o.created_at, o.completed_at, o.resp_status, o.resp_content_type, o.resp_location, o.resp_body, o.run_id, now()
	FROM (VALUES (1)) AS one LEFT JOIN oke.oke_idempotency o
	ON tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key::text;
SELECT 1 / (NOT EXISTS (SELECT 1 FROM oke.oke_idempotency t
	WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key::text
	AND NOT ((t.expires_at <= now() AND NOT (t.state = 1 AND t.lease_until > now()))
		OR (t.state = 1 AND t.lease_until <= now() AND t.fingerprint = :fp))))::int;
BEGIN;
INSERT INTO charges (amount, currency, tenant, principal) VALUES (1000, 'usd', :tenant, :principal)
	RETURNING id, created_at;
\endpipeline

\startpipeline
INSERT INTO oke.oke_idempotency
		(tenant, principal, flow, idem_key, fingerprint, state, owner, expires_at, created_at, completed_at,
		 resp_status, resp_content_type, resp_location, resp_body)
	VALUES (:tenant, :principal, :flow, :key, :fp, 2, '', now() + :ttl * interval '1 microsecond', now(), now(),
		201, 'application/json', '/charges/ch_000000000000000000000000',
		convert_to('{"id":"ch_000000000000000000000000","amount":1000,"currency":"usd","createdAt":"' || now() || '"}', 'UTF8'));
COMMIT;
\endpipeline
