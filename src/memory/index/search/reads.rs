//! What ranking reads from the index: the window of distinct candidate
//! texts, the items of a narrow day range, the very common words (counted
//! once, their lists read in part), stored terms, neighbours, entities
//! the query names, and the notes of a day range.

use std::collections::{HashMap, HashSet};

use rusqlite::OptionalExtension;

use super::super::{Hit, Identity, Index, Neighbor, id_array};
use super::{Filter, MAX_RESULTS};
use crate::memory::entities;
use crate::memory::files::FileKind;
use crate::memory::when::DayRange;
use crate::store::StoreError;

#[cfg(test)]
thread_local! {
    /// Neighbour lookups made on this thread (the ranking's order is
    /// tested by it).
    pub(super) static NEIGHBOR_LOOKUPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Index {
    /// The best `window` distinct texts among `candidates` (best first)
    /// that pass `filter`, preferring the long-term copy of a text, read
    /// whole for scoring. The first chunk (usually all it takes) is read
    /// whole at once: its rows are mostly read from disk for the first
    /// time, and a second pass over them would cost as much again.
    pub(super) fn distinct_window(
        &self,
        candidates: &[(i64, f64)],
        window: usize,
        filter: &Filter,
    ) -> Result<Vec<(Hit, String)>, StoreError> {
        let mut rows: HashMap<i64, (Hit, String)> = HashMap::new();
        let mut chosen: HashMap<i64, (i64, bool)> = HashMap::new(); // norm_hash -> (id, long-term)
        let mut next = 0;
        while chosen.len() < window && next < candidates.len() {
            // The first chunk is the window itself; later ones (reached only
            // when copies or a filter used it up) are larger.
            let chunk = if next == 0 { window } else { window * 4 };
            let ids: Vec<i64> = candidates[next..(next + chunk).min(candidates.len())]
                .iter()
                .map(|(id, _)| *id)
                .collect();
            let identities = if next == 0 {
                rows = self.scoring_rows(ids.iter().copied())?;
                rows.iter()
                    .map(|(id, (hit, _))| {
                        let identity = Identity {
                            norm_hash: hit.norm_hash,
                            file_id: hit.file_id,
                            day: hit.day.clone(),
                        };
                        (*id, identity)
                    })
                    .collect()
            } else {
                self.identities(&ids)?
            };
            next += ids.len();
            for id in ids {
                let Some(identity) = identities.get(&id) else {
                    continue;
                };
                if !filter.admits_identity(identity) {
                    continue;
                }
                let long_term = filter.long_term_files.contains(&identity.file_id);
                match chosen.get(&identity.norm_hash) {
                    None if chosen.len() >= window => {}
                    None => {
                        chosen.insert(identity.norm_hash, (id, long_term));
                    }
                    Some(&(_, false)) if long_term => {
                        chosen.insert(identity.norm_hash, (id, true));
                    }
                    Some(_) => {}
                }
            }
        }
        let missing: Vec<i64> = chosen
            .values()
            .map(|(id, _)| *id)
            .filter(|id| !rows.contains_key(id))
            .collect();
        if !missing.is_empty() {
            rows.extend(self.scoring_rows(missing.into_iter())?);
        }
        Ok(chosen
            .into_values()
            .filter_map(|(id, _)| rows.remove(&id))
            .collect())
    }

    /// The ids of the items in `range` when there are few of them
    /// (`None` for an open or wide range).
    pub(super) fn ids_in_narrow_range(
        &self,
        range: &DayRange,
    ) -> Result<Option<HashSet<i64>>, StoreError> {
        const NARROW: i64 = 20_000;
        if range.is_open() {
            return Ok(None);
        }
        let since = range.since.map(|d| d.to_string()).unwrap_or_default();
        let until = range
            .until
            .map(|d| d.to_string())
            .unwrap_or_else(|| "9999-12-31".to_string());
        let conn = &self.store.conn;
        let count: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM items WHERE day >= ?1 AND day <= ?2 LIMIT ?3)",
            )?
            .query_row(rusqlite::params![since, until, NARROW + 1], |r| r.get(0))?;
        if count > NARROW {
            return Ok(None);
        }
        let mut stmt = conn.prepare_cached("SELECT id FROM items WHERE day >= ?1 AND day <= ?2")?;
        let ids = stmt.query_map(rusqlite::params![since, until], |r| r.get::<_, i64>(0))?;
        Ok(Some(ids.collect::<Result<_, _>>()?))
    }

    /// The query terms held by more than `cap` items and in no heading,
    /// with how many items hold them.
    pub(super) fn common_terms(
        &self,
        query_terms: &[String],
        cap: usize,
    ) -> Result<Vec<(usize, usize)>, StoreError> {
        let mut out = Vec::new();
        for (i, term) in query_terms.iter().enumerate() {
            if let Some(docs) = self.docs_if_more_than(term, cap)?
                && !self.has_term("headings_fts", term)?
            {
                out.push((i, docs));
            }
        }
        Ok(out)
    }

    /// How many items hold `term`, when more than `cap` do. A count kept
    /// in `term_docs` answers at once; otherwise at most `cap + 1`
    /// postings are counted, and a common term is counted in full once and
    /// its count kept (the indexer keeps it exact from then on).
    fn docs_if_more_than(&self, term: &str, cap: usize) -> Result<Option<usize>, StoreError> {
        let conn = &self.store.conn;
        let kept: Option<i64> = conn
            .prepare_cached("SELECT docs FROM term_docs WHERE term = ?1")?
            .query_row([term], |r| r.get(0))
            .optional()?;
        if let Some(docs) = kept {
            return Ok((docs as usize > cap).then_some(docs as usize));
        }
        let phrase = format!("\"{}\"", term.replace('"', "\"\""));
        let upto: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM items_fts WHERE items_fts MATCH ?1 LIMIT ?2)",
            )?
            .query_row(rusqlite::params![phrase, cap as i64 + 1], |r| r.get(0))?;
        if upto as usize <= cap {
            return Ok(None);
        }
        if super::super::is_plain_term(term) {
            // Inside a search's read transaction the count is kept once
            // that has ended (see `Index::search_with`).
            if !conn.is_autocommit() {
                self.uncounted.borrow_mut().push(term.to_string());
            } else if let Some(docs) = self.keep_docs(term)? {
                return Ok(Some(docs));
            }
        }
        Ok(Some(self.count_docs(term)?))
    }

    /// Items holding `term`, read from the whole posting list.
    pub(in crate::memory::index) fn count_docs(&self, term: &str) -> Result<usize, StoreError> {
        let docs: i64 = self
            .store
            .conn
            .prepare_cached("SELECT doc FROM items_vocab WHERE term = ?1")?
            .query_row([term], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        Ok(docs as usize)
    }

    /// Counts `term` in full and keeps the count in `term_docs`, under the
    /// write lock so that no write falls between the two. `None` when the
    /// index cannot be written now: another process holds the write lock
    /// (a search does not wait for it) or the file is read-only; the
    /// caller counts without keeping.
    pub(in crate::memory::index) fn keep_docs(
        &self,
        term: &str,
    ) -> Result<Option<usize>, StoreError> {
        let conn = &self.store.conn;
        let wait: i64 = conn.query_row("PRAGMA busy_timeout", [], |r| r.get(0))?;
        conn.busy_timeout(std::time::Duration::ZERO)?;
        let begun =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate);
        conn.busy_timeout(std::time::Duration::from_millis(wait.max(0) as u64))?;
        let Ok(tx) = begun else {
            return Ok(None);
        };
        let docs = self.count_docs(term)?;
        let kept = tx
            .execute(
                "INSERT OR REPLACE INTO term_docs (term, docs) VALUES (?1, ?2)",
                rusqlite::params![term, docs as i64],
            )
            .and_then(|_| tx.commit());
        Ok(kept.is_ok().then_some(docs))
    }

    /// The newest `limit` items holding `term`.
    pub(super) fn newest_postings(&self, term: &str, limit: usize) -> Result<Vec<i64>, StoreError> {
        let phrase = format!("\"{}\"", term.replace('"', "\"\""));
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT rowid FROM items_fts WHERE items_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2",
        )?;
        let ids = stmt.query_map(rusqlite::params![phrase, limit as i64], |r| r.get(0))?;
        Ok(ids.collect::<Result<_, _>>()?)
    }

    /// The newest `limit` items holding every one of `all` and, when `any`
    /// is not empty, one of `any` (the inverted index intersects the lists
    /// from their newest end and stops at `limit`).
    pub(super) fn newest_with_all(
        &self,
        all: &[&str],
        any: &[&str],
        limit: usize,
    ) -> Result<Vec<i64>, StoreError> {
        let quoted = |t: &&str| format!("\"{}\"", t.replace('"', "\"\""));
        let mut expr = all.iter().map(quoted).collect::<Vec<_>>().join(" AND ");
        if !any.is_empty() {
            let any = any.iter().map(quoted).collect::<Vec<_>>().join(" OR ");
            expr = format!("({expr}) AND ({any})");
        }
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT rowid FROM items_fts WHERE items_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ids = stmt.query_map(rusqlite::params![expr, limit], |r| r.get(0))?;
        Ok(ids.collect::<Result<_, _>>()?)
    }

    /// The stored terms of `ids`.
    pub(super) fn stored_terms(&self, ids: &[i64]) -> Result<HashMap<i64, String>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT id, terms FROM items WHERE id IN rarray(?1)")?;
        let rows = stmt.query_map([id_array(ids.iter().copied())], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether any item has `term` in the column of `table`.
    pub(super) fn has_term(&self, table: &str, term: &str) -> Result<bool, StoreError> {
        let sql = format!("SELECT 1 FROM {table} WHERE {table} MATCH ?1 LIMIT 1");
        let mut stmt = self.store.conn.prepare_cached(&sql)?;
        let phrase = format!("\"{}\"", term.replace('"', "\"\""));
        Ok(stmt.exists([phrase])?)
    }

    /// Ids of the items up to `span` either side of `hit` in its file,
    /// under the same heading.
    pub(super) fn neighbors(&self, hit: &Hit, span: usize) -> Result<Vec<i64>, StoreError> {
        #[cfg(test)]
        NEIGHBOR_LOOKUPS.with(|n| n.set(n.get() + 1));
        // Both sides in one statement.
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT id FROM (SELECT id FROM items WHERE file_id = ?1 AND start_line < ?2 AND heading = ?3
                             ORDER BY start_line DESC LIMIT ?4)
             UNION ALL
             SELECT id FROM (SELECT id FROM items WHERE file_id = ?1 AND start_line > ?2 AND heading = ?3
                             ORDER BY start_line LIMIT ?4)",
        )?;
        let ids = stmt.query_map(
            rusqlite::params![hit.file_id, hit.start_line as i64, hit.heading, span as i64],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(ids.collect::<Result<_, _>>()?)
    }

    /// Adds up to `span` neighbouring items either side to each hit.
    pub(super) fn attach_context(&self, hits: &mut [Hit], span: usize) -> Result<(), StoreError> {
        for hit in hits {
            for (sql, before) in [
                (
                    "SELECT start_line, end_line, body FROM items WHERE file_id = ?1 AND start_line < ?2 AND heading = ?3 ORDER BY start_line DESC LIMIT ?4",
                    true,
                ),
                (
                    "SELECT start_line, end_line, body FROM items WHERE file_id = ?1 AND start_line > ?2 AND heading = ?3 ORDER BY start_line LIMIT ?4",
                    false,
                ),
            ] {
                let mut stmt = self.store.conn.prepare_cached(sql)?;
                let rows = stmt.query_map(
                    rusqlite::params![hit.file_id, hit.start_line as i64, hit.heading, span as i64],
                    |r| {
                        Ok(Neighbor {
                            start_line: r.get::<_, i64>(0)? as usize,
                            end_line: r.get::<_, i64>(1)? as usize,
                            body: r.get(2)?,
                        })
                    },
                )?;
                let mut found = rows.collect::<Result<Vec<_>, _>>()?;
                if before {
                    found.reverse();
                    hit.before = found;
                } else {
                    hit.after = found;
                }
            }
        }
        Ok(())
    }

    /// Keys among the query's word runs that are known entities.
    pub(super) fn known_entities(&self, text: &str) -> Result<Vec<String>, StoreError> {
        let keys = entities::query_keys(text);
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT DISTINCT entity FROM mentions WHERE entity IN rarray(?1)")?;
        let list = std::rc::Rc::new(
            keys.into_iter()
                .map(rusqlite::types::Value::Text)
                .collect::<Vec<_>>(),
        );
        let found = stmt.query_map([list], |r| r.get::<_, String>(0))?;
        let mut found = found.collect::<Result<Vec<_>, _>>()?;
        found.sort();
        Ok(found)
    }

    /// Which of `ids` mention one of `entities`.
    pub(super) fn mentioning(
        &self,
        entities: &[String],
        ids: impl Iterator<Item = i64>,
    ) -> Result<HashSet<i64>, StoreError> {
        if entities.is_empty() {
            return Ok(HashSet::new());
        }
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT DISTINCT item_id FROM mentions WHERE entity IN rarray(?1) AND item_id IN rarray(?2)",
        )?;
        let names = std::rc::Rc::new(
            entities
                .iter()
                .map(|e| rusqlite::types::Value::Text(e.clone()))
                .collect::<Vec<_>>(),
        );
        let rows = stmt.query_map(rusqlite::params![names, id_array(ids)], |r| {
            r.get::<_, i64>(0)
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Items of a day range, newest first (a query that is only a time
    /// expression).
    pub(super) fn in_range(
        &self,
        range: &DayRange,
        kinds: Option<&[FileKind]>,
        limit: usize,
    ) -> Result<Vec<Hit>, StoreError> {
        let since = range.since.map(|d| d.to_string()).unwrap_or_default();
        let until = range
            .until
            .map(|d| d.to_string())
            .unwrap_or_else(|| "9999-12-31".to_string());
        let mut stmt = self.store.conn.prepare_cached(&format!(
            "SELECT {}, 0.0 FROM items i JOIN files f ON f.id = i.file_id
             WHERE i.day >= ?1 AND i.day <= ?2
             ORDER BY i.day DESC, i.ts DESC, i.id DESC LIMIT ?3",
            super::super::HIT_COLUMNS
        ))?;
        let fetch = (limit.min(MAX_RESULTS) * 4 + 16) as i64;
        let hits = stmt
            .query_map(
                rusqlite::params![since, until, fetch],
                super::super::hit_from_row,
            )?
            .collect::<Result<Vec<_>, _>>()?;
        let hits: Vec<Hit> = hits
            .into_iter()
            .filter(|h| kinds.is_none_or(|k| k.contains(&h.kind)))
            .collect();
        Ok(super::super::dedupe(hits, limit))
    }
}
