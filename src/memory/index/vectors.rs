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

    /// Every vector of `model` in reading order (file, line), ready to be
    /// compared with queries ([`VectorSet::similarities`]).
    pub(crate) fn vector_set(&self, model: &str) -> Result<VectorSet, StoreError> {
        // Driven by the items' (file, line) index, one vector lookup each.
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT v.item_id, i.file_id, i.heading, v.vec FROM items i
             JOIN vectors v ON v.item_id = i.id AND v.model = ?1
             ORDER BY i.file_id, i.start_line",
        )?;
        let mut rows = stmt.query([model])?;
        let mut set = VectorSet::default();
        let mut last: Option<(i64, String)> = None;
        let mut run = 0u32;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let file: i64 = row.get(1)?;
            let heading = row.get_ref(2)?.as_str().unwrap_or_default();
            let bytes = row.get_ref(3)?.as_blob().unwrap_or_default();
            let Some((scale, parts)) = bytes.split_first_chunk::<4>() else {
                continue;
            };
            let scale = f32::from_le_bytes(*scale);
            if !scale.is_finite() {
                continue;
            }
            let same = last
                .as_ref()
                .is_some_and(|(f, h)| *f == file && h.as_str() == heading);
            if !same {
                run += 1;
                last = Some((file, heading.to_string()));
            }
            set.push(id, run, scale, bytemuck_i8(parts));
        }
        set.finish();
        Ok(set)
    }

    /// The similarity of every item with a vector of `model` to `query`
    /// (a unit vector): see [`VectorSet::similarities`].
    pub(crate) fn similarities(
        &self,
        model: &str,
        query: &[f32],
    ) -> Result<Vec<(i64, f32)>, StoreError> {
        Ok(self.vector_set(model)?.similarities(query))
    }
}

/// Items' int8 vectors of one model in reading order, with what a query
/// needs beyond them worked out once: the length of each item's window
/// (the item and its neighbours under the same heading).
///
/// A short line often says little on its own ("Yes, last Tuesday!"): its
/// meaning is in the lines around it. So an item is as similar to a query
/// as the better of its own vector and the mean of its window's vectors
/// (neighbouring items, same file and heading). The window needs no model
/// run of its own and never goes stale: it is computed from the vectors
/// there are, whichever items come and go.
#[derive(Debug, Default, Clone)]
pub(crate) struct VectorSet {
    ids: Vec<i64>,
    /// Items of one run are neighbours (same file and heading).
    runs: Vec<u32>,
    scales: Vec<f32>,
    /// Every vector's parts, one after another.
    parts: Vec<i8>,
    dims: usize,
    /// Length of the sum of each item's window vectors; 0 for an item
    /// alone in its run.
    window_norms: Vec<f32>,
}

impl VectorSet {
    /// Adds the next vector in reading order; one of another length than
    /// the first is skipped.
    pub(crate) fn push(&mut self, id: i64, run: u32, scale: f32, parts: &[i8]) {
        if self.ids.is_empty() {
            self.dims = parts.len();
        }
        if parts.len() != self.dims || parts.is_empty() {
            return;
        }
        self.ids.push(id);
        self.runs.push(run);
        self.scales.push(scale);
        self.parts.extend_from_slice(parts);
    }

    /// Works out the window lengths once every vector is in: each
    /// vector's own length, and each dot product of neighbours one and two
    /// apart, computed once.
    pub(crate) fn finish(&mut self) {
        let n = self.ids.len();
        let dot = |a: usize, b: usize| {
            almanac_embed::dot_i8(self.vector(a), self.vector(b)) as f32
                * self.scales[a]
                * self.scales[b]
        };
        let same_run = |a: usize, b: usize| self.runs[a] == self.runs[b];
        let own: Vec<f32> = (0..n).map(|i| dot(i, i)).collect();
        // next[i]: item i with item i + 1; skip[i]: item i with item i + 2.
        let next: Vec<f32> = (0..n)
            .map(|i| {
                if i + 1 < n && same_run(i, i + 1) {
                    dot(i, i + 1)
                } else {
                    0.0
                }
            })
            .collect();
        let skip: Vec<f32> = (0..n)
            .map(|i| {
                if i + 2 < n && same_run(i, i + 2) {
                    dot(i, i + 2)
                } else {
                    0.0
                }
            })
            .collect();
        self.window_norms = (0..n)
            .map(|i| {
                let window: Vec<usize> = self.window(i).collect();
                if window.len() < 2 {
                    return 0.0;
                }
                let first = window[0];
                let mut squared: f32 = window.iter().map(|&j| own[j]).sum();
                for &j in &window[..window.len() - 1] {
                    squared += 2.0 * next[j];
                }
                if window.len() == 3 {
                    squared += 2.0 * skip[first];
                }
                squared.max(0.0).sqrt()
            })
            .collect();
    }

    /// How many vectors the set holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    fn vector(&self, i: usize) -> &[i8] {
        &self.parts[i * self.dims..(i + 1) * self.dims]
    }

    /// The item and its neighbours either side in the same run.
    fn window(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let run = self.runs[i];
        let first = if i > 0 && self.runs[i - 1] == run {
            i - 1
        } else {
            i
        };
        let last = if i + 1 < self.ids.len() && self.runs[i + 1] == run {
            i + 1
        } else {
            i
        };
        first..=last
    }

    /// Each item's similarity to `query` (a unit vector): the better of
    /// its own cosine and its window's, by brute force over int8 parts.
    pub(crate) fn similarities(&self, query: &[f32]) -> Vec<(i64, f32)> {
        let query = Quantized::new(query);
        if query.parts.len() != self.dims {
            return Vec::new();
        }
        let own: Vec<f32> = (0..self.ids.len())
            .map(|i| {
                almanac_embed::dot_i8(&query.parts, self.vector(i)) as f32
                    * self.scales[i]
                    * query.scale
            })
            .collect();
        (0..self.ids.len())
            .map(|i| {
                let norm = self.window_norms[i];
                let mut best = own[i];
                if norm > 0.0 {
                    let summed: f32 = self.window(i).map(|j| own[j]).sum();
                    best = best.max(summed / norm);
                }
                (self.ids[i], best)
            })
            .collect()
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

    const NOTES: &str = "# 2026-11-01\n\n- [2026-11-01 09:00] Automobile serviced\n- [2026-11-01 10:00] Physician called\n- [2026-11-01 11:00] Standup moved to 9am\n";

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

    /// A set from `(id, run, vector)` rows in reading order.
    fn set_of(rows: &[(i64, u32, &[f32])]) -> VectorSet {
        let mut set = VectorSet::default();
        for (id, run, v) in rows {
            let q = Quantized::new(v);
            set.push(*id, *run, q.scale, &q.parts);
        }
        set.finish();
        set
    }

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn similarity_of(set: &VectorSet, query: &[f32], id: i64) -> f32 {
        set.similarities(query)
            .into_iter()
            .find(|(i, _)| *i == id)
            .unwrap()
            .1
    }

    #[test]
    fn a_line_is_as_close_as_its_window_when_that_is_closer() {
        // Item 2 says nothing on its own (orthogonal to the query); its
        // neighbours speak of the query's subject.
        let query = unit(&[1.0, 0.0, 0.0, 0.0]);
        let near = unit(&[0.8, 0.6, 0.0, 0.0]);
        let reply = unit(&[0.0, 0.0, 1.0, 0.0]);
        let rows: [(i64, u32, &[f32]); 3] = [(1, 1, &near), (2, 1, &reply), (3, 1, &near)];
        let set = set_of(&rows);
        assert_eq!(set.len(), 3);
        let expected = (0.8 + 0.0 + 0.8) / {
            let sum = [1.6f32, 1.2, 1.0, 0.0];
            sum.iter().map(|x| x * x).sum::<f32>().sqrt()
        };
        let got = similarity_of(&set, &query, 2);
        assert!((got - expected).abs() < 0.02, "{got} vs {expected}");
        // A line closer than its window keeps its own similarity.
        let got = similarity_of(&set, &query, 1);
        assert!((got - 0.8).abs() < 0.02, "{got}");
    }

    #[test]
    fn a_window_stops_at_the_heading_and_a_lone_item_has_none() {
        let query = unit(&[1.0, 0.0, 0.0]);
        let near = unit(&[1.0, 0.0, 0.0]);
        let far = unit(&[0.0, 1.0, 0.0]);
        // Item 2 is under another heading than item 1.
        let rows: [(i64, u32, &[f32]); 3] = [(1, 1, &near), (2, 2, &far), (3, 2, &far)];
        let set = set_of(&rows);
        let got = similarity_of(&set, &query, 2);
        assert!(got.abs() < 0.02, "{got}");
        let lone = set_of(&[(7, 1, &far[..])]);
        assert!(similarity_of(&lone, &query, 7).abs() < 0.02);
        // A vector of another length than the first is left out.
        let mut mixed = set_of(&[(1, 1, &near[..])]);
        mixed.push(2, 1, 1.0, &[1, 2]);
        mixed.finish();
        assert_eq!(mixed.len(), 1);
        assert!(
            set.similarities(&[1.0, 0.0]).is_empty(),
            "query of another length"
        );
    }

    #[test]
    fn hybrid_search_finds_a_terse_reply_through_the_lines_around_it() {
        let notes = "# Trip\n\n- The automobile\n- Sure, done.\n- Automobile, blue\n\n# Other\n\n- Lunch with Sam\n- Paid rent\n";
        let f = tests_support::fixture(&[("memory/2026-11-01.md", notes)]);
        let mut idx = tests_support::open(&f);
        idx.sync(SyncMode::Full, tests_support::wall_ns()).unwrap();
        let m = words("a");
        idx.fill_vectors(&m, usize::MAX, |_| {}).unwrap();
        let qv = QueryVector {
            model: m.key(),
            vector: vector_of("car"),
        };
        let hybrid = idx
            .search_with(&Query {
                text: "car",
                vector: Some(&qv),
                ..Query::default()
            })
            .unwrap();
        let found: Vec<&str> = hybrid.hits.iter().map(|h| h.body.as_str()).collect();
        assert!(found.contains(&"Sure, done."), "{found:?}");
        assert!(!found.iter().any(|b| b.contains("Lunch")), "{found:?}");
        // Ranks are fused: first in both lists scores 1, and the order
        // is the score order.
        let scores: Vec<f64> = hybrid.hits.iter().map(|h| h.score).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        assert!(scores.iter().all(|s| *s > 0.0 && *s <= 1.0), "{scores:?}");
    }

    #[test]
    fn fusion_ranks_first_in_both_lists_at_one_and_weighs_text_more() {
        use super::super::search::fuse;
        assert!((fuse(Some(0), Some(0)) - 1.0).abs() < 1e-9);
        assert!(fuse(Some(0), None) > fuse(None, Some(0)));
        assert!(fuse(Some(3), Some(3)) > fuse(Some(3), None));
        assert!(fuse(Some(1), None) > fuse(Some(2), None));
        assert_eq!(fuse(None, None), 0.0);
    }
}
