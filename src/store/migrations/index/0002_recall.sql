-- Entity mentions and typed facts, derived from the items like everything
-- else in this database (see memory/entities.rs and the `## Retain` format
-- in almanac-markdown's retain.rs). The indexer removes them together with
-- their items.

-- `@Name` tags, speakers and capitalised names in mid-sentence in item
-- bodies (a capitalised word that only starts sentences is not kept).
CREATE TABLE mentions (
    entity  TEXT NOT NULL,      -- folded key: `the castle` for `@The-Castle`
    item_id INTEGER NOT NULL,   -- items.id
    display TEXT NOT NULL       -- as written
) STRICT;
CREATE INDEX mentions_by_entity ON mentions (entity, item_id);
CREATE INDEX mentions_by_item ON mentions (item_id);

-- Items of `## Retain` sections that follow the record format.
CREATE TABLE facts (
    item_id    INTEGER PRIMARY KEY, -- items.id
    kind       TEXT NOT NULL,       -- world | experience | opinion | observation
    confidence REAL,                -- opinions only
    entities   TEXT NOT NULL,       -- folded keys of the tags, '|'-separated
    content    TEXT NOT NULL        -- the fact without type and tags
) STRICT;
