-- The slot ledger keeps, per job, its open slots, its latest scheduled
-- slot (where a catch-up starts) and a short history: its last 20
-- handled slots, fewer each when more than 5,000 jobs share 100,000
-- rows, never fewer than one. It no longer keeps every slot of the last
-- week. What stays of the ledger as it stands is copied into a table of
-- the same shape, which replaces it; the index on claim times, read only
-- by the pruning by age, goes.
CREATE TABLE cron_slots_kept (
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

-- Per job: how many slots, its latest scheduled one, and the oldest of
-- the newest it keeps (none when it keeps them all); then its rows from
-- that one on, its open ones and its latest scheduled one.
WITH jobs AS (
    SELECT job_id, COUNT(*) AS slots,
           MAX(CASE WHEN trigger != 'manual' THEN slot_ms END) AS latest_scheduled
    FROM cron_slots GROUP BY job_id
),
budget AS (
    SELECT max(1, min(20, 100000 / max(1, COUNT(*)))) AS per_job FROM jobs
),
bounds AS (
    SELECT job_id, latest_scheduled,
           CASE WHEN slots > (SELECT per_job FROM budget) THEN (
               SELECT s.slot_ms FROM cron_slots s WHERE s.job_id = jobs.job_id
               ORDER BY s.slot_ms DESC LIMIT 1 OFFSET (SELECT per_job FROM budget) - 1)
           END AS oldest_kept
    FROM jobs
)
INSERT INTO cron_slots_kept
SELECT s.job_id, s.slot_ms, s.status, s.generation, s.claimed_at, s.started_at,
       s.ended_at, s.trigger, s.task_id, s.error, s.note
FROM bounds b JOIN cron_slots s ON s.job_id = b.job_id
WHERE b.oldest_kept IS NULL OR s.slot_ms >= b.oldest_kept
   OR s.status = 'running' OR s.slot_ms IS b.latest_scheduled;

DROP TABLE cron_slots;
ALTER TABLE cron_slots_kept RENAME TO cron_slots;

CREATE INDEX cron_slots_status ON cron_slots (status) WHERE status = 'running';
