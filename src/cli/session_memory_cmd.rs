//! `almanac session-memory …` (Arka's commands and output shapes).

use std::io::Read;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use super::JsonFlag;
use super::output::{print_json, warn};
use super::values;
use crate::app::memory_json::JsonHit;
use crate::app::{App, session_memory};
use crate::memory::index::Hit;
use crate::memory::snippet;
use crate::memory::write::{AppendRequest, ClearScope};

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum SessionMemoryCommand {
    /// Append sanitized note to daily + optional MEMORY.md
    Append {
        /// The note (words are joined with spaces; `-` reads stdin; put `--` before a note that starts with `-`)
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
        /// Store as a long-term note in MEMORY.md (only there, unless --daily)
        #[arg(long)]
        long_term: bool,
        /// With --long-term, also keep the note in today's daily file
        #[arg(long)]
        daily: bool,
        /// Store the note even if it looks like a prompt injection
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Search the whole memory, best matches first
    Search {
        /// Words to look for (none: the most recent notes)
        #[arg(num_args = 0..)]
        query: Vec<String>,
        /// Maximum number of results (at most 1000)
        #[arg(long, default_value_t = 8, value_parser = values::limit)]
        limit: usize,
        /// Exit with status 1 when nothing matches
        #[arg(long)]
        exit_code: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print the memory recall block for a goal
    Context {
        /// What the context is for (a goal or a message); the words are joined
        #[arg(required = true, num_args = 1..)]
        goal: Vec<String>,
        /// Token budget [default: memory.session.contextBudgetTokens]
        #[arg(long)]
        budget: Option<usize>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show whether session memory is on and what it holds
    Status(JsonFlag),
    /// Clear daily notes, MEMORY.md, or both (into the trash)
    Clear {
        /// Clear MEMORY.md
        #[arg(long)]
        long_term: bool,
        /// Clear daily notes and MEMORY.md
        #[arg(long)]
        all: bool,
        /// daily, long_term or all
        #[arg(long, value_parser = parse_scope)]
        scope: Option<ClearScope>,
        /// Only daily files older than DAYS days
        #[arg(long, value_name = "DAYS", conflicts_with_all = ["long_term", "all"])]
        older_than: Option<u32>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

fn parse_scope(text: &str) -> Result<ClearScope, String> {
    ClearScope::parse(text).ok_or_else(|| {
        format!("invalid choice: '{text}' (choose from 'daily', 'long_term', 'all')")
    })
}

pub(super) fn run(cmd: SessionMemoryCommand, app: &App) -> anyhow::Result<ExitCode> {
    match cmd {
        SessionMemoryCommand::Append {
            text,
            long_term,
            daily,
            force,
            json,
        } => append(app, &text, long_term, daily, force, json),
        SessionMemoryCommand::Search {
            query,
            limit,
            exit_code,
            json,
        } => search(app, &query.join(" "), limit, exit_code, json),
        SessionMemoryCommand::Context { goal, budget, json } => {
            context(app, &goal.join(" "), budget, json)
        }
        SessionMemoryCommand::Status(flag) => status(app, flag),
        SessionMemoryCommand::Clear {
            long_term,
            all,
            scope,
            older_than,
            json,
        } => clear(app, long_term, all, scope, older_than, json),
    }
}

/// `session-memory append`: the words joined, or stdin for a lone `-`.
fn append(
    app: &App,
    text: &[String],
    long_term: bool,
    daily: bool,
    force: bool,
    json: JsonFlag,
) -> anyhow::Result<ExitCode> {
    let text = if text.len() == 1 && text[0] == "-" {
        let mut buf = String::new();
        std::io::stdin().read_to_string(&mut buf)?;
        buf
    } else {
        text.join(" ")
    };
    let req = AppendRequest {
        text: &text,
        long_term,
        also_daily: daily,
        force,
    };
    let appended = session_memory::append(app, &req)?;
    for w in &appended.warnings {
        warn(w);
    }
    if let Some(label) = appended.outcome.forced_past {
        warn(format!(
            "stored despite a prompt-injection pattern ({label}); it is withheld wherever memory is read back"
        ));
    }
    if json.json {
        print_json(&appended)?;
    } else {
        println!("Stored: {}", appended.outcome.preview);
        for line in appended.outcome.pruned.iter().flat_map(|p| p.moved_lines()) {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `session-memory search`.
fn search(
    app: &App,
    query: &str,
    limit: usize,
    exit_code: bool,
    json: JsonFlag,
) -> anyhow::Result<ExitCode> {
    let outcome = session_memory::search(app, query, limit)?;
    for w in &outcome.sync.warnings {
        warn(w);
    }
    if json.json {
        let results: Vec<JsonHit> = outcome
            .hits
            .iter()
            .map(|hit| JsonHit::of(hit, SNIPPET_CHARS))
            .collect();
        print_json(&json!({ "query": query, "results": results }))?;
    } else if outcome.hits.is_empty() {
        println!("No matching session notes.");
    } else {
        for hit in &outcome.hits {
            println!("{}", hit_line(hit));
        }
    }
    Ok(if exit_code && outcome.hits.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `session-memory context`.
fn context(
    app: &App,
    goal: &str,
    budget: Option<usize>,
    json: JsonFlag,
) -> anyhow::Result<ExitCode> {
    let block = session_memory::context(app, goal, budget)?;
    if json.json {
        print_json(&block)?;
    } else if block.text.is_empty() {
        println!("(no session memory context)");
    } else {
        println!("{}", block.text);
    }
    Ok(ExitCode::SUCCESS)
}

/// `session-memory status`.
fn status(app: &App, flag: JsonFlag) -> anyhow::Result<ExitCode> {
    let status = session_memory::status(app);
    if flag.json {
        print_json(&status)?;
    } else {
        println!(
            "Session memory: {}",
            if status.enabled { "on" } else { "off" }
        );
        println!("  Root: {}", status.root.display());
        println!(
            "  {} lines: {} (max {})",
            status
                .stats
                .long_term_path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy(),
            status.stats.long_term_lines,
            status.stats.long_term_max_lines
        );
        println!("  Daily note files: {}", status.stats.daily_files);
        match status.index_files {
            Some(n) => println!("  Index: {n} files ({})", status.index_path.display()),
            None => println!("  Index: not built yet (built by the first search)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `session-memory clear`: `--all` and `--long-term` win over `--scope`.
fn clear(
    app: &App,
    long_term: bool,
    all: bool,
    scope: Option<ClearScope>,
    older_than: Option<u32>,
    json: JsonFlag,
) -> anyhow::Result<ExitCode> {
    let scope = if all {
        ClearScope::All
    } else if long_term {
        ClearScope::LongTerm
    } else {
        scope.unwrap_or(ClearScope::Daily)
    };
    if older_than.is_some() && scope != ClearScope::Daily {
        return Err(super::UsageError::wrap(
            "--older-than applies to daily files only",
        ));
    }
    let cleared = session_memory::clear(app, scope, older_than)?;
    for w in &cleared.warnings {
        warn(w);
    }
    if json.json {
        print_json(&cleared)?;
    } else {
        let o = &cleared.outcome;
        println!(
            "Cleared session memory ({}): daily={} long_term={}",
            scope.as_str(),
            o.daily,
            if o.long_term { "True" } else { "False" }
        );
        if let Some(trash) = &o.trash {
            println!("Moved {} file(s) to {}:", o.moved.len(), trash.display());
            for rel in &o.moved {
                println!("  {rel}");
            }
            println!("To restore them:");
            for r in &o.restore {
                println!("  mv {} {}", shell_word(&r.from), shell_word(&r.to));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `path` as one shell word: as it is when that is safe, else in single
/// quotes.
fn shell_word(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// `[path:line] [stamp] text`, on one line, capped.
fn hit_line(hit: &Hit) -> String {
    let stamp = hit
        .stamp
        .as_ref()
        .map(|s| format!("[{s}] "))
        .unwrap_or_default();
    let body = hit.body.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "[{}:{}] {stamp}{}",
        hit.path,
        hit.start_line,
        snippet(&body, SNIPPET_CHARS)
    )
}

const SNIPPET_CHARS: usize = 300;
