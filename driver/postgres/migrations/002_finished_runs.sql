-- 002_finished_runs: indexes for retention (WithRetention), which deletes
-- finished runs by age and, with each, the business keys it claimed.

-- Finished runs in the order they finished.
CREATE INDEX oke_runs_finished ON oke_runs (updated_at) WHERE status IN (3, 4);
-- Claims by the run that holds them.
CREATE INDEX oke_claims_run_id ON oke_claims (run_id);
