//! Ranked search over the index.
//!
//! 1. **Time.** An explicit range (`--since` / `--until`) filters the
//!    items by day. With a "today", the first time expression in the query
//!    (`in March 2024`, `last week`, `2025-11`) is taken out of the text
//!    and filters too; when no note of that time matches, the phrase is
//!    read as words instead (it may describe the note, not date it). A
//!    query that is only a time expression lists the notes of that range,
//!    newest first.
//! 2. **Candidates.** The inverted indexes give, for each query term, the
//!    items containing it; every candidate gets the sum of the IDF of the
//!    terms it contains (a quarter for a heading-only match), and the best
//!    [`candidate_window`] distinct texts are kept. Very common words are
//!    read last and in part, never a whole list: their newest postings,
//!    the newest items holding all of them, and the other words'
//!    candidates that hold them; their counts (for IDF) are kept in the
//!    index once a search found them common. Items holding only common
//!    words tie, and ties go to the newer note, so for one common word the
//!    window is the one a full read gives, unless copies of one text fill
//!    its newest postings (then fewer distinct texts reach the window).
//! 3. **Exact score.** Those are scored with BM25 from their stored terms,
//!    times a phrase factor when query terms appear next to each other in
//!    the same order, and a rare-term factor for items holding the query's
//!    rarest term when it stands out from the others (a name or a code).
//! 4. **Context.** A note is often understood through its neighbours (the
//!    answer follows the question; a list continues a thought), so each
//!    item gains a share of the best score among the two items either side
//!    of it under the same heading. Items with no query term at all can be
//!    found this way.
//! 5. **Entities.** Items mentioning an entity the query names (a known
//!    `@tag`, speaker or name) are preferred.
//! 6. **Recency.** Newer notes get a small lift (at most
//!    [`RECENCY_LIFT`]), never enough to bury a clearly better old match.
//!
//! One hit per distinct text (a note kept in `MEMORY.md` and a daily file
//! is shown once, as its long-term copy). Scores are mapped to (0, 1) by
//! `s / (1 + s)`.

use std::collections::{HashMap, HashSet};

use jiff::civil::Date;
use rusqlite::OptionalExtension;

use super::{Corpus, Hit, Identity, Index, Neighbor, bm25, bm25_idf, candidate_window, id_array};
use crate::memory::files::FileKind;
use crate::memory::when::{self, DayRange};
use crate::memory::{entities, terms};
use crate::store::StoreError;

/// Hashes item ids (small distinct integers) with one multiplication: the
/// first pass puts tens of thousands of postings in a map.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_i64(&mut self, n: i64) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap<V> = HashMap<i64, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Weight of a match in the enclosing headings relative to the body.
const HEADING_WEIGHT: f64 = super::HEADING_WEIGHT;
/// Postings read of a very common word (at least; more for a search that
/// wants many results).
const COMMON_POSTINGS: usize = 512;
/// Share of the best neighbour's score an item gains.
const NEIGHBOR_SHARE: f64 = 0.4;
/// How many items either side count as neighbours.
const NEIGHBOR_SPAN: usize = 2;
/// How many of the best items lend their score to their neighbours (at
/// most; fewer for a search that wants few results).
const NEIGHBOR_SOURCES: usize = 40;
/// Factor for an item in which all consecutive query-term pairs occur
/// next to each other (scaled by the share of pairs that do).
const PHRASE_BOOST: f64 = 0.5;
/// Factor for an item holding the query's rarest term when it stands out
/// by at least [`RARE_MARGIN`] (natural log units of IDF) from the others.
const RARE_BOOST: f64 = 1.2;
const RARE_MARGIN: f64 = 1.0;
/// Factor for an item mentioning an entity the query names.
const ENTITY_BOOST: f64 = 1.5;
/// The largest lift recency gives (for a note from today).
pub(crate) const RECENCY_LIFT: f64 = 0.05;
/// Days over which the recency lift halves.
const RECENCY_HALF_LIFE_DAYS: f64 = 180.0;

/// The weight of the vector order in a hybrid score ([`fuse`]).
const VECTOR_WEIGHT: f64 = 0.35;
/// Reciprocal-rank fusion's constant: how fast a place further down a
/// list stops counting.
const RRF_K: f64 = 10.0;
/// The nearest items that take part in a hybrid ranking (more when more
/// results are asked for).
const VECTOR_LIST: usize = 50;
/// Windows of nearest items read to fill the vector candidates when a
/// filter turns some away.
const VECTOR_WINDOWS: usize = 4;
/// Similarity below this says nothing (a sentence model finds every
/// text a little similar to every other): it adds no score, and an item
/// found only by its vector needs at least this much.
const VECTOR_FLOOR: f64 = 0.4;

/// The most results a search returns, whatever it is asked for.
pub(crate) const MAX_RESULTS: usize = 1000;
/// The most neighbouring items shown either side of a hit.
pub(crate) const MAX_CONTEXT: usize = 50;

/// A search request.
#[derive(Debug, Clone)]
pub(crate) struct Query<'a> {
    pub text: &'a str,
    pub limit: usize,
    /// Only these kinds of file.
    pub kinds: Option<&'a [FileKind]>,
    /// Only items whose day is in this range (open: no filter).
    pub range: DayRange,
    /// "Today" in the user's zone: enables time expressions in the query
    /// and the recency lift.
    pub today: Option<Date>,
    /// Hits scoring below this are dropped.
    pub min_score: f64,
    /// Hits found only through their neighbours (no query term of their
    /// own) scoring below this are dropped.
    pub min_context_score: f64,
    /// Neighbouring items attached to each hit, either side.
    pub context: usize,
    /// Whether an item without any query term may be a hit on the
    /// strength of its neighbours (the answer after a question). Off, the
    /// neighbours only re-rank items that match.
    pub context_hits: bool,
    /// Whether items lend a share of their score to their neighbours at
    /// all (off: plain lexical ranking, a little cheaper).
    pub lend: bool,
    /// Read every posting list in full (no shortcut for a very common
    /// word); the results are the same, only slower.
    pub exhaustive: bool,
    /// The query's sentence vector: the search is hybrid.
    pub vector: Option<&'a QueryVector>,
    /// The items' vectors held in memory (the gateway's): compared instead
    /// of reading the index's when they are of the query vector's model.
    pub vectors: Option<&'a super::vectors::VectorSet>,
}

/// A query's sentence vector and the model that made it.
#[derive(Debug, Clone)]
pub(crate) struct QueryVector {
    /// The model key the items' vectors are stored under.
    pub model: String,
    /// A unit vector.
    pub vector: Vec<f32>,
}

impl Default for Query<'_> {
    fn default() -> Self {
        Query {
            text: "",
            limit: 10,
            kinds: None,
            range: DayRange::default(),
            today: None,
            min_score: 0.0,
            min_context_score: 0.0,
            context: 0,
            context_hits: false,
            lend: true,
            exhaustive: false,
            vector: None,
            vectors: None,
        }
    }
}

/// Hits and how the query was read.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Outcome {
    pub hits: Vec<Hit>,
    /// The day range applied, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_range: Option<DayRange>,
    /// The words of the query read as that range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_phrase: Option<String>,
    /// A time phrase of the query no note of that time matched: it was
    /// searched as words instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmatched_time_phrase: Option<String>,
    /// Entities the query names (keys).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<String>,
}

/// A scored item during ranking.
struct Scored {
    hit: Hit,
    /// BM25 times the phrase factor.
    base: f64,
}

impl Index {
    /// Ranked search; see the module documentation. A limit or context
    /// larger than [`MAX_RESULTS`] / [`MAX_CONTEXT`] is cut to it.
    pub(crate) fn search_with(&self, q: &Query<'_>) -> Result<Outcome, StoreError> {
        let q = &Query {
            limit: q.limit.min(MAX_RESULTS),
            context: q.context.min(MAX_CONTEXT),
            ..q.clone()
        };
        if q.limit == 0 {
            return Ok(Outcome::default());
        }
        if let Some(today) = q.today
            && let Some(found) = when::find_in_query(q.text, today)
        {
            if let Some(range) = q.range.intersect(&found.range) {
                let mut outcome = self.ranked(q, &found.rest, range)?;
                if !outcome.hits.is_empty() {
                    outcome.time_phrase = Some(found.phrase);
                    return Ok(outcome);
                }
            }
            // Nothing from that time: the words may be about the note
            // rather than its date ("where is Peter this week?").
            let mut outcome = self.ranked(q, q.text, q.range)?;
            outcome.unmatched_time_phrase = Some(found.phrase);
            return Ok(outcome);
        }
        self.ranked(q, q.text, q.range)
    }

    /// Ranked search of `text` within `range`.
    fn ranked(&self, q: &Query<'_>, text: &str, range: DayRange) -> Result<Outcome, StoreError> {
        let mut outcome = Outcome::default();
        if !range.is_open() {
            outcome.time_range = Some(range);
        }
        let query_terms = self.known_terms(text, range)?;
        if query_terms.is_empty() && q.vector.is_none() {
            if range.is_open() {
                return Ok(outcome);
            }
            outcome.hits = self.in_range(&range, q.kinds, q.limit)?;
            return Ok(outcome);
        }
        outcome.entities = self.known_entities(text)?;

        // Candidates by the IDF of the terms they contain.
        let corpus = self.corpus()?;
        let (idf, coordination) = self.coordination(q, &query_terms, range, corpus)?;
        let mut candidates: Vec<(i64, f64)> = coordination.into_iter().collect();
        candidates.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));

        let filter = Filter::new(self, q.kinds, range)?;
        // A narrow range: keep only its items before looking any up (a
        // common word in one month of ten years is otherwise a long scan).
        if let Some(in_range) = self.ids_in_narrow_range(&range)? {
            candidates.retain(|(id, _)| in_range.contains(id));
        }
        let chosen = self.distinct_window(&candidates, candidate_window(q.limit), &filter)?;
        let mut scorer = Scorer {
            terms: &query_terms,
            idf: &idf,
            corpus,
            headings: HashMap::new(),
        };
        let mut scored: HashMap<i64, Scored> = HashMap::new();
        for (hit, item_terms) in chosen {
            let base = scorer.score(&hit, &item_terms);
            scored.insert(hit.id, Scored { hit, base });
        }

        // Hybrid: every item's similarity to the query's vector, and the
        // nearest items join the candidates whatever words they use.
        let loaded;
        let similarity = match (q.vector, q.vectors) {
            (Some(v), Some(set)) if set.model() == v.model => set.similarities(&v.vector),
            (Some(v), _) => {
                loaded = self.load_vectors(&v.model)?;
                loaded.similarities(&v.vector)
            }
            (None, _) => super::vectors::Similarities::none(),
        };
        // The nearest items that pass the filter, best first, ranked; the
        // ones no word found join the candidates.
        let (by_vector, vector_rank) =
            self.join_nearest(q, &similarity, &filter, &mut scorer, &mut scored)?;

        // Context: the best items lend a share of their score to their
        // neighbours, which are scored too if they were not candidates.
        let lent = self.lend_to_neighbors(q, &filter, &mut scorer, &mut scored)?;

        let boosted = self.mentioning(&outcome.entities, scored.keys().copied())?;
        let mut hits: Vec<Hit> = Vec::with_capacity(scored.len());
        let mut context_only: HashSet<i64> = HashSet::new();
        let mut vector_only: HashSet<i64> = HashSet::new();
        for (id, s) in scored {
            let vector = similarity.get(id).map(|v| f64::from(v).max(0.0));
            let lent_here = lent.get(&id).copied().unwrap_or(0.0);
            if s.base <= 0.0 {
                if by_vector.contains(&id) && lent_here <= 0.0 {
                    vector_only.insert(id);
                } else if !q.context_hits {
                    continue;
                } else {
                    context_only.insert(id);
                }
            }
            let mut value = s.base + lent_here;
            if boosted.contains(&id) {
                value *= ENTITY_BOOST;
            }
            let recency = q
                .today
                .map_or(1.0, |today| recency_factor(s.hit.day.as_deref(), today));
            value *= recency;
            let mut hit = s.hit;
            let text = value / (1.0 + value);
            hit.text_score = Some(text);
            hit.vector_score = vector;
            hit.score = text;
            hits.push(hit);
        }
        // Best first; equal scores: the newer note first.
        let order = |a: &Hit, b: &Hit| {
            b.score
                .total_cmp(&a.score)
                .then(b.ts.unwrap_or(i64::MIN).cmp(&a.ts.unwrap_or(i64::MIN)))
                .then(b.id.cmp(&a.id))
        };
        hits.sort_by(order);
        if q.vector.is_some() {
            // Hybrid: the lexical order and the vector order, fused by
            // their ranks.
            let mut text_rank = 0;
            for hit in &mut hits {
                let by_text = (hit.score > 0.0).then(|| {
                    text_rank += 1;
                    text_rank - 1
                });
                hit.score = fuse(by_text, vector_rank.get(&hit.id).copied());
            }
            hits.sort_by(order);
        }
        let mut hits = super::dedupe(hits, usize::MAX);
        hits.retain(|h| {
            // A hit found only by its vector passes on its similarity; one
            // found only through its neighbours, on its text score.
            if vector_only.contains(&h.id) {
                let similarity = h.vector_score.unwrap_or(0.0);
                return similarity >= q.min_score.max(q.min_context_score).max(VECTOR_FLOOR);
            }
            let floor = if context_only.contains(&h.id) {
                q.min_score.max(q.min_context_score)
            } else {
                q.min_score
            };
            let text = h.text_score.unwrap_or(h.score);
            text > 0.0 && text >= floor
        });
        hits.truncate(q.limit);
        if q.context > 0 {
            self.attach_context(&mut hits, q.context)?;
        }
        outcome.hits = hits;
        Ok(outcome)
    }

    /// The query's terms; with a time range, only those memory uses
    /// ("what happened in March" only asks for the range).
    fn known_terms(&self, text: &str, range: DayRange) -> Result<Vec<String>, StoreError> {
        let mut query_terms = terms::query_terms(text);
        if !range.is_open() {
            let mut known = Vec::with_capacity(query_terms.len());
            for term in query_terms {
                if self.has_term("items_fts", &term)? || self.has_term("headings_fts", &term)? {
                    known.push(term);
                }
            }
            query_terms = known;
        }
        Ok(query_terms)
    }

    /// Each candidate's coordination score (the IDF of the query terms it
    /// holds, a heading match weighted less) and each term's IDF.
    fn coordination(
        &self,
        q: &Query<'_>,
        query_terms: &[String],
        range: DayRange,
        corpus: Corpus,
    ) -> Result<(Vec<f64>, IdMap<f64>), StoreError> {
        let mut idf = vec![0.0; query_terms.len()];
        let mut coordination: IdMap<f64> = IdMap::default();
        // Very common words (held by more than `cap` items, in no heading)
        // are read last and in part; the others in full.
        let fill = candidate_window(q.limit) * 4;
        let cap = (fill * 2).max(COMMON_POSTINGS);
        let common = if range.is_open() && !q.exhaustive {
            self.common_terms(query_terms, cap)?
        } else {
            Vec::new()
        };
        for (i, term) in query_terms.iter().enumerate() {
            if common.iter().any(|(c, _)| *c == i) {
                continue;
            }
            let body = self.postings("items_fts", term)?;
            let heading = self.postings("headings_fts", term)?;
            let df = if heading.is_empty() {
                body.len()
            } else {
                body.iter().chain(&heading).collect::<HashSet<_>>().len()
            };
            let weight = bm25_idf(corpus.items, df);
            idf[i] = weight;
            for id in body {
                *coordination.entry(id).or_default() += weight;
            }
            for id in heading {
                *coordination.entry(id).or_default() += HEADING_WEIGHT * weight;
            }
        }
        if !common.is_empty() {
            // What can reach the window: the candidates of the rarer words
            // (their stored terms say which common words they hold; when
            // they are many, the inverted index says which hold them all),
            // the newest `cap` items holding all the common words, and the
            // newest `cap` items of each. No list of a common word is read
            // whole. Items holding only common words tie by recency, so for
            // one common word this is exactly the window a full read gives;
            // with several, an old item holding some but not all of them
            // (or all of them, behind `cap` newer ones) may be left out.
            let seen: Vec<i64> = coordination.keys().copied().collect();
            let seen_terms = if seen.len() <= fill {
                self.stored_terms(&seen)?
            } else {
                HashMap::new()
            };
            let common_words: Vec<&str> = common
                .iter()
                .map(|(i, _)| query_terms[*i].as_str())
                .collect();
            let mut holds_all: HashSet<i64> = HashSet::new();
            if common.len() >= 2 {
                holds_all.extend(self.newest_with_all(&common_words, &[], cap)?);
            }
            if seen.len() > fill {
                let rare: Vec<&str> = query_terms
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !common.iter().any(|(c, _)| c == i))
                    .map(|(_, t)| t.as_str())
                    .collect();
                holds_all.extend(self.newest_with_all(&common_words, &rare, usize::MAX)?);
            }
            for (i, df) in &common {
                let term = &query_terms[*i];
                let weight = bm25_idf(corpus.items, *df);
                idf[*i] = weight;
                let mut credited: HashSet<i64> =
                    self.newest_postings(term, cap)?.into_iter().collect();
                credited.extend(holds_all.iter().copied());
                credited.extend(
                    seen_terms
                        .iter()
                        .filter(|(_, t)| t.split(' ').any(|w| w == term))
                        .map(|(id, _)| *id),
                );
                for id in credited {
                    *coordination.entry(id).or_default() += weight;
                }
            }
        }
        Ok((idf, coordination))
    }

    /// The nearest items that pass the filter, best first, ranked: those
    /// no word found join `scored`. Returns the items found only so and
    /// every nearest item's rank.
    fn join_nearest(
        &self,
        q: &Query<'_>,
        similarity: &super::vectors::Similarities<'_>,
        filter: &Filter,
        scorer: &mut Scorer<'_>,
        scored: &mut HashMap<i64, Scored>,
    ) -> Result<(HashSet<i64>, HashMap<i64, usize>), StoreError> {
        let mut by_vector: HashSet<i64> = HashSet::new();
        let mut vector_rank: HashMap<i64, usize> = HashMap::new();
        if !similarity.is_empty() {
            let want = VECTOR_LIST.max(q.limit);
            // A filter (a time range, file kinds) may turn some away: a
            // few windows are looked at, best first.
            let nearest = similarity.nearest(want * VECTOR_WINDOWS);
            'windows: for window in nearest.chunks(want) {
                let mut rows = self.scoring_rows(
                    window
                        .iter()
                        .map(|(id, _)| *id)
                        .filter(|id| !scored.contains_key(id)),
                )?;
                for (id, _) in window {
                    if !scored.contains_key(id) {
                        let Some((hit, item_terms)) = rows.remove(id) else {
                            continue;
                        };
                        if !filter.admits(&hit) {
                            continue;
                        }
                        let base = scorer.score(&hit, &item_terms);
                        scored.insert(*id, Scored { hit, base });
                        by_vector.insert(*id);
                    }
                    vector_rank.insert(*id, vector_rank.len());
                    if vector_rank.len() >= want {
                        break 'windows;
                    }
                }
            }
        }
        Ok((by_vector, vector_rank))
    }

    /// The share of their score the best items lend their neighbours, by
    /// neighbour; with context hits, neighbours that were no candidates
    /// join `scored`.
    fn lend_to_neighbors(
        &self,
        q: &Query<'_>,
        filter: &Filter,
        scorer: &mut Scorer<'_>,
        scored: &mut HashMap<i64, Scored>,
    ) -> Result<HashMap<i64, f64>, StoreError> {
        let mut sources: Vec<(i64, f64)> = scored.values().map(|s| (s.hit.id, s.base)).collect();
        sources.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        sources.truncate(if q.lend {
            (q.limit + 8).clamp(16, NEIGHBOR_SOURCES)
        } else {
            0
        });
        let mut lent: HashMap<i64, f64> = HashMap::new();
        let mut missing: Vec<i64> = Vec::new();
        for &(id, base) in &sources {
            let hit = &scored[&id].hit;
            for neighbor in self.neighbors(hit, NEIGHBOR_SPAN)? {
                let share = lent.entry(neighbor).or_default();
                *share = share.max(NEIGHBOR_SHARE * base);
                // Without context hits, only candidates can gain: an item
                // outside the window is not read for a share it could not
                // use.
                if q.context_hits && !scored.contains_key(&neighbor) {
                    missing.push(neighbor);
                }
            }
        }
        missing.sort_unstable();
        missing.dedup();
        for (hit, item_terms) in self.scoring_rows(missing.into_iter())?.into_values() {
            if !filter.admits(&hit) {
                continue;
            }
            let base = scorer.score(&hit, &item_terms);
            scored.insert(hit.id, Scored { hit, base });
        }
        Ok(lent)
    }

    /// The best `window` distinct texts among `candidates` (best first)
    /// that pass `filter`, preferring the long-term copy of a text, read
    /// whole for scoring. The first chunk (usually all it takes) is read
    /// whole at once: its rows are mostly read from disk for the first
    /// time, and a second pass over them would cost as much again.
    fn distinct_window(
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
    fn ids_in_narrow_range(&self, range: &DayRange) -> Result<Option<HashSet<i64>>, StoreError> {
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
    fn common_terms(
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
        if super::is_plain_term(term)
            && let Some(docs) = self.keep_docs(term)?
        {
            return Ok(Some(docs));
        }
        Ok(Some(self.count_docs(term)?))
    }

    /// Items holding `term`, read from the whole posting list.
    pub(super) fn count_docs(&self, term: &str) -> Result<usize, StoreError> {
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
    fn keep_docs(&self, term: &str) -> Result<Option<usize>, StoreError> {
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
    fn newest_postings(&self, term: &str, limit: usize) -> Result<Vec<i64>, StoreError> {
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
    fn newest_with_all(
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
    fn stored_terms(&self, ids: &[i64]) -> Result<HashMap<i64, String>, StoreError> {
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
    fn has_term(&self, table: &str, term: &str) -> Result<bool, StoreError> {
        let sql = format!("SELECT 1 FROM {table} WHERE {table} MATCH ?1 LIMIT 1");
        let mut stmt = self.store.conn.prepare_cached(&sql)?;
        let phrase = format!("\"{}\"", term.replace('"', "\"\""));
        Ok(stmt.exists([phrase])?)
    }

    /// Ids of the items up to `span` either side of `hit` in its file,
    /// under the same heading.
    fn neighbors(&self, hit: &Hit, span: usize) -> Result<Vec<i64>, StoreError> {
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
    fn attach_context(&self, hits: &mut [Hit], span: usize) -> Result<(), StoreError> {
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
    fn known_entities(&self, text: &str) -> Result<Vec<String>, StoreError> {
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
    fn mentioning(
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
    fn in_range(
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
            super::HIT_COLUMNS
        ))?;
        let fetch = (limit.min(MAX_RESULTS) * 4 + 16) as i64;
        let hits = stmt
            .query_map(rusqlite::params![since, until, fetch], super::hit_from_row)?
            .collect::<Result<Vec<_>, _>>()?;
        let hits: Vec<Hit> = hits
            .into_iter()
            .filter(|h| kinds.is_none_or(|k| k.contains(&h.kind)))
            .collect();
        Ok(super::dedupe(hits, limit))
    }
}

/// Which items a search may return.
struct Filter {
    range: DayRange,
    since: Option<String>,
    until: Option<String>,
    /// Files a `kinds` filter leaves out.
    excluded_files: HashSet<i64>,
    long_term_files: HashSet<i64>,
}

impl Filter {
    fn new(
        index: &Index,
        kinds: Option<&[FileKind]>,
        range: DayRange,
    ) -> Result<Filter, StoreError> {
        let excluded_files = match kinds {
            // The kinds left out, so the lookup uses the index on kind.
            Some(kinds) => {
                let left_out: Vec<String> = [
                    FileKind::LongTerm,
                    FileKind::Daily,
                    FileKind::Archive,
                    FileKind::Topic,
                ]
                .iter()
                .filter(|k| !kinds.contains(k))
                .map(|k| format!("'{}'", k.as_str()))
                .collect();
                if left_out.is_empty() {
                    HashSet::new()
                } else {
                    index.file_ids_where(&format!("kind IN ({})", left_out.join(", ")))?
                }
            }
            None => HashSet::new(),
        };
        Ok(Filter {
            range,
            since: range.since.map(|d| d.to_string()),
            until: range.until.map(|d| d.to_string()),
            excluded_files,
            long_term_files: index.file_ids_where("kind = 'long_term'")?,
        })
    }

    fn admits_day(&self, day: Option<&str>) -> bool {
        if self.range.is_open() {
            return true;
        }
        // Days are ISO dates: string order is date order.
        let Some(day) = day else {
            return false;
        };
        self.since.as_deref().is_none_or(|s| day >= s)
            && self.until.as_deref().is_none_or(|u| day <= u)
    }

    fn admits_identity(&self, identity: &Identity) -> bool {
        !self.excluded_files.contains(&identity.file_id) && self.admits_day(identity.day.as_deref())
    }

    fn admits(&self, hit: &Hit) -> bool {
        !self.excluded_files.contains(&hit.file_id) && self.admits_day(hit.day.as_deref())
    }
}

/// Exact scores of items for one query.
struct Scorer<'a> {
    terms: &'a [String],
    idf: &'a [f64],
    corpus: Corpus,
    /// Heading text → its terms, computed once per heading.
    headings: HashMap<String, String>,
}

impl Scorer<'_> {
    /// `RARE_BOOST` for an item holding the query's rarest term when that
    /// term stands out (its IDF well above the others'): a name, a code or
    /// an unusual word usually carries the question.
    fn rare_factor(&self, item_terms: &str) -> f64 {
        if self.terms.len() < 2 {
            return 1.0;
        }
        let (rarest, top) = self
            .idf
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, w)| (i, *w))
            .unwrap_or((0, 0.0));
        let others = (self.idf.iter().sum::<f64>() - top) / (self.idf.len() - 1) as f64;
        if top - others < RARE_MARGIN {
            return 1.0;
        }
        let term = &self.terms[rarest];
        if item_terms.split(' ').any(|t| t == term) {
            RARE_BOOST
        } else {
            1.0
        }
    }

    fn score(&mut self, hit: &Hit, item_terms: &str) -> f64 {
        let head = self
            .headings
            .entry(hit.heading.clone())
            .or_insert_with(|| terms::index_terms(&hit.heading));
        let s = bm25(
            self.terms,
            self.idf,
            item_terms,
            head,
            self.corpus.average_terms(),
        );
        s * phrase_factor(self.terms, item_terms) * self.rare_factor(item_terms)
    }
}

/// The hybrid score: reciprocal-rank fusion of an item's place in the
/// lexical order and in the vector order (0 = first; `None`: not in that
/// list), scaled so that first in both scores 1. Ranks, not raw scores,
/// are fused because BM25 and cosine similarity live on unrelated scales
/// that vary from query to query; lexical evidence keeps the larger
/// weight. (Tuned on the LoCoMo dev conversations, checked on each
/// conversation alone: k 10–15, weight 0.35, 50 nearest items.)
pub(super) fn fuse(text_rank: Option<usize>, vector_rank: Option<usize>) -> f64 {
    let part = |rank: Option<usize>| rank.map_or(0.0, |r| RRF_K / (RRF_K + r as f64));
    (1.0 - VECTOR_WEIGHT) * part(text_rank) + VECTOR_WEIGHT * part(vector_rank)
}

/// `1 + PHRASE_BOOST × (share of consecutive query-term pairs that occur
/// next to each other, in order, in the item)`.
fn phrase_factor(query: &[String], item_terms: &str) -> f64 {
    if query.len() < 2 {
        return 1.0;
    }
    let item: Vec<&str> = item_terms.split(' ').collect();
    let pairs = query.len() - 1;
    let matched = query
        .windows(2)
        .filter(|pair| item.windows(2).any(|w| w[0] == pair[0] && w[1] == pair[1]))
        .count();
    1.0 + PHRASE_BOOST * matched as f64 / pairs as f64
}

/// `1 + RECENCY_LIFT × 2^(−age / half-life)` for a note of `day`.
fn recency_factor(day: Option<&str>, today: Date) -> f64 {
    let Some(day) = day.and_then(|d| d.parse::<Date>().ok()) else {
        return 1.0;
    };
    let age = (today - day).get_days().max(0) as f64;
    1.0 + RECENCY_LIFT * (-age / RECENCY_HALF_LIFE_DAYS).exp2()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrase_factor_rewards_adjacent_query_terms() {
        let q: Vec<String> = ["gate", "code"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            phrase_factor(&q, "storag unit gate code 7719"),
            1.0 + PHRASE_BOOST
        );
        assert_eq!(phrase_factor(&q, "code for the gate"), 1.0);
        assert_eq!(phrase_factor(&q[..1], "gate code"), 1.0);
    }

    #[test]
    fn the_rarest_term_counts_when_it_stands_out() {
        let terms: Vec<String> = ["badg", "zephyrin"].iter().map(|s| s.to_string()).collect();
        let corpus = Corpus {
            items: 1000,
            terms: 5000,
        };
        let scorer = |idf: &'static [f64]| Scorer {
            terms: &terms,
            idf,
            corpus,
            headings: HashMap::new(),
        };
        let standing_out = scorer(&[1.0, 6.0]);
        assert_eq!(standing_out.rare_factor("zephyrin lab"), RARE_BOOST);
        assert_eq!(standing_out.rare_factor("badg number"), 1.0);
        let alike = scorer(&[5.5, 6.0]);
        assert_eq!(alike.rare_factor("zephyrin lab"), 1.0);
    }

    #[test]
    fn recency_lifts_a_little_and_fades() {
        let today = jiff::civil::date(2026, 11, 29);
        let fresh = recency_factor(Some("2026-11-29"), today);
        let half = recency_factor(Some("2026-06-02"), today);
        let old = recency_factor(Some("2016-11-29"), today);
        assert!((fresh - (1.0 + RECENCY_LIFT)).abs() < 1e-9);
        assert!((half - (1.0 + RECENCY_LIFT / 2.0)).abs() < 1e-3, "{half}");
        assert!((1.0..1.0001).contains(&old));
        assert_eq!(recency_factor(None, today), 1.0);
    }
}
