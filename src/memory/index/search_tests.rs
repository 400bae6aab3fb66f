use super::score::{Scorer, phrase_factor, recency_factor};
use super::*;

/// Stored terms as the scorer reads them.
fn split(terms: &str) -> Vec<&str> {
    terms.split(' ').collect()
}

#[test]
fn phrase_factor_rewards_adjacent_query_terms() {
    let q: Vec<String> = ["gate", "code"].iter().map(|s| s.to_string()).collect();
    assert_eq!(
        phrase_factor(&q, &split("storag unit gate code 7719")),
        1.0 + PHRASE_BOOST
    );
    assert_eq!(phrase_factor(&q, &split("code for the gate")), 1.0);
    assert_eq!(phrase_factor(&q[..1], &split("gate code")), 1.0);
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
    assert_eq!(standing_out.rare_factor(&split("zephyrin lab")), RARE_BOOST);
    assert_eq!(standing_out.rare_factor(&split("badg number")), 1.0);
    let alike = scorer(&[5.5, 6.0]);
    assert_eq!(alike.rare_factor(&split("zephyrin lab")), 1.0);
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

#[test]
fn the_words_candidates_neighbours_are_looked_up_before_the_vector_is_asked_for() {
    use crate::memory::index::SyncMode;
    use crate::memory::index::tests as support;
    let f = support::fixture(&[(
        "memory/2026-11-02.md",
        "# 2026-11-02\n\n## Storage\n\n- rented a unit near the station\n- the gate code for the storage unit is 7719\n- the key is with Dana\n",
    )]);
    let mut idx = support::open(&f);
    idx.sync(SyncMode::Full, support::wall_ns()).unwrap();
    let lookups = || super::reads::NEIGHBOR_LOOKUPS.with(std::cell::Cell::get);
    let search = |vector: Option<&dyn VectorSource>| {
        idx.search_with(&Query {
            text: "gate code",
            vector,
            context: 1,
            context_hits: true,
            lend: true,
            ..Query::default()
        })
        .unwrap()
    };
    let alone = search(None);
    let before = lookups();
    let seen = std::sync::Mutex::new(None);
    // Made on this thread, when the ranking first asks for it.
    let late = LateVector::new(
        || {
            *seen.lock().unwrap() = Some(lookups() - before);
            None::<QueryVector>
        },
        Option::as_ref,
    );
    let waited = search(Some(&late));
    let ahead = seen.lock().unwrap().expect("the vector was asked for");
    assert!(ahead > 0, "no neighbour was looked up before the vector");
    assert_eq!(
        lookups() - before,
        ahead,
        "neighbours looked up ahead were looked up again"
    );
    let shown = |o: &SearchOutcome| {
        o.hits
            .iter()
            .map(|h| (h.id, h.score, h.before.len(), h.after.len()))
            .collect::<Vec<_>>()
    };
    assert!(alone.hits.len() > 1, "a neighbour joins as context");
    assert_eq!(shown(&waited), shown(&alone));
}
