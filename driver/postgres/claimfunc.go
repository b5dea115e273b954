package postgres

import "strings"

// The claim runs as a function, {s}.oke_claim_v2 (claimFunction), that
// the migration 016_claim_function_trace.sql creates: it first tries a
// plain INSERT … ON CONFLICT DO NOTHING of the new Running row, and only
// when the key exists runs claimSQL, the whole claim. The result is the
// same row either way (claimSQL's columns: the row written, claimedCols,
// and the row seen, rowCols). Why: a new key is the common case, and
// claimSQL's plan — three CTEs over the same key, a locking read,
// an upsert and two outer joins — costs the server more to set up and run
// than the insert alone: measured on the claim alone, 9 550 against 12 400
// claims/s. A replay still writes nothing (an insert that finds its key
// taken inserts no tuple, so the transaction gets no id).
//
// claimSQL stays the one source of the claim's rules: the function's
// second branch is claimSQL with the parameters named, generated here, and
// a later change to claimSQL ships as a new migration that replaces the
// function (TestClaimFunctionIsClaimSQL checks that the latest one does).
// A change of the columns it returns (rowCols) cannot replace it in place
// (Postgres refuses CREATE OR REPLACE of another result type): it ships as
// a function of a new name, and the old one stays for an older oke still
// running against the schema during a rolling upgrade. Migration 004 made
// {s}.oke_claim, which returns rowCols without resp_trace for both rows;
// 016 made {s}.oke_claim_v2, which returns the row seen with resp_trace
// (migration 015 added it) and the row written without the response's
// columns (always NULL there: claimedCols), 31 columns where 004 had 34.
// A later migration may drop oke_claim once no oke before 016 runs.

// claimFunction is the claim function this driver calls and
// claimFunctionSQL creates.
const claimFunction = "oke_claim_v2"

// claimCallSQL is how the driver claims: one statement, one round trip.
const claimCallSQL = `SELECT * FROM {s}.` + claimFunction + `($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// claimParams name claimSQL's parameters $1…$9 in the function.
var claimParams = []struct{ name, typ string }{
	{"p_tenant", "text"}, {"p_principal", "text"}, {"p_flow", "text"}, {"p_key", "text"},
	{"p_fp", "text"}, {"p_owner", "text"}, {"p_lease", "bigint"}, {"p_ttl", "bigint"}, {"p_run_id", "text"},
}

// rowTypes are rowCols' types, in order.
var rowTypes = []string{"text", "text", "text", "text", "text", "smallint", "text", "timestamptz",
	"timestamptz", "timestamptz", "timestamptz", "integer", "text", "text", "bytea", "text", "text"}

// claimFunctionSQL is the migration that creates {s}.oke_claim_v2
// (claimFunction) from claimSQL.
func claimFunctionSQL() string {
	cols := strings.Split(strings.Join(strings.Fields(rowCols), ""), ",")
	var params, out, nulls []string
	for _, p := range claimParams {
		params = append(params, p.name+" "+p.typ)
	}
	types := map[string]string{}
	for i, c := range cols {
		types[c] = rowTypes[i]
	}
	for _, c := range claimedCols {
		out = append(out, "up_"+c+" "+types[c])
	}
	for i, c := range cols {
		out = append(out, "seen_"+c+" "+rowTypes[i])
	}
	for _, t := range rowTypes {
		nulls = append(nulls, "NULL::"+t)
	}
	out = append(out, "seen_expired boolean", "db_now timestamptz")
	body := claimSQL
	for i := len(claimParams); i >= 1; i-- { // $9 before $1
		body = strings.ReplaceAll(body, "$"+string(rune('0'+i)), claimParams[i-1].name)
	}
	return `-- The claim as a function: see claimfunc.go.
CREATE OR REPLACE FUNCTION {s}.` + claimFunction + `(` + strings.Join(params, ", ") + `)
RETURNS TABLE (` + strings.Join(out, ", ") + `)
LANGUAGE plpgsql AS $claim$
#variable_conflict use_column
BEGIN
	-- A new key: insert its Running row, and that is the claim.
	RETURN QUERY
	INSERT INTO {s}.oke_idempotency AS t
		(tenant, principal, flow, idem_key, fingerprint, state, owner, lease_until, expires_at, created_at, run_id)
	VALUES (p_tenant, p_principal, p_flow, p_key, p_fp, 1, p_owner,
		now() + p_lease * interval '1 microsecond', now() + p_ttl * interval '1 microsecond', now(), p_run_id)
	ON CONFLICT (tenant, principal, flow, idem_key) DO NOTHING
	RETURNING ` + qualified("t", claimedCols) + `, ` + strings.Join(nulls, ", ") + `, NULL::boolean, now();
	IF FOUND THEN
		RETURN;
	END IF;
	-- The key exists: the whole claim.
	RETURN QUERY` + body + `;
END
$claim$`
}
