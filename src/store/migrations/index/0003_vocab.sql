-- How many items hold each term, read straight from the inverted index:
-- lets a search see that a word is very common before reading its whole
-- posting list.
CREATE VIRTUAL TABLE items_vocab USING fts5vocab(items_fts, 'row');
