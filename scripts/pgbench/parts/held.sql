-- The driver's claim held in the transaction (heldLockSQL, heldLookupSQL and
-- heldGuardSQL in driver/postgres/heldclaim.go) with pgbench variables for
-- their parameters; the key's lock is :key itself, the request's -:key. Written by
-- TestPgbenchHeldScriptIsTheDrivers; go test ./driver/postgres/ -run PgbenchHeld
-- -update-pgbench rewrites it.
SELECT CASE
	WHEN pg_try_advisory_xact_lock(:key) AND set_config('oke.held_key', :key::text, true) IS NOT NULL THEN 0
	WHEN EXISTS (SELECT 1 FROM oke.oke_idempotency d WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key
		AND d.state = 2 AND d.expires_at > now()) THEN 3
	ELSE (
		WITH locks AS MATERIALIZED (
			SELECT pid, classid, objid FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND objsubid = 1
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
				AND ((classid = 0 AND objid = 0) OR (classid = 0 AND objid = 0)))
		SELECT CASE
			WHEN EXISTS (SELECT 1 FROM locks k JOIN locks r ON r.pid = k.pid
				WHERE k.classid = 0 AND k.objid = 0 AND r.classid = 0 AND r.objid = 0) THEN 1
			WHEN EXISTS (SELECT 1 FROM locks k WHERE k.classid = 0 AND k.objid = 0) THEN 2
			ELSE 1 END) END::smallint
FROM (SELECT pg_advisory_xact_lock_shared((-(:key)::bigint)) OFFSET 0) AS request_lock;
SELECT o.tenant, o.principal, o.flow, o.idem_key, o.fingerprint, o.state, o.owner, o.lease_until, o.expires_at, o.created_at, o.completed_at, o.resp_status, o.resp_content_type, o.resp_location, o.resp_body, o.run_id, now()
	FROM (VALUES (1)) AS one LEFT JOIN oke.oke_idempotency o ON tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key;
SELECT 1 / (coalesce(current_setting('oke.held_key', true) = :key::bigint::text, false)
	AND NOT EXISTS (SELECT 1 FROM oke.oke_idempotency t WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key
	AND NOT ((t.expires_at <= now() AND NOT (t.state = 1 AND t.lease_until > now()))
		OR (t.state = 1 AND t.lease_until <= now() AND t.fingerprint = :fp))))::int;
