-- 010_console: indexes for the admin surface's run listings (the console,
-- oke runs ls), which page by ID (keyset) with filters.

-- Runs of one tenant, in ID order.
CREATE INDEX IF NOT EXISTS oke_runs_tenant ON oke_runs (tenant, id);
-- The replays of a run (a run's page lists them). Most runs replay none,
-- so the index holds only those that do.
CREATE INDEX IF NOT EXISTS oke_runs_replay_of ON oke_runs (replay_of, id) WHERE replay_of <> '';
