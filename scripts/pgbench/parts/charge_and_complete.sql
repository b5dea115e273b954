-- The demo's charge INSERT (examples/payments/app/charges.go) and the
-- driver's completion (completeSQL), fenced by the owner token.
INSERT INTO charges (amount, currency, tenant, principal) VALUES (1000, 'usd', :tenant, :principal)
	RETURNING id AS c_id, created_at AS c_created_at \gset

UPDATE oke.oke_idempotency SET
		state = 2, owner = '', lease_until = NULL, completed_at = now(),
		expires_at = now() + :ttl * interval '1 microsecond',
		resp_status = 201, resp_content_type = 'application/json', resp_location = '/charges/' || :c_id,
		resp_body = convert_to('{"id":"' || :c_id || '","amount":1000,"currency":"usd","createdAt":"' || :c_created_at || '"}', 'UTF8')
	WHERE tenant = :tenant AND principal = :principal AND flow = :flow AND idem_key = :key AND owner = :owner AND state = 1;
