-- BEGIN and the demo's charge INSERT, inside a pipeline (oke's lazy BEGIN
-- goes with the flow's first statement): no \gset, which a pipeline cannot
-- take; the INSERT still returns the row.
BEGIN;
INSERT INTO charges (amount, currency, tenant, principal) VALUES (1000, 'usd', :tenant, :principal)
	RETURNING id, created_at;
