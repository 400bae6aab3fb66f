-- Derived index of the Markdown memory files under one memory root.
-- Everything here is rebuilt from the files; deleting the database loses
-- nothing.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- One row per indexed memory file.
CREATE TABLE files (
    path     TEXT PRIMARY KEY,   -- relative to the memory root, '/'-separated
    kind     TEXT NOT NULL,      -- long_term | daily | archive | topic
    day      TEXT,               -- YYYY-MM-DD of a daily file
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ino      INTEGER NOT NULL,
    hash     INTEGER NOT NULL,   -- content hash
    lines    INTEGER NOT NULL
) STRICT;

-- Directories listed at the last sync: a changed modification time means
-- entries were added, removed or replaced.
CREATE TABLE dirs (
    path     TEXT PRIMARY KEY,   -- '' is the root
    mtime_ns INTEGER NOT NULL
) STRICT;

-- The searchable units of the files: list items (with continuation lines)
-- and other non-empty lines. Headings are not items.
CREATE TABLE items (
    id         INTEGER PRIMARY KEY,
    path       TEXT NOT NULL REFERENCES files(path) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line   INTEGER NOT NULL,
    kind       TEXT NOT NULL,    -- item | line
    stamp      TEXT,             -- the stamp as written, normalised
    day        TEXT,             -- YYYY-MM-DD from the stamp, else the file
    ts         INTEGER,          -- unix seconds of day + time in the user's zone
    heading    TEXT NOT NULL,    -- enclosing headings joined with ' > '
    body       TEXT NOT NULL,
    norm_hash  INTEGER NOT NULL  -- hash of the folded body, for de-duplication
) STRICT;
CREATE INDEX items_by_path ON items (path, start_line);
CREATE INDEX items_by_day ON items (day);

-- Pre-tokenised terms (see memory/terms.rs); rowid = items.id.
CREATE VIRTUAL TABLE items_fts USING fts5(
    terms,
    heading_terms,
    tokenize = 'unicode61 remove_diacritics 0',
    content = '',
    contentless_delete = 1
);
