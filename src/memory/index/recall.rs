//! Entity summaries, typed facts and the recall pack, from the index.
//!
//! * An entity's items are its mentions (tags, speakers, names in
//!   mid-sentence) plus every item containing its name as words, so a
//!   name that only ever starts sentences is still found.
//! * A recall pack puts typed facts (`## Retain` records) first, then the
//!   best supporting lines, within a token budget; every item names its
//!   file and line.
//! * Every text shown (facts, telling lines, pack items) has passed the
//!   read-time rule (`sanitize::guard_note`).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::search::{Query, SearchOutcome};
use super::{Hit, Index, id_array};
use crate::memory::terms::{self, estimate_tokens};
use crate::memory::when::DayRange;
use crate::memory::{entities, sanitize};
use crate::store::StoreError;

/// A typed fact with its source.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Fact {
    pub kind: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Entity keys of its tags.
    pub entities: Vec<String>,
    pub path: String,
    pub line: usize,
    #[serde(rename = "date")]
    pub day: Option<String>,
    /// Lines withheld from `content` by the read-time rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<usize>,
    #[serde(skip)]
    item_id: i64,
}

/// A line about an entity.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EntityLine {
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    #[serde(rename = "date")]
    pub day: Option<String>,
    pub text: String,
    /// Lines withheld from `text` by the read-time rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<usize>,
}

/// What memory holds about one entity.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EntitySummary {
    pub entity: String,
    pub display: String,
    /// Items mentioning it.
    pub mentions: usize,
    pub files: usize,
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
    pub facts: Vec<Fact>,
    /// Its most telling lines: tagged or named ones first, newest first.
    pub lines: Vec<EntityLine>,
    /// Entities mentioned with it most often (among its tagged and most
    /// recent items).
    pub related: Vec<Related>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Related {
    pub entity: String,
    pub display: String,
    pub together: usize,
}

/// One item of a recall pack.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecallItem {
    /// `world`, `experience`, `opinion`, `observation` (typed facts) or
    /// `note` (a supporting line).
    pub kind: String,
    pub content: String,
    /// `path#Lstart` or `path#Lstart-Lend`.
    pub source: String,
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    #[serde(rename = "date")]
    pub day: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    pub score: f64,
    pub tokens: usize,
    /// Lines withheld from `content` by the read-time rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<usize>,
}

/// A token-budgeted fact pack.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecallPack {
    pub query: String,
    pub budget_tokens: usize,
    pub used_tokens: usize,
    pub items: Vec<RecallItem>,
    /// Relevant items left out for the budget.
    pub omitted: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_range: Option<DayRange>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<String>,
}

/// Most lines an entity summary shows.
pub(crate) const ENTITY_LINES: usize = 10;
/// The most lines an entity summary shows, whatever it is asked for.
pub(crate) const MAX_ENTITY_LINES: usize = 1000;
/// Items (tagged first, then the newest) whose co-mentions make the
/// "mentioned with" list.
const RELATED_SAMPLE: usize = 1000;
/// Hits a recall pack draws its supporting lines from.
const RECALL_POOL: usize = 40;

impl Index {
    /// What memory holds about `name`; `None` when nothing mentions it.
    pub(crate) fn entity(
        &self,
        name: &str,
        max_lines: usize,
    ) -> Result<Option<EntitySummary>, StoreError> {
        let max_lines = max_lines.min(MAX_ENTITY_LINES);
        let key = entities::key(name);
        if key.is_empty() {
            return Ok(None);
        }
        let conn = &self.store.conn;
        let tagged: HashSet<i64> = conn
            .prepare_cached("SELECT item_id FROM mentions WHERE entity = ?1")?
            .query_map([&key], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut all = tagged.clone();
        all.extend(self.items_with_phrase(&terms::index_terms(name))?);
        if all.is_empty() {
            return Ok(None);
        }
        // One pass over the items for the dates, files and order.
        let mut meta: Vec<(i64, Option<String>, i64)> = conn
            .prepare_cached("SELECT id, day, file_id FROM items WHERE id IN rarray(?1)")?
            .query_map([id_array(all.iter().copied())], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<Result<_, _>>()?;
        let first_seen = meta.iter().filter_map(|m| m.1.clone()).min();
        let last_seen = meta.iter().filter_map(|m| m.1.clone()).max();
        let files = meta.iter().map(|m| m.2).collect::<HashSet<_>>().len();
        // Tagged or named items first, then the newest.
        meta.sort_unstable_by(|a, b| {
            tagged
                .contains(&b.0)
                .cmp(&tagged.contains(&a.0))
                .then(b.1.is_some().cmp(&a.1.is_some()))
                .then(b.1.cmp(&a.1))
                .then(b.0.cmp(&a.0))
        });
        let display: Option<String> = conn
            .prepare_cached(
                "SELECT display FROM mentions WHERE entity = ?1 GROUP BY display ORDER BY count(*) DESC, display LIMIT 1",
            )?
            .query_row([&key], |r| r.get(0))
            .ok();
        let facts = self.facts_where(
            "f.item_id IN rarray(?1) OR ('|' || f.entities || '|') LIKE ?2 ESCAPE '\\'",
            rusqlite::params![
                id_array(all.iter().copied()),
                format!("%|{}|%", like_escape(&key))
            ],
        )?;
        let fact_items: HashSet<i64> = facts.iter().map(|f| f.item_id).collect();
        // Bodies of a few more items than shown (copies of a text are
        // shown once).
        let wanted: Vec<i64> = meta
            .iter()
            .map(|m| m.0)
            .filter(|id| !fact_items.contains(id))
            .take(max_lines * 3 + 8)
            .collect();
        let mut bodies: HashMap<i64, EntityLine> = conn
            .prepare_cached(
                "SELECT i.id, f.path, i.start_line, i.end_line, i.day, i.body FROM items i JOIN files f ON f.id = i.file_id
                 WHERE i.id IN rarray(?1)",
            )?
            .query_map([id_array(wanted.iter().copied())], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    EntityLine {
                        path: r.get(1)?,
                        start_line: r.get::<_, i64>(2)? as usize,
                        end_line: r.get::<_, i64>(3)? as usize,
                        day: r.get(4)?,
                        text: r.get(5)?,
                        withheld: Vec::new(),
                    },
                ))
            })?
            .collect::<Result<_, _>>()?;
        let mut seen_texts = HashSet::new();
        let lines: Vec<EntityLine> = wanted
            .iter()
            .filter_map(|id| bodies.remove(id))
            .filter(|l| seen_texts.insert(terms::fold(&l.text)))
            .take(max_lines)
            .map(|mut l| {
                let guarded = sanitize::guard_note(&l.text, &l.path, l.start_line);
                l.text = guarded.text;
                l.withheld = guarded.withheld;
                l
            })
            .collect();
        // Entities mentioned with it, among its tagged and most recent items.
        let sample: Vec<i64> = meta.iter().take(RELATED_SAMPLE).map(|m| m.0).collect();
        let related = {
            let mut stmt = conn.prepare_cached(
                "SELECT entity, min(display), count(DISTINCT item_id) AS n FROM mentions
                 WHERE item_id IN rarray(?1) AND entity != ?2
                 GROUP BY entity ORDER BY n DESC, entity LIMIT 5",
            )?;
            stmt.query_map(rusqlite::params![id_array(sample.into_iter()), key], |r| {
                Ok(Related {
                    entity: r.get(0)?,
                    display: r.get(1)?,
                    together: r.get::<_, i64>(2)? as usize,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?
        };
        Ok(Some(EntitySummary {
            display: display.unwrap_or_else(|| name.trim().trim_start_matches('@').to_string()),
            entity: key,
            mentions: all.len(),
            files,
            first_seen,
            last_seen,
            facts,
            lines,
            related,
        }))
    }

    /// Items whose terms contain `phrase_terms` (space-separated) in order.
    fn items_with_phrase(&self, phrase_terms: &str) -> Result<Vec<i64>, StoreError> {
        let words: Vec<&str> = phrase_terms.split(' ').filter(|t| !t.is_empty()).collect();
        let Some(first) = words.first() else {
            return Ok(Vec::new());
        };
        let mut ids: HashSet<i64> = self.postings("items_fts", first)?.into_iter().collect();
        for w in &words[1..] {
            let next: HashSet<i64> = self.postings("items_fts", w)?.into_iter().collect();
            ids.retain(|id| next.contains(id));
        }
        if words.len() == 1 || ids.is_empty() {
            return Ok(ids.into_iter().collect());
        }
        // Several words: they must be next to each other.
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT id, terms FROM items WHERE id IN rarray(?1)")?;
        let rows = stmt.query_map([id_array(ids.into_iter())], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, item_terms) = row?;
            let item: Vec<&str> = item_terms.split(' ').collect();
            if item.windows(words.len()).any(|w| w == words.as_slice()) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Facts matching a condition on `facts f` (joined with its item `i`
    /// and file `fl`). The facts drive the join (`CROSS JOIN` fixes the
    /// order): there are few, and the planner would otherwise walk every
    /// item to sort by day.
    fn facts_where(
        &self,
        condition: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<Fact>, StoreError> {
        let mut stmt = self.store.conn.prepare(&format!(
            "SELECT f.item_id, f.kind, f.content, f.confidence, f.entities, fl.path, i.start_line, i.day
             FROM facts f CROSS JOIN items i ON i.id = f.item_id CROSS JOIN files fl ON fl.id = i.file_id
             WHERE {condition} ORDER BY i.day DESC, i.id DESC"
        ))?;
        let rows = stmt.query_map(params, |r| {
            Ok(Fact {
                item_id: r.get(0)?,
                kind: r.get(1)?,
                content: r.get(2)?,
                confidence: r.get(3)?,
                entities: r
                    .get::<_, String>(4)?
                    .split('|')
                    .filter(|e| !e.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: r.get(5)?,
                line: r.get::<_, i64>(6)? as usize,
                day: r.get(7)?,
                withheld: Vec::new(),
            })
        })?;
        let mut facts: Vec<Fact> = rows.collect::<Result<_, _>>()?;
        for fact in &mut facts {
            let guarded = sanitize::guard_note(&fact.content, &fact.path, fact.line);
            fact.content = guarded.text;
            fact.withheld = guarded.withheld;
        }
        Ok(facts)
    }

    /// Counts of the derived entity and fact tables.
    pub(crate) fn recall_counts(&self) -> Result<(usize, usize), StoreError> {
        let conn = &self.store.conn;
        let entities: i64 =
            conn.query_row("SELECT count(DISTINCT entity) FROM mentions", [], |r| {
                r.get(0)
            })?;
        let facts: i64 = conn.query_row("SELECT count(*) FROM facts", [], |r| r.get(0))?;
        Ok((entities as usize, facts as usize))
    }

    /// A fact pack for `q` within `budget` tokens: typed facts first (those
    /// among the hits and those about the entities the query names), then
    /// the best supporting lines.
    pub(crate) fn recall(&self, q: &Query<'_>, budget: usize) -> Result<RecallPack, StoreError> {
        // Only lines that match: a pack is small, and each line in it
        // should answer to the query itself.
        let search = Query {
            limit: RECALL_POOL,
            context_hits: false,
            ..q.clone()
        };
        let SearchOutcome {
            hits,
            time_range,
            entities,
            ..
        } = self.search_with(&search)?;
        let range = time_range.unwrap_or_default();
        let hit_ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        let score_of: HashMap<i64, f64> = hits.iter().map(|h| (h.id, h.score)).collect();
        let mut facts = self.facts_where(
            "f.item_id IN rarray(?1)",
            [id_array(hit_ids.iter().copied())],
        )?;
        if !entities.is_empty() {
            let names = std::rc::Rc::new(
                entities
                    .iter()
                    .map(|e| rusqlite::types::Value::Text(e.clone()))
                    .collect::<Vec<_>>(),
            );
            let about = self.facts_where(
                "f.item_id IN (SELECT item_id FROM mentions WHERE entity IN rarray(?1))",
                [names],
            )?;
            for fact in about {
                if !facts.iter().any(|f| f.item_id == fact.item_id) {
                    facts.push(fact);
                }
            }
        }
        facts.retain(|f| {
            range.is_open()
                || f.day
                    .as_deref()
                    .and_then(|d| d.parse().ok())
                    .is_some_and(|d| range.contains(d))
        });
        // Facts among the hits by their score, then the others by date.
        facts.sort_by(|a, b| {
            let sa = score_of.get(&a.item_id).copied().unwrap_or(0.0);
            let sb = score_of.get(&b.item_id).copied().unwrap_or(0.0);
            sb.total_cmp(&sa).then(b.day.cmp(&a.day))
        });
        let fact_ids: HashSet<i64> = facts.iter().map(|f| f.item_id).collect();
        let mut candidates: Vec<RecallItem> = facts
            .into_iter()
            .map(|f| {
                let score = score_of.get(&f.item_id).copied().unwrap_or(0.0);
                item(
                    f.kind,
                    f.content,
                    &f.path,
                    f.line,
                    f.line,
                    f.day,
                    f.entities,
                    f.confidence,
                    score,
                    f.withheld,
                )
            })
            .collect();
        candidates.extend(
            hits.into_iter()
                .filter(|h| !fact_ids.contains(&h.id))
                .map(|h: Hit| {
                    let guarded = sanitize::guard_note(&h.body, &h.path, h.start_line);
                    item(
                        "note".to_string(),
                        guarded.text,
                        &h.path,
                        h.start_line,
                        h.end_line,
                        h.day,
                        Vec::new(),
                        None,
                        h.score,
                        guarded.withheld,
                    )
                }),
        );
        let mut pack = RecallPack {
            query: q.text.to_string(),
            budget_tokens: budget,
            used_tokens: 0,
            items: Vec::new(),
            omitted: 0,
            time_range,
            entities,
        };
        for candidate in candidates {
            if pack.used_tokens + candidate.tokens > budget {
                pack.omitted += 1;
                continue;
            }
            pack.used_tokens += candidate.tokens;
            pack.items.push(candidate);
        }
        Ok(pack)
    }
}

#[allow(clippy::too_many_arguments)]
fn item(
    kind: String,
    content: String,
    path: &str,
    start_line: usize,
    end_line: usize,
    day: Option<String>,
    entities: Vec<String>,
    confidence: Option<f64>,
    score: f64,
    withheld: Vec<usize>,
) -> RecallItem {
    let source = if start_line == end_line {
        format!("{path}#L{start_line}")
    } else {
        format!("{path}#L{start_line}-L{end_line}")
    };

    // What the pack costs the model: the content and its source.
    let tokens = estimate_tokens(&content) + estimate_tokens(&source) + 2;
    RecallItem {
        kind,
        content,
        source,
        path: path.to_string(),
        start_line,
        end_line,
        day,
        entities,
        confidence,
        score,
        tokens,
        withheld,
    }
}

/// Escapes `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
fn like_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}
