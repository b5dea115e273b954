-- One commit per request, in two round trips: what oke sends for a keyed
-- charge whose claim is held in the charge's transaction
-- (oke.Idempotency.ClaimInTx, the demo's -claim-in-tx; heldclaim.go in
-- driver/postgres): (1) the key's advisory lock, the lookup of its row and
-- the guard (parts/held.sql, the driver's statements, checked by a Go
-- test), then BEGIN and the charge INSERT, one pipeline; (2) the completed
-- row INSERT and COMMIT, one pipeline. The lock key is the key itself here
-- (oke's is 64 bits of a SHA-256 of the key's parts, computed in Go).
-- pgbench cannot \gset inside a pipeline, so the stored body carries a
-- placeholder id of the same length as the real one, as in
-- charge_pipelined.sql; the server does the same work.
--
--@include fresh_key.sql

\startpipeline
--@include held.sql
--@include begin_charge.sql
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
