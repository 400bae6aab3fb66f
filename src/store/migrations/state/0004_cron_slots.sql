-- The cron slot ledger: one row per scheduled slot of a job that the
-- gateway handled (ran, or recorded as missed), keyed by the job and the
-- slot's time, so no slot is ever started twice. Canonical: the runtime
-- state written back to jobs.json is derived from it.
CREATE TABLE cron_slots (
    job_id        TEXT NOT NULL,
    -- The slot's scheduled fire time (epoch ms, stagger included).
    slot_ms       INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN (
        'running', 'ok', 'error', 'skipped', 'timed_out', 'interrupted', 'missed')),
    -- The gateway start that claimed it (none for a missed slot).
    generation    INTEGER,
    claimed_at    INTEGER NOT NULL,
    started_at    INTEGER,
    ended_at      INTEGER,
    -- How the slot came to be handled: `due` (on time), `catch-up`
    -- (after the gateway was down), `manual` (cron run).
    trigger       TEXT NOT NULL CHECK (trigger IN ('due', 'catch-up', 'manual')),
    task_id       TEXT,
    error         TEXT,
    -- What was done about a missed slot, or why a run was skipped.
    note          TEXT,
    PRIMARY KEY (job_id, slot_ms)
) STRICT, WITHOUT ROWID;

CREATE INDEX cron_slots_status ON cron_slots (status) WHERE status = 'running';
CREATE INDEX cron_slots_claimed_at ON cron_slots (claimed_at);
