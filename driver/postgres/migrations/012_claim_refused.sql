-- 012_claim_refused: how a claim held in a transaction (heldclaim.go) stops
-- the statements sent behind it when it may not go ahead: its lock or its
-- guard calls this, which raises an error of oke's own (SQLSTATE OKE01)
-- that says so, where a division by zero said nothing. The server skips the
-- rest of the pipeline; oke answers the request from the key's row (a
-- replay, 409 or 422). A server that logs errors logs one per refusal; the
-- message and hint tell an operator it is on purpose. Called only in the
-- branch that refuses: a claim that goes ahead never plans or runs it.
CREATE OR REPLACE FUNCTION {s}.oke_claim_refused(why text)
RETURNS int
LANGUAGE plpgsql AS $refused$
BEGIN
	RAISE EXCEPTION 'oke: idempotency claim refused: %', why
		USING ERRCODE = 'OKE01',
			HINT = 'oke stops a request''s transaction this way before anything of it runs, and answers the request from the key''s row (a replay, 409 or 422); nothing needs fixing.';
END
$refused$;
