-- Canonical store: facts that exist nowhere else (task ledger, schedules'
-- run history, …). Each later feature adds its tables in a new file.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
