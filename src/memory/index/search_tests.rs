use super::score::{Scorer, phrase_factor, recency_factor};
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
