-- Sentence vectors of the items, for the semantic half of hybrid search
-- (see memory/embed). Derived like everything here: removed with their
-- items, and replaced when the embedding model changes.
CREATE TABLE vectors (
    item_id INTEGER PRIMARY KEY, -- items.id
    model   TEXT NOT NULL,       -- the embedder that made it: provider/model
    vec     BLOB NOT NULL        -- f32 scale (little-endian), then int8 parts
) STRICT;
CREATE INDEX vectors_by_model ON vectors (model);
