-- 011_lock_holder: what a claim held in a transaction (heldclaim.go) asks
-- when another transaction holds its key's advisory lock: does that
-- transaction also hold the request's lock (the same key and fingerprint)?
-- 1 when it does, or when it has let the key go by now (the same request,
-- running: 409); 2 when it does not (another payload under the key: 422).
-- k1, k2 are the key's lock as pg_locks shows a 64-bit key (classid,
-- objid); r1, r2 the request's. A function, so that the claim's statement
-- stays two lock calls when the key is free: its body is planned and run
-- only when it is called.
CREATE OR REPLACE FUNCTION {s}.oke_lock_holder(k1 bigint, k2 bigint, r1 bigint, r2 bigint)
RETURNS smallint
LANGUAGE plpgsql AS $holder$
BEGIN
	RETURN (
		WITH locks AS MATERIALIZED (
			SELECT pid, classid, objid FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND objsubid = 1
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
				AND ((classid = k1 AND objid = k2) OR (classid = r1 AND objid = r2)))
		SELECT CASE
			WHEN EXISTS (SELECT 1 FROM locks k JOIN locks r ON r.pid = k.pid
				WHERE k.classid = k1 AND k.objid = k2 AND r.classid = r1 AND r.objid = r2) THEN 1
			WHEN EXISTS (SELECT 1 FROM locks k WHERE k.classid = k1 AND k.objid = k2) THEN 2
			ELSE 1 END::smallint);
END
$holder$;
