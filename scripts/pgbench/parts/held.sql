-- The driver's claim held in the transaction (heldLockSQL, heldLookupSQL and
-- heldGuardSQL in driver/postgres/heldclaim.go) with pgbench variables for
-- their parameters; the key's lock is :key itself, the request's -:key. Written by
-- TestPgbenchHeldScriptIsTheDrivers; go test ./driver/postgres/ -run PgbenchHeld
-- -update-pgbench rewrites it.
SELECT CASE WHEN pg_try_advisory_xact_lock(:key) THEN 1
	ELSE oke.oke_claim_refused('another transaction holds the key') END
	FROM (SELECT pg_advisory_xact_lock_shared((-(:key)::bigint)) OFFSET 0) AS request_lock;
SELECT o.fingerprint, o.state, o.owner, o.lease_until, o.expires_at, o.created_at, o.completed_at, o.resp_status, o.resp_content_type, o.resp_location, o.resp_body, o.run_id, o.resp_trace, now(),
	set_config('oke.held_claim', coalesce(o.idem_key IS NULL OR ((o.expires_at <= now() AND NOT (o.state = 1 AND o.lease_until > now()))
		OR (o.state = 1 AND o.lease_until <= now() AND o.fingerprint = :fp)), false)::int::text, true),
	set_config('idle_in_transaction_session_timeout',
		CASE WHEN current_setting('idle_in_transaction_session_timeout')::interval = interval '0'
			OR current_setting('idle_in_transaction_session_timeout')::interval > 30000::bigint * interval '1 millisecond'
		THEN 30000::bigint::text ELSE current_setting('idle_in_transaction_session_timeout') END, true)
	FROM (VALUES (1)) AS one LEFT JOIN oke.oke_idempotency o ON tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key;
SELECT CASE current_setting('oke.held_claim') WHEN '1' THEN 1
	ELSE oke.oke_claim_refused('the key has a row this request may not take') END;
