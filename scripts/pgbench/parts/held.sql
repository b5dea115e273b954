-- The driver's claim held in the transaction (heldLockSQL, heldLookupSQL and
-- heldGuardSQL in driver/postgres/heldclaim.go) with pgbench variables for
-- their parameters; the key's lock is :key itself, the request's -:key. Written by
-- TestPgbenchHeldScriptIsTheDrivers; go test ./driver/postgres/ -run PgbenchHeld
-- -update-pgbench rewrites it.
SELECT CASE
	WHEN pg_try_advisory_xact_lock(:key) AND set_config('oke.held_key', :key::text, true) IS NOT NULL THEN 0
	ELSE oke.oke_lock_holder(0, 0, 0, 0) END::smallint
	FROM (SELECT pg_advisory_xact_lock_shared((-(:key)::bigint)) OFFSET 0) AS request_lock;
SELECT o.tenant, o.principal, o.flow, o.idem_key, o.fingerprint, o.state, o.owner, o.lease_until, o.expires_at, o.created_at, o.completed_at, o.resp_status, o.resp_content_type, o.resp_location, o.resp_body, o.run_id, now()
	FROM (VALUES (1)) AS one LEFT JOIN oke.oke_idempotency o ON tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key;
SELECT 1 / (coalesce(current_setting('oke.held_key', true) = :key::bigint::text, false)
	AND NOT EXISTS (SELECT 1 FROM oke.oke_idempotency t WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key
	AND NOT ((t.expires_at <= now() AND NOT (t.state = 1 AND t.lease_until > now()))
		OR (t.state = 1 AND t.lease_until <= now() AND t.fingerprint = :fp))))::int;
