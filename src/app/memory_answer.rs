//! A memory search's answer as the gateway sends it (`POST
//! /v1/memory/search`) and `memory search` reads it back: everything the
//! command prints, text and `--json`, so both answer the same.

use serde::{Deserialize, Serialize};

use super::memory::{Searched, Semantic};
use crate::memory::index::search::SearchOutcome;
use crate::memory::index::{Hit, Neighbor, SyncReport};
use crate::memory::when::DayRange;

/// A search's answer as the gateway sends it: everything `memory search`
/// prints, text and `--json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchAnswer {
    pub hits: Vec<AnswerHit>,
    pub time_range: Option<AnswerRange>,
    pub time_phrase: Option<String>,
    pub unmatched_time_phrase: Option<String>,
    pub entities: Vec<String>,
    pub warnings: Vec<String>,
    /// How the gateway brought its index up to date (`watched`: its
    /// watcher keeps it so).
    pub sync: String,
    pub provider: String,
    pub model: Option<String>,
    pub mode: String,
    pub notice: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AnswerRange {
    pub since: Option<String>,
    pub until: Option<String>,
}

/// A hit with every field a command shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnswerHit {
    pub path: String,
    pub kind: String,
    pub start_line: usize,
    pub end_line: usize,
    pub stamp: Option<String>,
    pub date: Option<String>,
    pub heading: String,
    pub body: String,
    pub score: f64,
    pub text_score: Option<f64>,
    pub vector_score: Option<f64>,
    pub before: Vec<Neighbor>,
    pub after: Vec<Neighbor>,
    pub withheld: Vec<usize>,
}

impl SearchAnswer {
    pub(crate) fn of(searched: Searched) -> SearchAnswer {
        let Searched {
            outcome,
            sync,
            semantic,
            ..
        } = searched;
        SearchAnswer {
            hits: outcome
                .hits
                .into_iter()
                .map(|h| AnswerHit {
                    path: h.path,
                    kind: h.kind.as_str().to_string(),
                    start_line: h.start_line,
                    end_line: h.end_line,
                    stamp: h.stamp,
                    date: h.day,
                    heading: h.heading,
                    body: h.body,
                    score: h.score,
                    text_score: h.text_score,
                    vector_score: h.vector_score,
                    before: h.before,
                    after: h.after,
                    withheld: h.withheld,
                })
                .collect(),
            time_range: outcome.time_range.map(|r| AnswerRange {
                since: r.since.map(|d| d.to_string()),
                until: r.until.map(|d| d.to_string()),
            }),
            time_phrase: outcome.time_phrase,
            unmatched_time_phrase: outcome.unmatched_time_phrase,
            entities: outcome.entities,
            warnings: sync.warnings,
            sync: sync.mode.to_string(),
            provider: semantic.provider.to_string(),
            model: semantic.model,
            mode: semantic.mode.to_string(),
            notice: semantic.notice,
        }
    }

    pub(crate) fn into_searched(self) -> anyhow::Result<Searched> {
        let day = |d: Option<String>| -> Result<Option<jiff::civil::Date>, jiff::Error> {
            d.as_deref().map(str::parse).transpose()
        };
        let time_range = match self.time_range {
            Some(r) => Some(DayRange {
                since: day(r.since)?,
                until: day(r.until)?,
            }),
            None => None,
        };
        let hits = self
            .hits
            .into_iter()
            .map(|h| Hit {
                id: 0,
                path: h.path,
                kind: crate::memory::files::FileKind::parse(&h.kind),
                start_line: h.start_line,
                end_line: h.end_line,
                stamp: h.stamp,
                day: h.date,
                ts: None,
                heading: h.heading,
                body: h.body,
                norm_hash: 0,
                file_id: 0,
                score: h.score,
                text_score: h.text_score,
                vector_score: h.vector_score,
                before: h.before,
                after: h.after,
                withheld: h.withheld,
            })
            .collect();
        let known = |s: &str, labels: &[&'static str], other: &'static str| {
            labels.iter().copied().find(|l| *l == s).unwrap_or(other)
        };
        Ok(Searched {
            outcome: SearchOutcome {
                hits,
                time_range,
                time_phrase: self.time_phrase,
                unmatched_time_phrase: self.unmatched_time_phrase,
                entities: self.entities,
            },
            sync: SyncReport {
                mode: known(
                    &self.sync,
                    &["watched", "quick", "full", "rebuild", "refresh"],
                    "gateway",
                ),
                warnings: self.warnings,
                ..SyncReport::default()
            },
            disabled: false,
            semantic: Semantic {
                provider: known(&self.provider, &["local", "openai"], "none"),
                model: self.model,
                mode: known(&self.mode, &["hybrid"], "fts-only"),
                notice: self.notice,
            },
        })
    }
}
