-- 013_signals: the signals sent to runs (driver.Signaler, signal.go): kept
-- until a wait of the run for the name takes one (step is then the seq of
-- the run's step that took it), in send order per run (seq). A run keeps one
-- signal per key: a send repeated with the key changes nothing.
CREATE TABLE IF NOT EXISTS oke_signals (
    run_id  text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    name    text NOT NULL,
    key     text NOT NULL,
    payload bytea NOT NULL,
    sent_at timestamptz NOT NULL,
    step    integer NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, key)
);
-- A wait's take: the oldest undelivered signal of a name.
CREATE INDEX IF NOT EXISTS oke_signals_waiting ON oke_signals (run_id, name, seq) WHERE step = 0;
