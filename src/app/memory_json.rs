//! What `memory search --json` prints, built in one place: the command
//! writes it, and a gateway answering the command's search writes it
//! there so that the command only copies it out (`Printed`).
//!
//! Invariant: the document is the same wherever it is written, byte for
//! byte.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::App;
use super::memory::{ResolvedSearch, SearchRequest, Searched};
use crate::memory::index::Hit;
use crate::memory::snippet;

/// `memory search --json` for `req`: its document and what the command
/// says on stderr, written by the gateway when one answers, else here.
pub(crate) fn search_command(app: &App, req: &SearchRequest) -> anyhow::Result<SearchPrint> {
    let Some(resolved) = app.resolve_search(req)? else {
        return SearchPrint::of(&Searched::disabled());
    };
    let resolved = ResolvedSearch {
        json: true,
        ..resolved
    };
    if let Some(printed) = super::memory::gateway_answer::<Printed>(app, &resolved) {
        super::memory::answered_by_gateway(&printed.sync, &printed.mode);
        return Ok(SearchPrint {
            json: printed.printed.get().to_string(),
            warnings: printed.warnings,
            notice: printed.notice,
        });
    }
    SearchPrint::of(&super::memory::search_here(app, &resolved)?)
}

/// What `memory search --json` prints: the document on stdout, the
/// index's warnings and the search's notice on stderr.
#[derive(Debug)]
pub(crate) struct SearchPrint {
    pub json: String,
    pub warnings: Vec<String>,
    pub notice: Option<String>,
}

impl SearchPrint {
    pub(crate) fn of(searched: &Searched) -> anyhow::Result<SearchPrint> {
        Ok(SearchPrint {
            json: String::from_utf8(search_json(searched)?)?,
            warnings: searched.sync.warnings.clone(),
            notice: searched.semantic.notice.clone(),
        })
    }
}

/// A gateway's answer to a search whose command prints JSON: the
/// document, written once there (the command copies it out rather than
/// reading the hits and writing them again), and what goes to stderr.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Printed {
    pub printed: Box<RawValue>,
    pub warnings: Vec<String>,
    pub notice: Option<String>,
    /// How the gateway brought its index up to date, and the search's
    /// mode (for the command's log).
    pub sync: String,
    pub mode: String,
}

impl Printed {
    pub(crate) fn of(searched: &Searched) -> anyhow::Result<Printed> {
        let SearchPrint {
            json,
            warnings,
            notice,
        } = SearchPrint::of(searched)?;
        Ok(Printed {
            printed: RawValue::from_string(json)?,
            warnings,
            notice,
            sync: searched.sync.mode.to_string(),
            mode: searched.semantic.mode.to_string(),
        })
    }
}

/// One search result in OpenClaw's `memory_search` shape (`path`,
/// `startLine`, `endLine`, `score`, `snippet`, `source`) plus almanac's
/// fields; `memory search` and `session-memory search` print the same.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JsonHit<'a> {
    path: &'a str,
    start_line: usize,
    end_line: usize,
    score: f64,
    snippet: String,
    source: &'static str,
    kind: crate::memory::files::FileKind,
    date: Option<&'a str>,
    stamp: Option<&'a str>,
    heading: &'a str,
    /// The lexical part of the score.
    #[serde(skip_serializing_if = "Option::is_none")]
    text_score: Option<f64>,
    /// The vector similarity (hybrid searches).
    #[serde(skip_serializing_if = "Option::is_none")]
    vector_score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context: Option<JsonContext<'a>>,
    /// Lines replaced by a marker (the read-time rule).
    #[serde(skip_serializing_if = "<[usize]>::is_empty")]
    withheld: &'a [usize],
}

#[derive(Serialize)]
struct JsonContext<'a> {
    before: Vec<&'a str>,
    after: Vec<&'a str>,
}

/// OpenClaw's snippet limit.
pub(crate) const SNIPPET_CHARS: usize = 700;

impl<'a> JsonHit<'a> {
    /// The hit with its snippet cut at `snippet_chars`.
    pub(crate) fn of(hit: &'a Hit, snippet_chars: usize) -> Self {
        let context = (!hit.before.is_empty() || !hit.after.is_empty()).then(|| JsonContext {
            before: hit.before.iter().map(|n| n.body.as_str()).collect(),
            after: hit.after.iter().map(|n| n.body.as_str()).collect(),
        });
        JsonHit {
            path: &hit.path,
            start_line: hit.start_line,
            end_line: hit.end_line,
            score: round4(hit.score),
            snippet: snippet(&hit.body, snippet_chars),
            source: "memory",
            kind: hit.kind,
            date: hit.day.as_deref(),
            stamp: hit.stamp.as_deref(),
            heading: &hit.heading,
            text_score: hit.text_score.map(round4),
            vector_score: hit.vector_score.map(round4),
            context,
            withheld: &hit.withheld,
        }
    }
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// What `memory search --json` prints for `searched` (OpenClaw's
/// `memory_search` result plus the outcome's own fields), without its
/// closing newline.
pub(crate) fn search_json(searched: &Searched) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4096 + 1024 * searched.outcome.hits.len());
    if searched.disabled {
        serde_json::to_writer_pretty(
            &mut out,
            &serde_json::json!({
                "results": [],
                "disabled": true,
                "error": "memory search is off (agents.defaults.memorySearch.enabled)"
            }),
        )?;
    } else {
        serde_json::to_writer_pretty(&mut out, &SearchJson::of(searched))?;
    }
    Ok(out)
}

/// `memory search --json` when on: OpenClaw's fields, then the outcome's
/// own but its hits (how the query was read), written in one pass.
#[derive(Serialize)]
struct SearchJson<'a> {
    results: Vec<JsonHit<'a>>,
    provider: &'a str,
    model: Option<&'a str>,
    mode: &'a str,
    citations: &'static str,
    #[serde(flatten)]
    reading: QueryReading<'a>,
}

/// The fields of [`SearchOutcome`] but its hits, as it writes them.
///
/// [`SearchOutcome`]: crate::memory::index::search::SearchOutcome
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueryReading<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    time_range: Option<&'a crate::memory::when::DayRange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_phrase: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unmatched_time_phrase: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    entities: &'a [String],
}

impl<'a> SearchJson<'a> {
    fn of(searched: &'a Searched) -> SearchJson<'a> {
        let outcome = &searched.outcome;
        SearchJson {
            results: outcome
                .hits
                .iter()
                .map(|hit| JsonHit::of(hit, SNIPPET_CHARS))
                .collect(),
            provider: searched.semantic.provider,
            model: searched.semantic.model.as_deref(),
            mode: searched.semantic.mode,
            citations: "auto",
            reading: QueryReading {
                time_range: outcome.time_range.as_ref(),
                time_phrase: outcome.time_phrase.as_deref(),
                unmatched_time_phrase: outcome.unmatched_time_phrase.as_deref(),
                entities: &outcome.entities,
            },
        }
    }
}
