-- The driver's claim statement (claimSQL in driver/postgres/rows.go) with
-- pgbench variables for its parameters. Kept in step by
-- TestPgbenchScriptsClaimLikeTheDriver; go test -run PgbenchScripts
-- -update-pgbench ./driver/postgres/ rewrites it.
WITH done AS (
	SELECT tenant, principal, flow, idem_key, fingerprint, state, owner, lease_until,
	expires_at, created_at, completed_at, resp_status, resp_content_type, resp_location, resp_body, run_id, false AS expired
	FROM oke.oke_idempotency d
	WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key
		AND d.state = 2  AND d.expires_at > now()
), old AS (
	SELECT tenant, principal, flow, idem_key, fingerprint, state, owner, lease_until,
	expires_at, created_at, completed_at, resp_status, resp_content_type, resp_location, resp_body, run_id, (o.expires_at <= now() AND NOT (o.state = 1 AND o.lease_until > now())) AS expired
	FROM oke.oke_idempotency o
	WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key
		AND NOT EXISTS (SELECT 1 FROM done)
	FOR UPDATE
), up AS (
	INSERT INTO oke.oke_idempotency AS t
		(tenant, principal, flow, idem_key, fingerprint, state, owner, lease_until, expires_at, created_at, run_id)
	SELECT :tenant, :principal, :flow, :key, :fp, 1, :owner,
		now() + :lease * interval '1 microsecond', now() + :ttl * interval '1 microsecond', now(), ''
	FROM (SELECT count(*) FROM old) AS lock_old_first
	WHERE NOT EXISTS (SELECT 1 FROM done)
	ON CONFLICT (tenant, principal, flow, idem_key) DO UPDATE SET
		fingerprint = excluded.fingerprint,
		state = 1,
		owner = excluded.owner,
		lease_until = excluded.lease_until,
		expires_at = excluded.expires_at,
		created_at = excluded.created_at,
		completed_at = NULL,
		resp_status = NULL,
		resp_content_type = NULL,
		resp_location = NULL,
		resp_body = NULL,
		run_id = CASE WHEN NOT (t.expires_at <= now() AND NOT (t.state = 1 AND t.lease_until > now())) AND t.run_id <> '' THEN t.run_id ELSE excluded.run_id END
	WHERE (t.expires_at <= now() AND NOT (t.state = 1 AND t.lease_until > now()))
		OR (t.state = 1 AND t.lease_until <= now() AND t.fingerprint = excluded.fingerprint)
	RETURNING t.tenant, t.principal, t.flow, t.idem_key, t.fingerprint, t.state, t.owner, t.lease_until, t.expires_at, t.created_at, t.completed_at, t.resp_status, t.resp_content_type, t.resp_location, t.resp_body, t.run_id
)
SELECT up.tenant, up.principal, up.flow, up.idem_key, up.fingerprint, up.state, up.owner, up.lease_until, up.expires_at, up.created_at, up.completed_at, up.resp_status, up.resp_content_type, up.resp_location, up.resp_body, up.run_id, seen.tenant, seen.principal, seen.flow, seen.idem_key, seen.fingerprint, seen.state, seen.owner, seen.lease_until, seen.expires_at, seen.created_at, seen.completed_at, seen.resp_status, seen.resp_content_type, seen.resp_location, seen.resp_body, seen.run_id, seen.expired, now()
FROM (VALUES (1)) AS one
LEFT JOIN up ON true
LEFT JOIN (SELECT * FROM old UNION ALL SELECT * FROM done) AS seen ON true;
