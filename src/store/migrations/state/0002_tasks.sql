-- The background task ledger: one row per task the gateway runs (agent
-- turns, cron runs, spawned runs). Times are epoch milliseconds, each
-- record stamped from one clock (the caller's `now`).
CREATE TABLE tasks (
    task_id               TEXT PRIMARY KEY,
    runtime               TEXT NOT NULL
        CHECK (runtime IN ('subagent', 'acp', 'cli', 'cron')),
    task_kind             TEXT,
    source_id             TEXT,
    run_id                TEXT,
    -- Empty for system scope.
    requester_session_key TEXT NOT NULL DEFAULT '',
    owner_key             TEXT NOT NULL,
    scope_kind            TEXT NOT NULL CHECK (scope_kind IN ('session', 'system')),
    child_session_key     TEXT,
    parent_flow_id        TEXT,
    parent_task_id        TEXT,
    agent_id              TEXT,
    label                 TEXT,
    task                  TEXT NOT NULL,
    status                TEXT NOT NULL CHECK (status IN (
        'queued', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'lost')),
    delivery_status       TEXT NOT NULL CHECK (delivery_status IN (
        'pending', 'delivered', 'session_queued', 'failed', 'parent_missing', 'not_applicable')),
    notify_policy         TEXT NOT NULL
        CHECK (notify_policy IN ('done_only', 'state_changes', 'silent')),
    created_at            INTEGER NOT NULL,
    started_at            INTEGER,
    ended_at              INTEGER,
    last_event_at         INTEGER,
    cleanup_after         INTEGER,
    error                 TEXT,
    progress_summary      TEXT,
    terminal_summary      TEXT,
    terminal_outcome      TEXT CHECK (terminal_outcome IN ('succeeded', 'blocked')),
    -- The gateway start generation that owns a running task.
    generation            INTEGER,
    -- A running task's lease, renewed by its owner while it lives.
    lease_until           INTEGER,
    -- The session lane and the enqueue order within it.
    lane_key              TEXT,
    lane_seq              INTEGER,
    -- When a cancel of a running task was asked for; its owner stops it.
    cancel_requested_at   INTEGER,
    -- What is needed to run the task again (JSON, opaque to the ledger).
    request               TEXT CHECK (request IS NULL OR json_valid(request))
) STRICT;

CREATE INDEX tasks_status ON tasks (status);
CREATE INDEX tasks_runtime_status ON tasks (runtime, status);
CREATE UNIQUE INDEX tasks_lane_order ON tasks (lane_key, lane_seq) WHERE lane_key IS NOT NULL;
CREATE INDEX tasks_cleanup_after ON tasks (cleanup_after);
CREATE INDEX tasks_run_id ON tasks (run_id);
CREATE INDEX tasks_requester_session ON tasks (requester_session_key);
CREATE INDEX tasks_child_session ON tasks (child_session_key);
CREATE INDEX tasks_created_at ON tasks (created_at);
