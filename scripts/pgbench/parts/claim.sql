-- The driver's claim (claimCallSQL in driver/postgres/claimfunc.go: the
-- function oke_claim_v2, which migration 016 makes from claimSQL) with pgbench
-- variables for its parameters. Kept in step by
-- TestPgbenchScriptsClaimLikeTheDriver; go test ./driver/postgres/ -run
-- PgbenchScripts -update-pgbench rewrites it.
SELECT * FROM oke.oke_claim_v2(:tenant, :principal, :flow, :key, :fp, :owner, :lease, :ttl, '');
