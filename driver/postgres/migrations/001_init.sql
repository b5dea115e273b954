-- 001_init: idempotency rows, journal runs, saved steps, step attempts and
-- business-key claims. Applied by (*Driver).Migrate with search_path set to
-- the driver's schema, inside one transaction.

-- One row per Idempotency-Key in its scope (tenant, principal, flow).
-- Key parts sort bytewise (COLLATE "C") so List pages in driver.KeyLess order
-- straight off the primary key.
CREATE TABLE oke_idempotency (
    tenant            text COLLATE "C" NOT NULL,
    principal         text COLLATE "C" NOT NULL,
    flow              text COLLATE "C" NOT NULL,
    idem_key          text COLLATE "C" NOT NULL,
    fingerprint       text NOT NULL,
    state             smallint NOT NULL,          -- 1 running, 2 completed
    owner             text NOT NULL DEFAULT '',   -- '' when completed
    lease_until       timestamptz,                -- running rows only
    expires_at        timestamptz NOT NULL,
    created_at        timestamptz NOT NULL,
    completed_at      timestamptz,
    resp_status       integer,
    resp_content_type text,
    resp_location     text,
    resp_body         bytea,
    run_id            text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, principal, flow, idem_key)
);

-- Sweep finds rows whose TTL has passed.
CREATE INDEX oke_idempotency_expires_at ON oke_idempotency (expires_at);

-- One row per durable run.
CREATE TABLE oke_runs (
    id                  text COLLATE "C" PRIMARY KEY,
    flow                text NOT NULL,
    input               bytea,
    tenant              text NOT NULL,
    principal           text NOT NULL,
    status              smallint NOT NULL,      -- 1 running, 2 sleeping, 3 completed, 4 failed
    owner               text NOT NULL DEFAULT '',
    lease_until         timestamptz,
    wake_at             timestamptz,
    attempts            integer NOT NULL DEFAULT 0,
    replay_of           text NOT NULL DEFAULT '',
    parent              text NOT NULL DEFAULT '',
    event               text NOT NULL DEFAULT '',
    dedupe_key          text UNIQUE,            -- NULL when the run has none
    idem_tenant         text,                   -- NULL when no Idempotency-Key row started the run
    idem_principal      text,
    idem_flow           text,
    idem_key            text,
    result_status       integer,                -- NULL while the run has no result
    result_content_type text,
    result_location     text,
    result_body         bytea,
    error               text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

-- Due runs: only unfinished runs are ever due, and they are few next to the
-- finished ones, so a partial index keeps the scheduler's scan small.
CREATE INDEX oke_runs_unfinished ON oke_runs (wake_at) WHERE status IN (1, 2);
-- ListRuns by flow.
CREATE INDEX oke_runs_flow ON oke_runs (flow, id);

-- Saved steps, append-only, in order.
CREATE TABLE oke_steps (
    run_id      text COLLATE "C" NOT NULL,
    seq         integer NOT NULL,
    name        text NOT NULL,
    result      bytea,
    failure     bytea,
    attempts    integer NOT NULL,
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (run_id, seq)
);

-- How many attempts of each step began (StartStep), across takeovers.
CREATE TABLE oke_step_starts (
    run_id   text COLLATE "C" NOT NULL,
    seq      integer NOT NULL,
    name     text NOT NULL,
    attempts integer NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Business keys claimed by runs (oke.Claim): the first run wins for good.
CREATE TABLE oke_claims (
    claim_key  text COLLATE "C" PRIMARY KEY,
    run_id     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
