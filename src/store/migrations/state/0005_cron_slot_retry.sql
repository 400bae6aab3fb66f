-- A one-shot job tried again after a passing error runs at a slot of its
-- own, triggered `retry`. SQLite cannot change a CHECK constraint in
-- place, so the table is rebuilt with the same rows.
CREATE TABLE cron_slots_next (
    job_id        TEXT NOT NULL,
    slot_ms       INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN (
        'running', 'ok', 'error', 'skipped', 'timed_out', 'interrupted', 'missed')),
    generation    INTEGER,
    claimed_at    INTEGER NOT NULL,
    started_at    INTEGER,
    ended_at      INTEGER,
    -- `due` (on time), `catch-up` (after the gateway was down), `manual`
    -- (cron run), `retry` (a one-shot's next attempt after an error).
    trigger       TEXT NOT NULL CHECK (trigger IN ('due', 'catch-up', 'manual', 'retry')),
    task_id       TEXT,
    error         TEXT,
    note          TEXT,
    PRIMARY KEY (job_id, slot_ms)
) STRICT, WITHOUT ROWID;

INSERT INTO cron_slots_next SELECT
    job_id, slot_ms, status, generation, claimed_at, started_at, ended_at,
    trigger, task_id, error, note
FROM cron_slots;

DROP TABLE cron_slots;
ALTER TABLE cron_slots_next RENAME TO cron_slots;

CREATE INDEX cron_slots_status ON cron_slots (status) WHERE status = 'running';
CREATE INDEX cron_slots_claimed_at ON cron_slots (claimed_at);
