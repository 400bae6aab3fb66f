-- Derived index of the Markdown memory files under one memory root.
-- Everything here is rebuilt from the files; deleting the database loses
-- nothing.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- One row per indexed memory file.
CREATE TABLE files (
    id       INTEGER PRIMARY KEY,
    path     TEXT NOT NULL UNIQUE, -- relative to the memory root, '/'-separated
    kind     TEXT NOT NULL,        -- long_term | daily | archive | topic
    day      TEXT,                 -- YYYY-MM-DD of a daily file
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ino      INTEGER NOT NULL,
    hash     INTEGER NOT NULL,     -- content hash
    lines    INTEGER NOT NULL
) STRICT;
CREATE INDEX files_by_kind_day ON files (kind, day);

-- Directories listed at the last sync: a changed modification time means
-- entries were added, removed or replaced.
CREATE TABLE dirs (
    path     TEXT PRIMARY KEY,     -- '' is the root
    mtime_ns INTEGER NOT NULL
) STRICT;

-- The searchable units of the files: list items (with continuation lines)
-- and other non-empty lines. Headings are not items. Item ids grow in the
-- order notes were indexed (a full build indexes oldest files first), so a
-- higher id is a newer note when scores tie.
CREATE TABLE items (
    id         INTEGER PRIMARY KEY,
    file_id    INTEGER NOT NULL,   -- files.id (deleted together by the indexer)
    start_line INTEGER NOT NULL,
    end_line   INTEGER NOT NULL,
    kind       TEXT NOT NULL,      -- item | line
    stamp      TEXT,               -- the stamp as written, normalised
    day        TEXT,               -- YYYY-MM-DD from the stamp, else the file
    ts         INTEGER,            -- unix seconds of day + time in the user's zone
    heading    TEXT NOT NULL,      -- enclosing headings joined with ' > '
    body       TEXT NOT NULL,
    terms      TEXT NOT NULL,      -- the body's index terms, space-separated
    nterms     INTEGER NOT NULL,   -- how many
    norm_hash  INTEGER NOT NULL    -- hash of the folded body, for de-duplication
) STRICT;
CREATE INDEX items_by_file ON items (file_id, start_line);
CREATE INDEX items_by_day ON items (day, ts);

-- Corpus totals for BM25 (kept current by the indexer).
CREATE TABLE totals (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    items  INTEGER NOT NULL,
    terms  INTEGER NOT NULL
) STRICT;
INSERT INTO totals (id, items, terms) VALUES (1, 0, 0);

-- Inverted indexes of the pre-tokenised terms (see memory/terms.rs) of
-- each item's body and of its headings; rowid = items.id. They only find
-- the items that contain a term (no positions or sizes are stored);
-- ranking happens in memory/index.rs. Rows are removed with FTS5's
-- 'delete' command and the terms kept in `items`.
CREATE VIRTUAL TABLE items_fts USING fts5(
    terms,
    tokenize = 'unicode61 remove_diacritics 0',
    content = '',
    detail = 'none',
    columnsize = 0
);
CREATE VIRTUAL TABLE headings_fts USING fts5(
    terms,
    tokenize = 'unicode61 remove_diacritics 0',
    content = '',
    detail = 'none',
    columnsize = 0
);
