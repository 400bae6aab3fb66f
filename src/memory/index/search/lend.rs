//! Context (step 4 of the ranking): the best items lend a share of their
//! score to their neighbours, which join the candidates with context hits.
//!
//! The words' candidates' neighbours are looked up before the query's
//! vector is asked for ([`Index::neighbors_ahead`]): a gateway makes the
//! vector meanwhile, and the ranking after it then reads only what the
//! items the vector brought need. The lenders, their neighbours and the
//! rows read are those a lookup after the vector would give.

use std::collections::HashMap;

use super::super::{Hit, Index};
use super::{Filter, NEIGHBOR_SHARE, NEIGHBOR_SOURCES, NEIGHBOR_SPAN, Query, Scored, Scorer};
use crate::store::StoreError;

/// Neighbours looked up ahead: each lender's, and the scoring rows of
/// those that were no candidates then.
#[derive(Default)]
pub(super) struct Ahead {
    neighbors: HashMap<i64, Vec<i64>>,
    rows: HashMap<i64, (Hit, String)>,
}

/// The items that lend, best first: the best of `scored` by base score.
fn lenders(q: &Query<'_>, scored: &HashMap<i64, Scored>) -> Vec<(i64, f64)> {
    let mut sources: Vec<(i64, f64)> = scored.values().map(|s| (s.hit.id, s.base)).collect();
    sources.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    sources.truncate(if q.lend {
        (q.limit + 8).clamp(16, NEIGHBOR_SOURCES)
    } else {
        0
    });
    sources
}

impl Index {
    /// The neighbours of the items that lend among `scored` as it is
    /// now, and (with context hits) the rows of those not in it.
    pub(super) fn neighbors_ahead(
        &self,
        q: &Query<'_>,
        scored: &HashMap<i64, Scored>,
    ) -> Result<Ahead, StoreError> {
        let mut ahead = Ahead::default();
        let mut missing: Vec<i64> = Vec::new();
        for (id, _) in lenders(q, scored) {
            let near = self.neighbors(&scored[&id].hit, NEIGHBOR_SPAN)?;
            if q.context_hits {
                missing.extend(near.iter().filter(|n| !scored.contains_key(n)));
            }
            ahead.neighbors.insert(id, near);
        }
        missing.sort_unstable();
        missing.dedup();
        ahead.rows = self.scoring_rows(missing.into_iter())?;
        Ok(ahead)
    }

    /// The share of their score the best items lend their neighbours, by
    /// neighbour; with context hits, neighbours that were no candidates
    /// join `scored`. What `ahead` holds is not read again.
    pub(super) fn lend_to_neighbors(
        &self,
        q: &Query<'_>,
        filter: &Filter,
        scorer: &mut Scorer<'_>,
        scored: &mut HashMap<i64, Scored>,
        mut ahead: Ahead,
    ) -> Result<HashMap<i64, f64>, StoreError> {
        let mut lent: HashMap<i64, f64> = HashMap::new();
        let mut missing: Vec<i64> = Vec::new();
        for (id, base) in lenders(q, scored) {
            let near = match ahead.neighbors.remove(&id) {
                Some(near) => near,
                None => self.neighbors(&scored[&id].hit, NEIGHBOR_SPAN)?,
            };
            for neighbor in near {
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
        let mut rows = Vec::with_capacity(missing.len());
        let mut unread = Vec::new();
        for id in missing {
            match ahead.rows.remove(&id) {
                Some(row) => rows.push(row),
                None => unread.push(id),
            }
        }
        rows.extend(self.scoring_rows(unread.into_iter())?.into_values());
        for (hit, item_terms) in rows {
            if !filter.admits(&hit) {
                continue;
            }
            let base = scorer.score(&hit, &item_terms);
            scored.insert(hit.id, Scored { hit, base });
        }
        Ok(lent)
    }
}
