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

-- Small writes (a note appended) each add a segment to the inverted
-- indexes, and every lookup reads every segment: the indexer asks for a
-- merge after each small write, and with this any two segments of a level
-- are merged (see memory/index.rs, `merge_small_segments`).
INSERT INTO items_fts (items_fts, rank) VALUES ('usermerge', 2);
INSERT INTO headings_fts (headings_fts, rank) VALUES ('usermerge', 2);
