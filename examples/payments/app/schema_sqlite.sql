-- The payments demo's business data in SQLite (the default; schema_postgres.sql
-- is the -postgres flavour). Every statement is idempotent: it runs
-- on every start.

CREATE TABLE IF NOT EXISTS charges (
	id         TEXT PRIMARY KEY DEFAULT ('ch_' || lower(hex(randomblob(12)))),
	amount     INTEGER NOT NULL CHECK (amount > 0),
	currency   TEXT NOT NULL,
	tenant     TEXT NOT NULL DEFAULT 'default',
	principal  TEXT NOT NULL DEFAULT 'anon',
	created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- A charge is its tenant's: GET /charges lists one tenant's, newest first
-- (the index holds the rowid, so it serves the ORDER BY rowid too).
CREATE INDEX IF NOT EXISTS charges_by_tenant ON charges (tenant);

-- Refunds, written by payments.refund with the id it drew in a step of its
-- own: INSERT … ON CONFLICT (id) DO NOTHING adds one row however often the
-- step runs. (A folder made before provider_id existed gets the column from
-- migrate.) A charge has at most one refund: migrate adds the unique index
-- refunds_one_per_charge on charge_id (see oneRefundPerCharge in db.go).
CREATE TABLE IF NOT EXISTS refunds (
	id          TEXT PRIMARY KEY,
	charge_id   TEXT NOT NULL REFERENCES charges (id),
	amount      INTEGER NOT NULL,
	provider_id TEXT NOT NULL DEFAULT '',
	created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- The fake refund provider's own books (served at /_provider/refunds): one
-- refund per Idempotency-Key; requests counts how many calls carried the key.
CREATE TABLE IF NOT EXISTS provider_refunds (
	idempotency_key TEXT PRIMARY KEY,
	id              TEXT NOT NULL UNIQUE DEFAULT ('pr_' || lower(hex(randomblob(12)))),
	charge_id       TEXT NOT NULL,
	amount          INTEGER NOT NULL,
	currency        TEXT NOT NULL,
	reference       TEXT NOT NULL,
	requests        INTEGER NOT NULL DEFAULT 1,
	created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE IF NOT EXISTS slow_rows (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	ms         INTEGER NOT NULL,
	created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE IF NOT EXISTS notes (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	text       TEXT NOT NULL,
	created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Rows written by POST /fail {"when":"after"} before it fails.
CREATE TABLE IF NOT EXISTS fail_writes (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	stage      TEXT NOT NULL,
	created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- How many times step i of the pipeline tagged tag ran.
CREATE TABLE IF NOT EXISTS pipeline_counts (
	tag        TEXT NOT NULL,
	step       INTEGER NOT NULL,
	executions INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tag, step)
);

CREATE TABLE IF NOT EXISTS reminders (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	recipient  TEXT NOT NULL,
	delay_ms   INTEGER NOT NULL,
	due_at     TEXT NOT NULL,
	sent       INTEGER NOT NULL DEFAULT 0,
	sent_at    TEXT,
	created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Provider webhook deliveries. The UNIQUE event id backs up the webhook
-- binding's dedupe: inserts use ON CONFLICT (event_id) DO NOTHING.
CREATE TABLE IF NOT EXISTS webhook_events (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	event_id    TEXT NOT NULL UNIQUE,
	type        TEXT NOT NULL,
	payload     TEXT NOT NULL,
	received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
