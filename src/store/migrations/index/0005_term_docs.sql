-- How many items hold a very common term, for the terms a search found
-- common: their posting lists are read only in part, and counting one
-- would read it whole. The indexer keeps each count exact as items are
-- added and removed (see memory/index.rs, `TermDocs`); like everything
-- here it is derived, and a rebuild starts it empty.
CREATE TABLE term_docs (
    term TEXT PRIMARY KEY,
    docs INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
