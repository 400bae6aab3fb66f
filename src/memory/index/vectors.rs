//! The items' sentence vectors: which are missing, storing a batch, and
//! brute-force similarity to a query vector.
//!
//! A vector is stored with the key of the model that made it; only
//! vectors of the current model are compared or counted as present, so a
//! model change re-embeds everything and never mixes spaces. Vectors go
//! with their items (the indexer deletes both).

use almanac_embed::Quantized;
use rusqlite::params;

use super::Index;
use crate::memory::embed::{EmbedError, Embedder};
use crate::store::StoreError;

/// Texts per provider call while filling in vectors.
pub(crate) const EMBED_BATCH: usize = 64;

/// What the index holds for one model.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VectorCounts {
    pub with_vector: usize,
    pub without_vector: usize,
}

/// Why vectors could not be filled in.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FillError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

impl Index {
    /// Items without a vector of `model`, newest first, at most `limit`:
    /// `(id, text to embed)`.
    pub(crate) fn missing_vectors(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT i.id, i.body FROM items i
             WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.item_id = i.id AND v.model = ?1)
             ORDER BY i.id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![model, limit as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Stores vectors of `model`; ids whose item is gone are skipped.
    pub(crate) fn store_vectors(
        &mut self,
        model: &str,
        vectors: &[(i64, Quantized)],
    ) -> Result<(), StoreError> {
        let tx = self
            .store
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut put = tx.prepare_cached(
                "INSERT OR REPLACE INTO vectors (item_id, model, vec)
                 SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM items WHERE id = ?1)",
            )?;
            for (id, v) in vectors {
                put.execute(params![id, model, v.to_bytes()])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// How many items have a vector of `model`, and how many not.
    pub(crate) fn vector_counts(&self, model: &str) -> Result<VectorCounts, StoreError> {
        let conn = &self.store.conn;
        let items: i64 = conn.query_row("SELECT count(*) FROM items", [], |r| r.get(0))?;
        let with: i64 = conn.query_row(
            "SELECT count(*) FROM vectors WHERE model = ?1",
            [model],
            |r| r.get(0),
        )?;
        Ok(VectorCounts {
            with_vector: with as usize,
            without_vector: (items - with).max(0) as usize,
        })
    }

    /// Embeds up to `limit` items that lack a vector of `embedder`'s
    /// model, newest first, `EMBED_BATCH` at a time; each batch is stored
    /// as one transaction (an interrupted fill keeps what it finished).
    /// `progress` hears the running count. Returns how many it embedded.
    pub(crate) fn fill_vectors(
        &mut self,
        embedder: &dyn Embedder,
        limit: usize,
        mut progress: impl FnMut(usize),
    ) -> Result<usize, FillError> {
        let model = embedder.key();
        let mut done = 0;
        while done < limit {
            let batch = self.missing_vectors(&model, EMBED_BATCH.min(limit - done))?;
            if batch.is_empty() {
                break;
            }
            let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
            let vectors = embedder.embed(&texts)?;
            let stored: Vec<(i64, Quantized)> = batch
                .iter()
                .zip(&vectors)
                .map(|((id, _), v)| (*id, Quantized::new(v)))
                .collect();
            self.store_vectors(&model, &stored)?;
            done += batch.len();
            progress(done);
        }
        Ok(done)
    }

    /// The cosine similarity of every item with a vector of `model` to
    /// `query` (a unit vector), by brute force over int8 vectors.
    pub(crate) fn similarities(
        &self,
        model: &str,
        query: &[f32],
    ) -> Result<Vec<(i64, f32)>, StoreError> {
        let query = Quantized::new(query);
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT item_id, vec FROM vectors WHERE model = ?1")?;
        let mut rows = stmt.query([model])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let bytes = row.get_ref(1)?.as_blob().unwrap_or_default();
            let Some((scale, parts)) = bytes.split_first_chunk::<4>() else {
                continue;
            };
            let scale = f32::from_le_bytes(*scale);
            let parts: &[i8] = bytemuck_i8(parts);
            if parts.len() != query.parts.len() {
                continue;
            }
            let dot = almanac_embed::dot_i8(&query.parts, parts) as f32 * scale * query.scale;
            out.push((id, dot));
        }
        Ok(out)
    }
}

/// The bytes of a stored vector as int8 parts (same size and alignment).
fn bytemuck_i8(bytes: &[u8]) -> &[i8] {
    // SAFETY: u8 and i8 have the same size and alignment, and every bit
    // pattern is valid for both.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<i8>(), bytes.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::index::SyncMode;
    use crate::memory::index::search::{Query, QueryVector};
    use crate::memory::index::tests as tests_support;

    /// Vectors from words: each word lights one of 32 dimensions, and
    /// the words of a synonym group light the same one — a model in
    /// miniature, enough to check the plumbing.
    struct Words {
        calls: std::sync::Mutex<Vec<usize>>,
        model: &'static str,
    }

    const SYNONYMS: [&[&str]; 2] = [&["car", "automobile", "vehicle"], &["doctor", "physician"]];

    fn vector_of(text: &str) -> Vec<f32> {
        let mut v = vec![0f32; 32];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let word = word.to_lowercase();
            let slot = SYNONYMS
                .iter()
                .position(|g| g.contains(&word.as_str()))
                .unwrap_or_else(|| 2 + crate::paths::fnv1a64(word.as_bytes()) as usize % 30);
            v[slot] += 1.0;
        }
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.into_iter().map(|x| x / n).collect()
    }

    impl Embedder for Words {
        fn provider(&self) -> &'static str {
            "test"
        }
        fn model(&self) -> &str {
            self.model
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.lock().unwrap().push(texts.len());
            Ok(texts.iter().map(|t| vector_of(t)).collect())
        }
    }

    fn words(model: &'static str) -> Words {
        Words {
            calls: Default::default(),
            model,
        }
    }

    const NOTES: &str = "# 2026-11-01\n\n- [2026-11-01 09:00] Automobile serviced\n- [2026-11-01 10:00] Standup moved to 9am\n- [2026-11-01 11:00] Physician called\n";

    #[test]
    fn vectors_are_filled_once_dropped_with_their_items_and_replaced_for_a_new_model() {
        let f = tests_support::fixture(&[("memory/2026-11-01.md", NOTES)]);
        let mut idx = tests_support::open(&f);
        idx.sync(SyncMode::Full, tests_support::wall_ns()).unwrap();
        let a = words("a");
        assert_eq!(idx.fill_vectors(&a, 2, |_| {}).unwrap(), 2);
        assert_eq!(idx.vector_counts("test/a").unwrap().without_vector, 1);
        assert_eq!(idx.fill_vectors(&a, usize::MAX, |_| {}).unwrap(), 1);
        assert_eq!(idx.fill_vectors(&a, usize::MAX, |_| {}).unwrap(), 0);
        assert_eq!(*a.calls.lock().unwrap(), vec![2, 1]);
        // An edited file: its items are new, and so are their vectors.
        let path = f.root.join("memory/2026-11-01.md");
        crate::durable::atomic_replace(
            &path,
            NOTES.replace("serviced", "washed").as_bytes(),
            0o600,
        )
        .unwrap();
        idx.sync(SyncMode::Full, tests_support::wall_ns()).unwrap();
        let counts = idx.vector_counts("test/a").unwrap();
        assert_eq!((counts.with_vector, counts.without_vector), (0, 3));
        let stale: i64 = idx
            .store
            .conn
            .query_row("SELECT count(*) FROM vectors", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stale, 0, "vectors of deleted items stay behind");
        // Another model: its own vectors; the first model's are replaced.
        let b = words("b");
        assert_eq!(idx.fill_vectors(&b, usize::MAX, |_| {}).unwrap(), 3);
        assert_eq!(idx.vector_counts("test/a").unwrap().with_vector, 0);
        assert_eq!(idx.vector_counts("test/b").unwrap().with_vector, 3);
    }

    #[test]
    fn a_hybrid_search_finds_a_note_by_meaning_and_reports_both_scores() {
        let f = tests_support::fixture(&[("memory/2026-11-01.md", NOTES)]);
        let mut idx = tests_support::open(&f);
        idx.sync(SyncMode::Full, tests_support::wall_ns()).unwrap();
        let m = words("a");
        idx.fill_vectors(&m, usize::MAX, |_| {}).unwrap();
        let text = "car doctor";
        let qv = QueryVector {
            model: m.key(),
            vector: vector_of(text),
        };
        let lexical = idx
            .search_with(&Query {
                text,
                ..Query::default()
            })
            .unwrap();
        assert!(lexical.hits.is_empty(), "no note has these words");
        let hybrid = idx
            .search_with(&Query {
                text,
                vector: Some(&qv),
                ..Query::default()
            })
            .unwrap();
        let found: Vec<&str> = hybrid.hits.iter().map(|h| h.body.as_str()).collect();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().any(|b| b.contains("Automobile")));
        assert!(found.iter().any(|b| b.contains("Physician")));
        for hit in &hybrid.hits {
            assert!(hit.vector_score.unwrap() > 0.4, "{hit:?}");
            assert_eq!(hit.text_score, Some(0.0));
        }
        // Vectors of another model are never compared.
        let other = QueryVector {
            model: "test/b".into(),
            vector: vector_of(text),
        };
        let none = idx
            .search_with(&Query {
                text,
                vector: Some(&other),
                ..Query::default()
            })
            .unwrap();
        assert!(none.hits.is_empty());
    }
}
