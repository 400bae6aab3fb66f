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

use super::{Corpus, Hit, Identity, Index, bm25_idf, candidate_window};
use crate::memory::files::FileKind;
use crate::memory::terms;
use crate::memory::when::{self, DayRange};
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
    /// Where the query's sentence vector comes from: the search is hybrid
    /// (lexical if the source yields none).
    pub vector: Option<&'a dyn VectorSource>,
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

/// Where a search finds its query's vector: made before the search, or
/// made when first asked for ([`LateVector`]). The search asks for it
/// only once the words' candidates are scored.
pub(crate) trait VectorSource: Sync + std::fmt::Debug {
    /// The vector, made now if it is made on first need; `None` when it
    /// could not be made (the search is then lexical).
    fn vector(&self) -> Option<&QueryVector>;
}

impl VectorSource for QueryVector {
    fn vector(&self) -> Option<&QueryVector> {
        Some(self)
    }
}

/// Work that yields a `T` holding the query's vector, done only when the
/// search first asks for the vector (the gateway embeds the query once
/// the words' candidates are scored): the first [`VectorSource::vector`]
/// runs it, later ones reuse it, and [`LateVector::into_made`] hands the
/// whole `T` back afterwards (running it then if nobody asked).
pub(crate) struct LateVector<'s, T> {
    made: std::sync::OnceLock<Option<T>>,
    make: std::sync::Mutex<Option<Box<dyn FnOnce() -> T + Send + 's>>>,
    vector_of: fn(&T) -> Option<&QueryVector>,
}

impl<'s, T> LateVector<'s, T> {
    /// What `make` returns, made on first need; `vector_of` finds the
    /// query's vector in it.
    pub(crate) fn new(
        make: impl FnOnce() -> T + Send + 's,
        vector_of: fn(&T) -> Option<&QueryVector>,
    ) -> LateVector<'s, T> {
        LateVector {
            made: std::sync::OnceLock::new(),
            make: std::sync::Mutex::new(Some(Box::new(make))),
            vector_of,
        }
    }

    /// Does the work (once) and returns what it made.
    fn made(&self) -> Option<&T> {
        self.made
            .get_or_init(|| {
                let make = self.make.lock().unwrap_or_else(|p| p.into_inner()).take();
                make.map(|make| make())
            })
            .as_ref()
    }

    /// What the work made, doing it now if the search never asked
    /// (`None` only if making it failed by panicking before).
    pub(crate) fn into_made(self) -> Option<T> {
        self.made();
        self.made.into_inner().flatten()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for LateVector<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateVector")
            .field("made", &self.made.get())
            .finish()
    }
}

impl<T: std::fmt::Debug + Send + Sync> VectorSource for LateVector<'_, T> {
    fn vector(&self) -> Option<&QueryVector> {
        self.made().and_then(self.vector_of)
    }
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
pub(crate) struct SearchOutcome {
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
    pub(crate) fn search_with(&self, q: &Query<'_>) -> Result<SearchOutcome, StoreError> {
        let conn = &self.store.conn;
        // One read transaction for the whole search (unless the caller
        // holds one): one snapshot, and the log's read lock taken once
        // rather than for each of its statements.
        let own = conn.is_autocommit() && conn.execute_batch("BEGIN").is_ok();
        let outcome = self.search_in_snapshot(q);
        if own && conn.execute_batch("COMMIT").is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        // A common term's count is kept now, under the write lock, counted
        // again there so that no write falls between count and keeping.
        // Keeping it only spares later searches the count: one that
        // cannot be kept now (another writer, a read-only file) leaves the
        // search's answer as it is.
        let mut uncounted = std::mem::take(&mut *self.uncounted.borrow_mut());
        uncounted.sort_unstable();
        uncounted.dedup();
        if conn.is_autocommit() {
            for term in uncounted {
                let _ = self.keep_docs(&term);
            }
        }
        outcome
    }

    fn search_in_snapshot(&self, q: &Query<'_>) -> Result<SearchOutcome, StoreError> {
        let q = &Query {
            limit: q.limit.min(MAX_RESULTS),
            context: q.context.min(MAX_CONTEXT),
            ..q.clone()
        };
        if q.limit == 0 {
            return Ok(SearchOutcome::default());
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
    fn ranked(
        &self,
        q: &Query<'_>,
        text: &str,
        range: DayRange,
    ) -> Result<SearchOutcome, StoreError> {
        let mut outcome = SearchOutcome::default();
        if !range.is_open() {
            outcome.time_range = Some(range);
        }
        let query_terms = self.known_terms(text, range)?;
        // Without words to look up, the vector is needed now.
        if query_terms.is_empty() && q.vector.and_then(|v| v.vector()).is_none() {
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
        // Room for the nearest items and the neighbours too: growing
        // moves every entry, and an entry is a whole hit.
        let mut scored: HashMap<i64, Scored> = HashMap::with_capacity(
            chosen.len() + VECTOR_LIST.max(q.limit) + NEIGHBOR_SOURCES * 2 * NEIGHBOR_SPAN,
        );
        for (hit, item_terms) in chosen {
            let base = scorer.score(&hit, &item_terms);
            scored.insert(hit.id, Scored { hit, base });
        }

        // The words' candidates' neighbours, which the ranking reads
        // whatever the vector brings, before the vector is asked for:
        // a gateway makes it meanwhile.
        let ahead = self.neighbors_ahead(q, &scored)?;

        // Hybrid: every item's similarity to the query's vector, and the
        // nearest items join the candidates whatever words they use.
        let loaded;
        let query_vector = q.vector.and_then(|v| v.vector());
        let similarity = match (query_vector, q.vectors) {
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
        let lent = self.lend_to_neighbors(q, &filter, &mut scorer, &mut scored, ahead)?;

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
        if query_vector.is_some() {
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

mod lend;
mod reads;
mod score;

pub(super) use score::fuse;
use score::{Scorer, recency_factor};

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
