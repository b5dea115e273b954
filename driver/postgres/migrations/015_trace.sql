-- 015_trace: the trace that produced a stored answer (driver.Response.Trace)
-- and a run's (driver.Run.Trace), so that a replay's span links to the
-- request that produced its response and a resume's to the run's creator.
-- NULL when nothing was traced. Columns without a default: adding them
-- rewrites neither table, and an older oke still running against this
-- schema during a rolling upgrade writes NULL (no trace) without knowing
-- of them.

ALTER TABLE oke_idempotency ADD COLUMN IF NOT EXISTS resp_trace text;
ALTER TABLE oke_runs ADD COLUMN IF NOT EXISTS trace text;
