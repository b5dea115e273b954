-- 003_next_attempts: a run counts the executions that began its next step
-- (driver.Run.NextAttempts) in its own row, kept by CreateRun, SaveStep and
-- AcquireRun in the statements they already run, instead of a StartStep
-- upsert into oke_step_starts per step.

ALTER TABLE oke_runs ADD COLUMN next_attempts integer NOT NULL DEFAULT 0;

-- Unfinished runs carry over the count an older oke kept for their next step
-- (the one after their last saved step). A run that had not begun that step
-- yet keeps 0, one fewer than this oke would have counted: the next
-- AcquireRun makes it 1, as an older oke's StartStep would have. Finished
-- runs need none (their next step never came).
UPDATE oke_runs r SET next_attempts = a.attempts
FROM oke_step_starts a
WHERE a.run_id = r.id AND r.status IN (1, 2)
  AND a.seq = (SELECT coalesce(max(s.seq), 0) + 1 FROM oke_steps s WHERE s.run_id = r.id);

-- oke_step_starts stays: this oke neither reads nor writes it (retention
-- still deletes a dropped run's rows), so that an older oke still running
-- against this schema during a rolling upgrade keeps working. A later
-- migration can drop it.
