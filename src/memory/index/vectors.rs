//! The items' sentence vectors: which are missing, storing a batch, and
//! brute-force similarity to a query vector, read from the index or from
//! a [`VectorSet`] kept in memory.
//!
//! A vector is stored with the key of the model that made it; only
//! vectors of the current model are compared or counted as present, so a
//! model change re-embeds everything and never mixes spaces. Vectors go
//! with their items (the indexer deletes both).
//!
//! Every store and delete is logged (`vector_log`, by triggers), so a
//! [`VectorSet`] follows any writer of any process by reading only the
//! changes since it last looked ([`Index::catch_up`]); writers keep the
//! newest [`VECTOR_LOG_KEEP`] rows, and a set that fell further behind
//! reads the vectors again in full.
//!
//! An item is as similar to a query as the better of its own vector and
//! its window's (the item and its neighbours under the same heading, the
//! mean of their vectors): a short line often says little on its own
//! ("Yes, last Tuesday!") and its meaning is in the lines around it. The
//! window needs no model run and never goes stale: it is computed from
//! the vectors there are, whichever items come and go.

use std::collections::HashMap;

use almanac_embed::Quantized;
use rusqlite::{OptionalExtension, params};

use super::Index;
use crate::memory::embed::{EmbedError, Embedder};
use crate::store::StoreError;

/// Texts per provider call while filling in vectors.
pub(crate) const EMBED_BATCH: usize = 64;
/// Rows of `vector_log` writers keep.
pub(crate) const VECTOR_LOG_KEEP: i64 = 20_000;

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
            tx.prepare_cached(
                "DELETE FROM vector_log WHERE seq <= (SELECT max(seq) FROM vector_log) - ?1",
            )?
            .execute([VECTOR_LOG_KEEP])?;
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

    /// The similarity of every item with a vector of `model` to `query`
    /// (a unit vector): see [`VectorSet::similarities`].
    #[cfg(test)]
    pub(crate) fn similarities(
        &self,
        model: &str,
        query: &[f32],
    ) -> Result<Vec<(i64, f32)>, StoreError> {
        Ok(self.load_vectors(model)?.similarities(query).all())
    }

    /// The vectors of `model`, read in full into a set.
    pub(crate) fn load_vectors(&self, model: &str) -> Result<VectorSet, StoreError> {
        let mut set = VectorSet::empty(model);
        // The log's position first: a change committed while the vectors
        // are read is read again by the next catch-up, never missed.
        set.seq = self.vector_log_top()?;
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT v.item_id, v.vec, i.file_id, i.start_line, i.heading
             FROM vectors v JOIN items i ON i.id = v.item_id WHERE v.model = ?1",
        )?;
        let mut rows = stmt.query([model])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let place = Place::of_row(row, 2)?;
            set.put_bytes(id, row.get_ref(1)?.as_blob().unwrap_or_default(), place);
        }
        Ok(set)
    }

    /// Brings `set` up to date with the index: the vectors stored or
    /// deleted since it last looked, or everything again when the log no
    /// longer reaches back that far (or the index was built anew).
    /// Returns how many items it looked at again.
    pub(crate) fn catch_up(&self, set: &mut VectorSet) -> Result<usize, StoreError> {
        let top = self.vector_log_top()?;
        if top == set.seq {
            return Ok(0);
        }
        let oldest: Option<i64> =
            self.store
                .conn
                .query_row("SELECT min(seq) FROM vector_log", [], |r| r.get(0))?;
        let reaches_back = oldest.is_some_and(|o| o <= set.seq + 1);
        if top < set.seq || !reaches_back {
            *set = self.load_vectors(&set.model)?;
            return Ok(set.len());
        }
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT c.item_id, v.vec, i.file_id, i.start_line, i.heading FROM
               (SELECT DISTINCT item_id FROM vector_log WHERE seq > ?1 AND seq <= ?2) c
             LEFT JOIN vectors v ON v.item_id = c.item_id AND v.model = ?3
             LEFT JOIN items i ON i.id = c.item_id",
        )?;
        let mut rows = stmt.query(params![set.seq, top, set.model])?;
        let mut looked_at = 0;
        // Files whose items moved, came or went: their neighbours are read
        // again (an edit shifts lines and headings of items it kept).
        let mut touched: std::collections::BTreeSet<i64> = Default::default();
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            if let Some(old) = set.place(id) {
                touched.insert(old.file);
            }
            let file: Option<i64> = row.get(2)?;
            match (row.get_ref(1)?, file) {
                (rusqlite::types::ValueRef::Blob(bytes), Some(file)) => {
                    touched.insert(file);
                    set.put_bytes(id, bytes, Place::of_row(row, 2)?);
                }
                _ => set.remove(id),
            }
            looked_at += 1;
        }
        let mut places = self.store.conn.prepare_cached(
            "SELECT id, file_id, start_line, heading FROM items WHERE file_id = ?1",
        )?;
        for file in touched {
            let mut rows = places.query([file])?;
            while let Some(row) = rows.next()? {
                set.move_to(row.get(0)?, Place::of_row(row, 1)?);
            }
        }
        set.seq = top;
        Ok(looked_at)
    }

    /// Whether `set` reflects every vector change the index logged.
    pub(crate) fn vectors_current(&self, set: &VectorSet) -> Result<bool, StoreError> {
        Ok(self.vector_log_top()? == set.seq)
    }

    /// The newest position of `vector_log` (0 before any change); it
    /// never goes back, even when every row was trimmed.
    fn vector_log_top(&self) -> Result<i64, StoreError> {
        Ok(self
            .store
            .conn
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'vector_log'",
                [],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0))
    }
}

/// Where an item stands: neighbours share a file and a heading and sit
/// next to each other by line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Place {
    pub file: i64,
    pub line: i64,
    /// A hash of the enclosing headings.
    pub heading: u64,
}

impl Place {
    /// `file_id, start_line, heading` from `row`, starting at column `at`.
    fn of_row(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Place> {
        let heading = row.get_ref(at + 2)?.as_str().unwrap_or_default();
        Ok(Place {
            file: row.get(at)?,
            line: row.get(at + 1)?,
            heading: crate::paths::fnv1a64(heading.as_bytes()),
        })
    }
}

/// The int8 vectors of one model held in memory, by item: one contiguous
/// block, so a search compares them without reading the index.
#[derive(Debug, Clone)]
pub(crate) struct VectorSet {
    model: String,
    /// Parts per vector (from the first one kept; others are skipped).
    dims: usize,
    ids: Vec<i64>,
    scales: Vec<f32>,
    parts: Vec<i8>,
    places: Vec<Place>,
    slot: HashMap<i64, usize>,
    /// The `vector_log` position the set reflects.
    seq: i64,
    /// Each item's window, worked out on first use after a change.
    windows: std::sync::OnceLock<Windows>,
}

/// Per slot: the neighbours either side in the window, and the length of
/// the window's summed vectors (0: alone).
#[derive(Debug, Clone, Default)]
struct Windows {
    before: Vec<Option<usize>>,
    after: Vec<Option<usize>>,
    norms: Vec<f32>,
}

impl Windows {
    /// The slots of `at`'s window in reading order (`at` included).
    fn members(&self, at: usize) -> impl Iterator<Item = usize> {
        [self.before[at], Some(at), self.after[at]]
            .into_iter()
            .flatten()
    }
}

impl VectorSet {
    pub(crate) fn empty(model: &str) -> VectorSet {
        VectorSet {
            model: model.to_string(),
            dims: 0,
            ids: Vec::new(),
            scales: Vec::new(),
            parts: Vec::new(),
            places: Vec::new(),
            slot: HashMap::new(),
            seq: 0,
            windows: std::sync::OnceLock::new(),
        }
    }

    /// The model key its vectors were made by.
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Adds or replaces the vector of `id`, alone in its own window.
    #[cfg(test)]
    pub(crate) fn put(&mut self, id: i64, v: &Quantized) {
        let place = Place {
            file: -id,
            line: 0,
            heading: 0,
        };
        self.put_parts(id, v.scale, &v.parts, place);
    }

    /// Adds or replaces the vector of `id` standing at `place`.
    #[cfg(test)]
    pub(crate) fn put_at(&mut self, id: i64, v: &Quantized, place: Place) {
        self.put_parts(id, v.scale, &v.parts, place);
    }

    /// [`VectorSet::put`] from a stored blob (scale, then parts).
    fn put_bytes(&mut self, id: i64, bytes: &[u8], place: Place) {
        let Some((scale, parts)) = bytes.split_first_chunk::<4>() else {
            self.remove(id);
            return;
        };
        let scale = f32::from_le_bytes(*scale);
        if !scale.is_finite() {
            self.remove(id);
            return;
        }
        self.put_parts(id, scale, bytemuck_i8(parts), place);
    }

    fn put_parts(&mut self, id: i64, scale: f32, parts: &[i8], place: Place) {
        if self.ids.is_empty() {
            self.dims = parts.len();
        }
        if parts.len() != self.dims || parts.is_empty() {
            // Not comparable with the others.
            self.remove(id);
            return;
        }
        self.forget_windows();
        let dims = self.dims;
        match self.slot.get(&id) {
            Some(&at) => {
                self.scales[at] = scale;
                self.places[at] = place;
                self.parts[at * dims..(at + 1) * dims].copy_from_slice(parts);
            }
            None => {
                self.slot.insert(id, self.ids.len());
                self.ids.push(id);
                self.scales.push(scale);
                self.places.push(place);
                self.parts.extend_from_slice(parts);
            }
        }
    }

    /// Where the item `id` stands, when the set holds its vector.
    fn place(&self, id: i64) -> Option<Place> {
        self.slot.get(&id).map(|&at| self.places[at])
    }

    /// Records that item `id` now stands at `place` (nothing when the set
    /// holds no vector of it).
    fn move_to(&mut self, id: i64, place: Place) {
        if let Some(&at) = self.slot.get(&id)
            && self.places[at] != place
        {
            self.places[at] = place;
            self.forget_windows();
        }
    }

    /// Forgets the vector of `id` (the last one takes its place).
    pub(crate) fn remove(&mut self, id: i64) {
        let Some(at) = self.slot.remove(&id) else {
            return;
        };
        self.forget_windows();
        let last = self.ids.len() - 1;
        let dims = self.dims;
        if at != last {
            let moved = self.ids[last];
            self.ids[at] = moved;
            self.scales[at] = self.scales[last];
            self.places[at] = self.places[last];
            self.parts
                .copy_within(last * dims..(last + 1) * dims, at * dims);
            self.slot.insert(moved, at);
        }
        self.ids.pop();
        self.scales.pop();
        self.places.pop();
        self.parts.truncate(last * dims);
    }

    /// The vector of `id`, when the set holds one.
    #[cfg(test)]
    pub(crate) fn get(&self, id: i64) -> Option<(f32, &[i8])> {
        let at = *self.slot.get(&id)?;
        Some((self.scales[at], self.vector(at)))
    }

    /// Windows are worked out again after a vector comes, goes or moves.
    fn forget_windows(&mut self) {
        self.windows = std::sync::OnceLock::new();
    }

    fn vector(&self, at: usize) -> &[i8] {
        &self.parts[at * self.dims..(at + 1) * self.dims]
    }

    fn dot(&self, a: usize, b: usize) -> f32 {
        almanac_embed::dot_i8(self.vector(a), self.vector(b)) as f32
            * self.scales[a]
            * self.scales[b]
    }

    /// Every item's window: the items in reading order, neighbours in the
    /// same file under the same heading, and the length of each window's
    /// summed vectors from each vector's own length and the dot products
    /// of neighbours one and two apart (each computed once).
    fn windows(&self) -> &Windows {
        self.windows.get_or_init(|| {
            let n = self.ids.len();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_unstable_by_key(|&at| {
                (self.places[at].file, self.places[at].line, self.ids[at])
            });
            let mut w = Windows {
                before: vec![None; n],
                after: vec![None; n],
                norms: vec![0.0; n],
            };
            let together = |a: usize, b: usize| {
                self.places[a].file == self.places[b].file
                    && self.places[a].heading == self.places[b].heading
            };
            for pair in order.windows(2) {
                if together(pair[0], pair[1]) {
                    w.after[pair[0]] = Some(pair[1]);
                    w.before[pair[1]] = Some(pair[0]);
                }
            }
            // own[at]: its squared length; next[at]: with the item after;
            // skip[at]: with the one after that.
            let own: Vec<f32> = (0..n).map(|at| self.dot(at, at)).collect();
            let next: Vec<f32> = (0..n)
                .map(|at| w.after[at].map_or(0.0, |b| self.dot(at, b)))
                .collect();
            let skip: Vec<f32> = (0..n)
                .map(|at| {
                    w.after[at]
                        .and_then(|b| w.after[b])
                        .map_or(0.0, |c| self.dot(at, c))
                })
                .collect();
            for at in 0..n {
                let members: Vec<usize> = w.members(at).collect();
                if members.len() < 2 {
                    continue;
                }
                let mut squared: f32 = members.iter().map(|&j| own[j]).sum();
                for &j in &members[..members.len() - 1] {
                    squared += 2.0 * next[j];
                }
                if members.len() == 3 {
                    squared += 2.0 * skip[members[0]];
                }
                w.norms[at] = squared.max(0.0).sqrt();
            }
            w
        })
    }

    /// Every item's similarity to `query` (a unit vector): the better of
    /// its own cosine and its window's, by brute force over int8 parts.
    pub(crate) fn similarities(&self, query: &[f32]) -> Similarities<'_> {
        let query = Quantized::new(query);
        if query.parts.len() != self.dims || self.ids.is_empty() {
            return Similarities::none();
        }
        let own = self.cosines(&query);
        let w = self.windows();
        let values = (0..self.ids.len())
            .map(|at| {
                let mut best = own[at];
                let norm = w.norms[at];
                if norm > 0.0 {
                    // The members in reading order, as `Windows::members`
                    // lists them, without building the list.
                    let mut summed = w.before[at].map_or(0.0, |b| own[b]);
                    summed += own[at];
                    summed += w.after[at].map_or(0.0, |a| own[a]);
                    best = best.max(summed / norm);
                }
                best
            })
            .collect();
        Similarities {
            set: Some(self),
            values,
        }
    }

    /// Every item's own cosine with `query` (of this set's dimensions).
    /// The scan reads every vector once and is bound by memory bandwidth:
    /// a large set is read by two threads, half each.
    fn cosines(&self, query: &Quantized) -> Vec<f32> {
        let n = self.ids.len();
        // One buffer for every item, each thread filling its own part, a
        // few hundred dot products at a time (no list of every dot
        // product, no second copy).
        let mut out = vec![0f32; n];
        let dims = self.dims.max(1);
        let fill = |parts: &[i8], scales: &[f32], out: &mut [f32]| {
            let mut dots = Vec::with_capacity(SCAN_CHUNK);
            for ((parts, scales), out) in parts
                .chunks(SCAN_CHUNK * dims)
                .zip(scales.chunks(SCAN_CHUNK))
                .zip(out.chunks_mut(SCAN_CHUNK))
            {
                dots.clear();
                almanac_embed::dots_i8(&query.parts, parts, &mut dots);
                for ((cosine, dot), scale) in out.iter_mut().zip(&dots).zip(scales) {
                    *cosine = *dot as f32 * scale * query.scale;
                }
            }
        };
        if n < SPLIT_SCAN || crate::host::compute_threads() < 2 {
            fill(&self.parts, &self.scales, &mut out);
            return out;
        }
        let half = n / 2;
        let (first, second) = self.parts.split_at(half * self.dims);
        let (first_scales, second_scales) = self.scales.split_at(half);
        let (first_out, second_out) = out.split_at_mut(half);
        // The second half goes to whichever thread takes it first.
        let second_out = std::sync::Mutex::new(Some(second_out));
        let take_second = || {
            if let Some(out) = second_out.lock().unwrap_or_else(|p| p.into_inner()).take() {
                fill(second, second_scales, out);
            }
        };
        std::thread::scope(|s| {
            let other = std::thread::Builder::new()
                .name("almanac-vector-scan".into())
                .spawn_scoped(s, take_second);
            fill(first, first_scales, first_out);
            match other {
                Ok(handle) => {
                    if let Err(panic) = handle.join() {
                        std::panic::resume_unwind(panic);
                    }
                }
                // No thread to be had: this one reads the rest too.
                Err(_) => take_second(),
            }
        });
        out
    }
}

/// Vectors compared per step of a scan.
const SCAN_CHUNK: usize = 512;

/// Sets smaller than this are scanned by one thread (a second one costs
/// more to start than it saves).
const SPLIT_SCAN: usize = 16_384;

/// Each item's similarity to one query, held by the set's slots (a large
/// memory's every item: no map is built of them).
pub(crate) struct Similarities<'a> {
    set: Option<&'a VectorSet>,
    values: Vec<f32>,
}

impl<'a> Similarities<'a> {
    /// No item has a similarity.
    pub(crate) fn none() -> Similarities<'a> {
        Similarities {
            set: None,
            values: Vec::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// Item `id`'s similarity, if it has a vector.
    pub(crate) fn get(&self, id: i64) -> Option<f32> {
        let set = self.set?;
        set.slot.get(&id).map(|&at| self.values[at])
    }

    /// The `count` most similar items, best first (equal similarities:
    /// the higher id first).
    pub(crate) fn nearest(&self, count: usize) -> Vec<(i64, f32)> {
        let Some(set) = self.set else {
            return Vec::new();
        };
        let count = count.min(self.values.len());
        if count == 0 {
            return Vec::new();
        }
        // The count-th best value, then only what reaches it (ties
        // included) is sorted.
        let mut values = self.values.clone();
        values.select_nth_unstable_by(count - 1, |a, b| b.total_cmp(a));
        let threshold = values[count - 1];
        let mut picked: Vec<(i64, f32)> = self
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.total_cmp(&threshold).is_ge())
            .map(|(at, v)| (set.ids[at], *v))
            .collect();
        picked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        picked.truncate(count);
        picked
    }

    /// Every item with its similarity, in no particular order.
    #[cfg(test)]
    pub(crate) fn all(&self) -> Vec<(i64, f32)> {
        match self.set {
            Some(set) => set
                .ids
                .iter()
                .copied()
                .zip(self.values.iter().copied())
                .collect(),
            None => Vec::new(),
        }
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

    /// The similarities of a set, in id order, for comparing with the
    /// index's.
    fn sorted(mut v: Vec<(i64, f32)>) -> Vec<(i64, f32)> {
        v.sort_by_key(|(id, _)| *id);
        v
    }

    #[test]
    fn a_vector_set_adds_replaces_and_removes_and_compares_as_the_index_does() {
        let mut set = VectorSet::empty("test/a");
        let a = Quantized::new(&vector_of("car"));
        let b = Quantized::new(&vector_of("doctor"));
        let c = Quantized::new(&vector_of("standup moved"));
        set.put(1, &a);
        set.put(2, &b);
        set.put(3, &c);
        assert_eq!(set.len(), 3);
        // Replacing keeps one entry per item.
        set.put(1, &b);
        assert_eq!(set.len(), 3);
        assert_eq!(set.get(1).unwrap().1, &b.parts[..]);
        // Removing the first moves the last into its place.
        set.remove(1);
        set.remove(1);
        assert_eq!(set.len(), 2);
        assert!(set.get(1).is_none());
        assert_eq!(set.get(3).unwrap().1, &c.parts[..]);
        assert_eq!(set.get(2).unwrap().1, &b.parts[..]);
        let query = vector_of("physician");
        let sims = sorted(set.similarities(&query).all());
        assert_eq!(sims.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [2, 3]);
        assert!(sims[0].1 > 0.9 && sims[1].1 < 0.5, "{sims:?}");
        // A vector of other dimensions is not comparable: never kept.
        set.put(4, &Quantized::new(&[1.0, 0.0]));
        assert!(set.get(4).is_none());
        // A query of other dimensions matches nothing.
        assert!(set.similarities(&[1.0, 0.0]).is_empty());
        set.remove(2);
        set.remove(3);
        assert_eq!(set.len(), 0);
        assert!(set.similarities(&query).is_empty());
    }

    #[test]
    fn a_vector_set_follows_stores_deletes_and_a_new_model_through_the_log() {
        let f = tests_support::fixture(&[("memory/2026-11-01.md", NOTES)]);
        let mut idx = tests_support::open(&f);
        idx.sync(SyncMode::Full, tests_support::wall_ns()).unwrap();
        let a = words("a");
        idx.fill_vectors(&a, 2, |_| {}).unwrap();
        let mut set = idx.load_vectors("test/a").unwrap();
        assert_eq!(set.len(), 2);
        let query = vector_of("car doctor");
        let same = |idx: &Index, set: &VectorSet| {
            assert_eq!(
                sorted(set.similarities(&query).all()),
                sorted(idx.similarities("test/a", &query).unwrap())
            );
        };
        same(&idx, &set);
        assert_eq!(idx.catch_up(&mut set).unwrap(), 0, "nothing changed");
        // Stored by another connection (another process): caught up.
        let mut writer = tests_support::open(&f);
        writer.fill_vectors(&a, usize::MAX, |_| {}).unwrap();
        assert_eq!(idx.catch_up(&mut set).unwrap(), 1);
        assert_eq!(set.len(), 3);
        same(&idx, &set);
        // An edit deletes the file's items and their vectors; the new
        // items reuse the ids and have no vector yet.
        let path = f.root.join("memory/2026-11-01.md");
        crate::durable::atomic_replace(
            &path,
            NOTES.replace("serviced", "washed").as_bytes(),
            0o600,
        )
        .unwrap();
        writer
            .sync(SyncMode::Full, tests_support::wall_ns())
            .unwrap();
        idx.catch_up(&mut set).unwrap();
        assert_eq!(set.len(), 0, "vectors of deleted items are dropped");
        writer.fill_vectors(&a, usize::MAX, |_| {}).unwrap();
        idx.catch_up(&mut set).unwrap();
        assert_eq!(set.len(), 3);
        same(&idx, &set);
        // Another model's vectors replace these in the index: the set of
        // model a follows (its items have none now).
        writer.fill_vectors(&words("b"), 1, |_| {}).unwrap();
        idx.catch_up(&mut set).unwrap();
        assert_eq!(set.len(), 2);
        same(&idx, &set);
        // Rows the set has seen may be trimmed; once rows it has not seen
        // are gone, it is read again in full.
        set.put(99, &Quantized::new(&query));
        writer
            .store
            .conn
            .execute("DELETE FROM vector_log", [])
            .unwrap();
        idx.catch_up(&mut set).unwrap();
        assert!(set.get(99).is_some(), "nothing new: nothing read");
        writer.fill_vectors(&words("b"), 1, |_| {}).unwrap();
        writer
            .store
            .conn
            .execute("DELETE FROM vector_log", [])
            .unwrap();
        writer.fill_vectors(&words("b"), 1, |_| {}).unwrap();
        idx.catch_up(&mut set).unwrap();
        assert!(set.get(99).is_none(), "a full read leaves nothing stale");
        same(&idx, &set);
    }

    /// The notes indexed and embedded, "car doctor"'s vector, the set of
    /// the items' vectors (the fixture lives as long as the index).
    fn car_doctor() -> (
        tests_support::Fixture,
        Index,
        &'static str,
        QueryVector,
        VectorSet,
    ) {
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
        let set = idx.load_vectors(&m.key()).unwrap();
        (f, idx, text, qv, set)
    }

    #[test]
    fn a_vector_made_while_the_words_are_looked_up_ranks_as_one_made_before() {
        use crate::memory::index::search::LateVector;
        let (_f, idx, text, qv, set) = car_doctor();
        let shown = |o: &crate::memory::index::search::SearchOutcome| {
            o.hits
                .iter()
                .map(|h| (h.id, h.score, h.vector_score))
                .collect::<Vec<_>>()
        };
        let search = |vector: Option<&dyn super::super::search::VectorSource>| {
            idx.search_with(&Query {
                text,
                vector,
                vectors: Some(&set),
                ..Query::default()
            })
            .unwrap()
        };
        let before = search(Some(&qv));
        let waited = std::sync::atomic::AtomicUsize::new(0);
        let late = LateVector::new(
            || {
                waited.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Some(qv.clone())
            },
            Option::as_ref,
        );
        let meanwhile = search(Some(&late));
        assert!(before.hits.iter().any(|h| h.vector_score.is_some()));
        assert_eq!(shown(&meanwhile), shown(&before));
        // Made once, however often the search asks.
        let _ = search(Some(&late));
        assert_eq!(waited.load(std::sync::atomic::Ordering::SeqCst), 1);
        // A vector that could not be made: the words alone rank.
        let failed = LateVector::new(|| None, Option::as_ref);
        assert_eq!(shown(&search(Some(&failed))), shown(&search(None)));
        assert!(
            search(Some(&failed))
                .hits
                .iter()
                .all(|h| h.vector_score.is_none())
        );
    }

    #[test]
    fn a_search_with_the_vectors_in_memory_ranks_as_one_reading_the_index() {
        let (_f, idx, text, qv, set) = car_doctor();
        let from_index = idx
            .search_with(&Query {
                text,
                vector: Some(&qv),
                ..Query::default()
            })
            .unwrap();
        let from_memory = idx
            .search_with(&Query {
                text,
                vector: Some(&qv),
                vectors: Some(&set),
                ..Query::default()
            })
            .unwrap();
        let shown = |o: &crate::memory::index::search::SearchOutcome| {
            o.hits
                .iter()
                .map(|h| (h.id, h.score, h.vector_score))
                .collect::<Vec<_>>()
        };
        assert_eq!(shown(&from_index).len(), 2);
        assert_eq!(shown(&from_index), shown(&from_memory));
        // The set is what was compared: an empty one finds nothing by
        // meaning.
        let empty = VectorSet::empty(&qv.model);
        let none = idx
            .search_with(&Query {
                text,
                vector: Some(&qv),
                vectors: Some(&empty),
                ..Query::default()
            })
            .unwrap();
        assert!(none.hits.is_empty());
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
        let mut set = VectorSet::empty("test/a");
        for (line, (id, run, v)) in rows.iter().enumerate() {
            let place = Place {
                file: 1,
                line: line as i64,
                heading: u64::from(*run),
            };
            set.put_at(*id, &Quantized::new(v), place);
        }
        set
    }

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn similarity_of(set: &VectorSet, query: &[f32], id: i64) -> f32 {
        set.similarities(query)
            .all()
            .into_iter()
            .find(|(i, _)| *i == id)
            .unwrap()
            .1
    }

    #[test]
    fn a_large_set_read_by_two_threads_gives_each_item_its_own_cosine() {
        let dims = 16;
        let count = SPLIT_SCAN + 37;
        let mut set = VectorSet::empty("test/a");
        let vector = |id: usize| -> Vec<f32> {
            unit(
                &(0..dims)
                    .map(|d| ((id * 7 + d * 13) % 23) as f32 - 11.0)
                    .collect::<Vec<_>>(),
            )
        };
        for id in 0..count {
            set.put(id as i64, &Quantized::new(&vector(id)));
        }
        let query = Quantized::new(&vector(5));
        let own = set.cosines(&query);
        assert_eq!(own.len(), count);
        for (at, cosine) in own.iter().enumerate() {
            let (scale, parts) = (set.scales[at], set.vector(at));
            let alone = almanac_embed::dot_i8(&query.parts, parts) as f32 * scale * query.scale;
            assert_eq!(*cosine, alone, "slot {at}");
        }
        let id_of_5 = set.ids.iter().position(|id| *id == 5).unwrap();
        assert!(own[id_of_5] > 0.99);
    }

    #[test]
    fn the_nearest_items_come_best_first_and_ties_go_to_the_higher_id() {
        let mut set = VectorSet::empty("test/a");
        let along = |x: f32| Quantized::new(&unit(&[x, 1.0 - x.abs(), 0.0, 0.0]));
        // Items 1 and 4 are the same vector, and so are 2 and 5.
        for (id, x) in [(1, 1.0), (2, 0.5), (3, -1.0), (4, 1.0), (5, 0.5), (6, 0.0)] {
            set.put(id, &along(x));
        }
        let sims = set.similarities(&[1.0, 0.0, 0.0, 0.0]);
        assert_eq!(sims.len(), 6);
        let ids = |n: usize| {
            sims.nearest(n)
                .iter()
                .map(|(id, _)| *id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(1), [4]);
        assert_eq!(ids(3), [4, 1, 5]);
        assert_eq!(ids(10), [4, 1, 5, 2, 6, 3]);
        assert!(ids(0).is_empty());
        let best = sims.nearest(1)[0].1;
        assert_eq!(sims.get(1), Some(best));
        assert_eq!(sims.get(99), None);
        assert!(Similarities::none().nearest(3).is_empty());
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
        mixed.put(2, &Quantized::new(&[1.0, 0.0]));
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

    #[test]
    fn a_window_follows_an_item_that_moves_or_goes() {
        let query = unit(&[1.0, 0.0, 0.0]);
        let near = unit(&[1.0, 0.0, 0.0]);
        let far = unit(&[0.0, 1.0, 0.0]);
        let rows: [(i64, u32, &[f32]); 3] = [(1, 1, &near), (2, 1, &far), (3, 1, &near)];
        let mut set = set_of(&rows);
        assert!(similarity_of(&set, &query, 2) > 0.5);
        // Item 2 moves under another heading: alone, it is far.
        set.move_to(
            2,
            Place {
                file: 1,
                line: 1,
                heading: 9,
            },
        );
        assert!(similarity_of(&set, &query, 2).abs() < 0.02);
        set.move_to(
            2,
            Place {
                file: 1,
                line: 1,
                heading: 1,
            },
        );
        set.remove(1);
        set.remove(3);
        assert!(
            similarity_of(&set, &query, 2).abs() < 0.02,
            "its neighbours are gone"
        );
    }
}
