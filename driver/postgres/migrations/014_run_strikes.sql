-- 014_run_strikes: dead letters. A run counts the pick-ups in a row that
-- failed without ending cleanly (driver.Run.Strikes): AcquireRun adds one
-- when it takes the run from a holder whose lease lapsed, FinishRun sets it.
-- A run whose strikes reach the app's limit is dead-lettered: status 5
-- (dead), which, like the finished statuses, is outside the due index
-- (status IN (1, 2)) and never due, until an operator resumes it.

ALTER TABLE oke_runs ADD COLUMN IF NOT EXISTS strikes integer NOT NULL DEFAULT 0;

-- ListRuns with a status filter of dead runs (the console's dead letters).
CREATE INDEX IF NOT EXISTS oke_runs_dead ON oke_runs (id) WHERE status = 5;
