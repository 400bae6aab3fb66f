-- Scheduled jobs as `cron/jobs.json` held them when they were last read:
-- a derived copy for fast listing, rebuilt from the file whenever the
-- file's fingerprint (size, times, inode) differs from the one recorded.
-- Deleting these rows loses nothing.
CREATE TABLE cron_index (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    -- The job store the rows were read from.
    store_path   TEXT NOT NULL,
    size         INTEGER NOT NULL,
    mtime_ns     INTEGER NOT NULL,
    ctime_ns     INTEGER NOT NULL,
    inode        INTEGER NOT NULL,
    dev          INTEGER NOT NULL,
    -- Next runs of cron expressions without a zone are in this one.
    host_zone    TEXT NOT NULL,
    -- What reading the file reported (a JSON list of strings).
    warnings     TEXT NOT NULL,
    -- Rows of cron_jobs, and of those the enabled ones.
    jobs         INTEGER NOT NULL,
    enabled_jobs INTEGER NOT NULL
) STRICT;

CREATE TABLE cron_jobs (
    row_id         INTEGER PRIMARY KEY,
    -- Place in the file.
    position       INTEGER NOT NULL,
    job_id         TEXT NOT NULL,
    name           TEXT NOT NULL,
    -- The name folded to lower case, for sorting.
    name_key       TEXT NOT NULL,
    enabled        INTEGER NOT NULL,
    -- The schedule in a few words.
    schedule       TEXT NOT NULL,
    next_run_at_ms INTEGER,
    -- next_run_at_ms, or the largest integer when there is none (last).
    next_key       INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    -- The job as listed (JSON).
    job            TEXT NOT NULL
) STRICT;

-- What `--query` looks in, per row of cron_jobs: its lower-case id, name,
-- description and schedule. Apart, so a search reads only this.
CREATE TABLE cron_search (
    row_id INTEGER PRIMARY KEY,
    search TEXT NOT NULL
) STRICT;

CREATE INDEX cron_jobs_id ON cron_jobs (job_id);
CREATE INDEX cron_jobs_enabled_next ON cron_jobs (enabled, next_key, name_key, position);
CREATE INDEX cron_jobs_next ON cron_jobs (next_key, name_key, position);
CREATE INDEX cron_jobs_updated ON cron_jobs (updated_at_ms);
CREATE INDEX cron_jobs_name ON cron_jobs (name_key, position);
