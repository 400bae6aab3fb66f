-- Where the indexer's last read of a file ended, so that a file which
-- only grew at its end is read from its old end alone (see
-- memory/index.rs, `index_file`).
-- tail_hash: hash of the last bytes indexed (at most 4 KiB before the end);
-- resume: the parser's state at the end (open headings and code fence,
-- lines read), JSON; NULL when unknown (the file is then read whole);
-- unverified: 1 when the content hash was extended over appended bytes
-- without reading the older part again (a full scan reads it whole).
ALTER TABLE files ADD COLUMN tail_hash INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN resume TEXT;
ALTER TABLE files ADD COLUMN unverified INTEGER NOT NULL DEFAULT 0;
