//! Exact scores: BM25 of an item's stored terms with the phrase and
//! rare-term factors, the recency lift, and the fusion of the lexical and
//! vector orders of a hybrid search.

use std::collections::HashMap;

use jiff::civil::Date;

use super::super::{Corpus, Hit, bm25};
use super::{
    PHRASE_BOOST, RARE_BOOST, RARE_MARGIN, RECENCY_HALF_LIFE_DAYS, RECENCY_LIFT, RRF_K,
    VECTOR_WEIGHT,
};
use crate::memory::terms;

/// Exact scores of items for one query.
pub(super) struct Scorer<'a> {
    pub(super) terms: &'a [String],
    pub(super) idf: &'a [f64],
    pub(super) corpus: Corpus,
    /// Heading text → its terms, computed once per heading.
    pub(super) headings: HashMap<String, String>,
}

impl Scorer<'_> {
    /// `RARE_BOOST` for an item holding the query's rarest term when that
    /// term stands out (its IDF well above the others'): a name, a code or
    /// an unusual word usually carries the question.
    /// `item`: the item's stored terms, split at spaces.
    pub(super) fn rare_factor(&self, item: &[&str]) -> f64 {
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
        if item.iter().any(|t| t == term) {
            RARE_BOOST
        } else {
            1.0
        }
    }

    /// The item's exact score. Its terms are split once for the three
    /// factors, and a heading's terms are made once per heading (a search
    /// scores a hundred or so items under a few headings).
    pub(super) fn score(&mut self, hit: &Hit, item_terms: &str) -> f64 {
        if !self.headings.contains_key(&hit.heading) {
            let made = terms::index_terms(&hit.heading);
            self.headings.insert(hit.heading.clone(), made);
        }
        let head = &self.headings[&hit.heading];
        let item: Vec<&str> = item_terms.split(' ').collect();
        let s = bm25(
            self.terms,
            self.idf,
            &item,
            head,
            self.corpus.average_terms(),
        );
        s * phrase_factor(self.terms, &item) * self.rare_factor(&item)
    }
}

/// The hybrid score: reciprocal-rank fusion of an item's place in the
/// lexical order and in the vector order (0 = first; `None`: not in that
/// list), scaled so that first in both scores 1. Ranks, not raw scores,
/// are fused because BM25 and cosine similarity live on unrelated scales
/// that vary from query to query; lexical evidence keeps the larger
/// weight. (Tuned on the LoCoMo dev conversations, checked on each
/// conversation alone: k 10–15, weight 0.35, 50 nearest items.)
pub(in crate::memory::index) fn fuse(text_rank: Option<usize>, vector_rank: Option<usize>) -> f64 {
    let part = |rank: Option<usize>| rank.map_or(0.0, |r| RRF_K / (RRF_K + r as f64));
    (1.0 - VECTOR_WEIGHT) * part(text_rank) + VECTOR_WEIGHT * part(vector_rank)
}

/// `1 + PHRASE_BOOST × (share of consecutive query-term pairs that occur
/// next to each other, in order, in the item)`.
/// `item`: the item's stored terms, split at spaces.
pub(super) fn phrase_factor(query: &[String], item: &[&str]) -> f64 {
    if query.len() < 2 {
        return 1.0;
    }
    let pairs = query.len() - 1;
    let matched = query
        .windows(2)
        .filter(|pair| item.windows(2).any(|w| w[0] == pair[0] && w[1] == pair[1]))
        .count();
    1.0 + PHRASE_BOOST * matched as f64 / pairs as f64
}

/// `1 + RECENCY_LIFT × 2^(−age / half-life)` for a note of `day`.
pub(super) fn recency_factor(day: Option<&str>, today: Date) -> f64 {
    let Some(day) = day.and_then(|d| d.parse::<Date>().ok()) else {
        return 1.0;
    };
    let age = (today - day).get_days().max(0) as f64;
    1.0 + RECENCY_LIFT * (-age / RECENCY_HALF_LIFE_DAYS).exp2()
}
