-- Every change to `vectors`, in order, so a process keeping the vectors in
-- memory (the gateway) follows what any writer stored or deleted by
-- reading only the changes. `seq` never goes back (AUTOINCREMENT): a
-- reader that finds the rows after its last one trimmed away reads the
-- vectors again in full. Writers keep only the newest rows.
CREATE TABLE vector_log (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id INTEGER NOT NULL  -- the item whose vector was stored or deleted
) STRICT;
CREATE TRIGGER vector_log_insert AFTER INSERT ON vectors BEGIN
    INSERT INTO vector_log (item_id) VALUES (new.item_id);
END;
CREATE TRIGGER vector_log_delete AFTER DELETE ON vectors BEGIN
    INSERT INTO vector_log (item_id) VALUES (old.item_id);
END;
