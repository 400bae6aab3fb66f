//! `almanac cron …`: scheduled jobs (`add`, `edit`, `rm`, `list`,
//! `status`, `enable`, `disable`, `runs`, `run`) and cron schedules
//! (`next`). Each subcommand is one variant of [`CronCommand`] and one
//! small function here; what it computes lives in `src/app`.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::JsonFlag;
use super::output::{print_json, warn};
use super::values;
use crate::app::cron::{self, CronStatus, DeliveryChoice, JobChanged, JobFlags, Removed};
use crate::app::cron_next::{self, NextFires, NextRequest};
use crate::app::{App, GlobalOptions};
use crate::cron::index::{JobLine, MAX_PAGE};
use crate::cron::job::{CatchUp, ScheduleKind, THINKING_LEVELS, WakeMode};
use crate::cron::runlog::{MAX_LIMIT, RunPage, RunQuery};
use crate::cron::{EnabledFilter, ListQuery, Listing, SortBy, SortDir};
use crate::host::Host;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum CronCommand {
    /// Show the next fire times of a cron expression
    Next(NextArgs),
    /// Add a job: a name, one schedule (--at, --every, --cron) and what it does (--system-event or --message)
    #[command(visible_alias = "create")]
    Add(Box<AddArgs>),
    /// Change a job: only the fields whose flags are given
    Edit(Box<EditArgs>),
    /// Remove a job
    #[command(visible_aliases = ["remove", "delete"])]
    Rm {
        /// Job id (or its first characters)
        id: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// List enabled jobs, soonest first (--all: disabled ones too)
    List(ListArgs),
    /// Whether jobs run, where they are kept, how many, and the next wake
    Status(JsonFlag),
    /// Let a job run again
    Enable {
        /// Job id (or its first characters)
        id: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Stop a job from running (it is kept)
    Disable {
        /// Job id (or its first characters)
        id: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A job's finished runs, newest first
    Runs {
        /// Job id (or its first characters)
        #[arg(long)]
        id: String,
        /// Show at most N runs
        #[arg(long, value_name = "N", default_value_t = crate::cron::runlog::DEFAULT_LIMIT, value_parser = run_limit)]
        limit: usize,
        /// Skip the N newest runs
        #[arg(long, value_name = "N", default_value_t = 0)]
        offset: usize,
        /// Only runs that ended so (ok, error, skipped)
        #[arg(long, value_name = "STATUS")]
        status: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Run a job now through the running gateway
    Run {
        /// Job id (or its first characters)
        id: String,
        /// Only if it is due
        #[arg(long)]
        due: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Debug, Args)]
pub(super) struct NextArgs {
    /// The cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with a
    /// leading second; quote it, or give its fields as separate arguments
    #[arg(value_name = "EXPR", required = true, num_args = 1..)]
    expr: Vec<String>,
    /// Read the expression in this IANA time zone, e.g. Europe/Paris [default: the host's zone]
    #[arg(long, value_name = "TZ")]
    tz: Option<String>,
    /// List fire times after TIME (ISO 8601; UTC when it has no offset) [default: now]
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// How many fire times to list (1 to 1000)
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = values::cron_count)]
    count: usize,
    #[command(flatten)]
    json: JsonFlag,
}

#[derive(Debug, Args)]
pub(super) struct AddArgs {
    /// The job's name
    #[arg(long)]
    name: String,
    /// Add it disabled
    #[arg(long)]
    disabled: bool,
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    json: JsonFlag,
}

#[derive(Debug, Args)]
pub(super) struct EditArgs {
    /// Job id (or its first characters)
    id: String,
    /// A new name
    #[arg(long)]
    name: Option<String>,
    /// Let it run
    #[arg(long, conflicts_with = "disable")]
    enable: bool,
    /// Stop it from running (it is kept)
    #[arg(long)]
    disable: bool,
    /// Forget its agent (the default agent runs it)
    #[arg(long, conflicts_with = "agent")]
    clear_agent: bool,
    /// Forget the session it belongs to
    #[arg(long, conflicts_with = "session_key")]
    clear_session_key: bool,
    /// Turns get the full context again
    #[arg(long, conflicts_with = "light_context")]
    no_light_context: bool,
    /// Turns may use every tool again
    #[arg(long, conflicts_with = "tools")]
    clear_tools: bool,
    /// A failed delivery fails the run again
    #[arg(long, conflicts_with = "best_effort_deliver")]
    no_best_effort_deliver: bool,
    /// Alert after consecutive failures (default after 2, at most hourly)
    #[arg(long, conflicts_with = "no_failure_alert")]
    failure_alert: bool,
    /// Never alert about failures of this job
    #[arg(long)]
    no_failure_alert: bool,
    /// Alert after N consecutive failures
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    failure_alert_after: Option<u32>,
    /// The channel alerts go to
    #[arg(long, value_name = "CHANNEL")]
    failure_alert_channel: Option<String>,
    /// Where on the channel alerts go (a URL for webhook alerts)
    #[arg(long, value_name = "DEST")]
    failure_alert_to: Option<String>,
    /// The least time between two alerts (30m, 1h)
    #[arg(long, value_name = "DURATION")]
    failure_alert_cooldown: Option<String>,
    /// How alerts are sent
    #[arg(long, value_name = "MODE", value_parser = ["announce", "webhook"])]
    failure_alert_mode: Option<String>,
    /// The account alerts are sent from
    #[arg(long, value_name = "ID")]
    failure_alert_account_id: Option<String>,
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    json: JsonFlag,
}

// The flags `cron add` and `cron edit` share. (A plain comment: a doc
// comment here would become the help text of both commands.)
#[derive(Debug, Args)]
struct JobArgs {
    /// What the job is for
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// Remove an --at job after it ran successfully (the default)
    #[arg(long, conflicts_with = "keep_after_run")]
    delete_after_run: bool,
    /// Keep an --at job (disabled) after it ran
    #[arg(long)]
    keep_after_run: bool,
    /// The agent that runs it (default: the default agent)
    #[arg(long, value_name = "ID")]
    agent: Option<String>,
    /// Where it runs: main (a system event for the heartbeat), isolated (a fresh session each run), current (--session-key's session) or session:<id>
    #[arg(long, value_name = "TARGET")]
    session: Option<String>,
    /// The session the job belongs to (where reminders go back to)
    #[arg(long, value_name = "KEY")]
    session_key: Option<String>,
    /// When a main job's event is acted on: now, or at the next heartbeat
    #[arg(long, value_name = "MODE", value_parser = WakeMode::NAMES.to_vec())]
    wake: Option<String>,
    /// Run once at TIME: ISO-8601 (UTC without an offset, or in --tz), a delay such as 20m, or epoch ms
    #[arg(long, value_name = "TIME", conflicts_with_all = ["every", "cron"])]
    at: Option<String>,
    /// Run every DURATION (30s, 20m, 1.5h, 2d)
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["cron", "tz"])]
    every: Option<String>,
    /// Run on a cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// The IANA zone of --cron (default the host's) or of an --at time without an offset
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// Run a --cron job at a fixed offset within DURATION after each slot
    #[arg(long, value_name = "DURATION", conflicts_with = "exact")]
    stagger: Option<String>,
    /// Run a --cron job exactly on its slots (top-of-hour jobs are spread over 5 minutes otherwise)
    #[arg(long)]
    exact: bool,
    /// What it does: queue this system event in the main session
    #[arg(long, value_name = "TEXT", conflicts_with = "message")]
    system_event: Option<String>,
    /// What it does: run an agent turn with this message
    #[arg(long, value_name = "TEXT")]
    message: Option<String>,
    /// The turn's thinking level
    #[arg(long, value_name = "LEVEL", value_parser = THINKING_LEVELS.to_vec())]
    thinking: Option<String>,
    /// The turn's model (provider/model)
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// The turn's time limit in seconds (0: none)
    #[arg(long, value_name = "N")]
    timeout_seconds: Option<u64>,
    /// A lighter prompt: fewer workspace files and no recalled memory
    #[arg(long)]
    light_context: bool,
    /// The only tools the turn may use, comma-separated
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    tools: Option<Vec<String>>,
    /// Deliver the turn's result to the outbox (--channel and --to are kept for OpenClaw)
    #[arg(long, conflicts_with_all = ["deliver", "no_deliver", "webhook"])]
    announce: bool,
    /// The former spelling of --announce
    #[arg(long, conflicts_with_all = ["no_deliver", "webhook"])]
    deliver: bool,
    /// Deliver the result nowhere
    #[arg(long, conflicts_with = "webhook")]
    no_deliver: bool,
    /// Post the result to this http(s) URL
    #[arg(long, value_name = "URL")]
    webhook: Option<String>,
    /// The channel an announce goes to: last, or a channel id
    #[arg(long, value_name = "CHANNEL")]
    channel: Option<String>,
    /// Where on the channel an announce goes
    #[arg(long, value_name = "DEST")]
    to: Option<String>,
    /// The account an announce is sent from
    #[arg(long, value_name = "ID")]
    account: Option<String>,
    /// A failed delivery does not fail the run
    #[arg(long)]
    best_effort_deliver: bool,
    /// Slots missed while no gateway ran: once (one run for all), all (one run each) or skip (recorded as missed)
    #[arg(long, value_name = "POLICY", value_parser = CatchUp::NAMES.to_vec())]
    catch_up: Option<String>,
}

impl JobArgs {
    fn flags(self) -> JobFlags {
        let delivery = if self.announce || self.deliver {
            Some(DeliveryChoice::Announce {
                deprecated_flag: self.deliver,
            })
        } else if self.no_deliver {
            Some(DeliveryChoice::Nowhere)
        } else {
            self.webhook.map(DeliveryChoice::Webhook)
        };
        JobFlags {
            description: self.description,
            delete_after_run: (self.delete_after_run || self.keep_after_run)
                .then_some(self.delete_after_run),
            agent: self.agent,
            session: self.session,
            session_key: self.session_key,
            wake: self.wake,
            at: self.at,
            every: self.every,
            cron: self.cron,
            tz: self.tz,
            stagger: self.stagger,
            exact: self.exact,
            system_event: self.system_event,
            message: self.message,
            thinking: self.thinking,
            model: self.model,
            timeout_seconds: self.timeout_seconds,
            light_context: self.light_context.then_some(true),
            tools: self.tools,
            delivery,
            channel: self.channel,
            to: self.to,
            account: self.account,
            best_effort: self.best_effort_deliver.then_some(true),
            catch_up: self.catch_up,
            ..JobFlags::default()
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct ListArgs {
    /// Disabled jobs too
    #[arg(long, conflicts_with = "disabled")]
    all: bool,
    /// Only disabled jobs
    #[arg(long)]
    disabled: bool,
    /// Order by the next run (soonest first; none last), the last change, or the name
    #[arg(long, value_name = "FIELD", default_value = "nextRunAtMs", value_parser = ["nextRunAtMs", "updatedAtMs", "name"])]
    sort_by: String,
    /// Ascending or descending
    #[arg(long, value_name = "DIR", default_value = "asc", value_parser = ["asc", "desc"])]
    sort_dir: String,
    /// Show at most N jobs
    #[arg(long, value_name = "N", default_value_t = MAX_PAGE, value_parser = page_limit)]
    limit: usize,
    /// Skip the first N jobs
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: usize,
    /// Only jobs whose id, name, description or schedule contain TEXT (any case)
    #[arg(long, value_name = "TEXT")]
    query: Option<String>,
    #[command(flatten)]
    json: JsonFlag,
}

fn whole(text: &str, max: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number from 1 to {max}, got `{text}`"
        )),
    }
}

fn page_limit(text: &str) -> Result<usize, String> {
    whole(text, MAX_PAGE)
}

fn run_limit(text: &str) -> Result<usize, String> {
    whole(text, MAX_LIMIT)
}

pub(super) fn run(
    cmd: CronCommand,
    options: &GlobalOptions,
    host: Host,
) -> anyhow::Result<ExitCode> {
    // `cron next` needs no configuration.
    if let CronCommand::Next(args) = cmd {
        return next(args, &host);
    }
    let app = &super::load_app(options, host)?;
    match cmd {
        CronCommand::Next(_) => unreachable!("answered above"),
        CronCommand::Add(args) => add(app, *args),
        CronCommand::Edit(args) => edit(app, *args),
        CronCommand::Rm { id, json } => remove(app, &id, json.json),
        CronCommand::List(args) => list(app, args),
        CronCommand::Status(json) => status(app, json.json),
        CronCommand::Enable { id, json } => set_enabled(app, &id, true, json.json),
        CronCommand::Disable { id, json } => set_enabled(app, &id, false, json.json),
        CronCommand::Runs {
            id,
            limit,
            offset,
            status,
            json,
        } => runs(
            app,
            &id,
            RunQuery {
                limit,
                offset,
                status,
            },
            json.json,
        ),
        CronCommand::Run { id, due, json } => run_now(app, &id, due, json.json),
    }
}

fn add(app: &App, args: AddArgs) -> anyhow::Result<ExitCode> {
    let mut flags = args.job.flags();
    flags.name = Some(args.name);
    flags.enabled = Some(!args.disabled);
    let done = cron::add(app, &flags)?;
    print_changed(app, &done, "Added", args.json.json)
}

fn edit(app: &App, args: EditArgs) -> anyhow::Result<ExitCode> {
    let mut flags = args.job.flags();
    flags.name = args.name;
    flags.enabled = if args.enable {
        Some(true)
    } else if args.disable {
        Some(false)
    } else {
        None
    };
    flags.clear_agent = args.clear_agent;
    flags.clear_session_key = args.clear_session_key;
    if args.no_light_context {
        flags.light_context = Some(false);
    }
    flags.clear_tools = args.clear_tools;
    if args.no_best_effort_deliver {
        flags.best_effort = Some(false);
    }
    flags.failure_alert = if args.failure_alert {
        Some(true)
    } else if args.no_failure_alert {
        Some(false)
    } else {
        None
    };
    flags.failure_alert_after = args.failure_alert_after;
    flags.failure_alert_channel = args.failure_alert_channel;
    flags.failure_alert_to = args.failure_alert_to;
    flags.failure_alert_cooldown = args.failure_alert_cooldown;
    flags.failure_alert_mode = args.failure_alert_mode;
    flags.failure_alert_account_id = args.failure_alert_account_id;
    let done = cron::edit(app, &args.id, &flags)?;
    print_changed(app, &done, "Changed", args.json.json)
}

fn set_enabled(app: &App, id: &str, enabled: bool, json: bool) -> anyhow::Result<ExitCode> {
    let done = cron::set_enabled(app, id, enabled)?;
    print_changed(
        app,
        &done,
        if enabled { "Enabled" } else { "Disabled" },
        json,
    )
}

fn print_changed(app: &App, done: &JobChanged, verb: &str, json: bool) -> anyhow::Result<ExitCode> {
    done.warnings.iter().for_each(warn);
    if json {
        print_json(done)?;
        return Ok(ExitCode::SUCCESS);
    }
    let job = &done.job;
    let line = JobLine::of(&serde_json::to_value(job)?, app.host.time_zone());
    println!("{verb} {} \"{}\" ({}).", job.id, job.name, line.schedule);
    match (job.enabled, line.next_run_at_ms) {
        (false, _) => println!("It is disabled: it does not run."),
        (true, Some(ms)) => println!("Next run: {}.", app.local_time(ms)),
        (true, None) => println!("It has no next run."),
    }
    if job.deletes_after_run() {
        println!("It is removed after it ran successfully (--keep-after-run keeps it).");
    } else if job.schedule.kind == ScheduleKind::At {
        println!("It is kept, disabled, after it ran.");
    } else {
        println!(
            "Missed slots while no gateway runs: {}.",
            job.catch_up().as_str()
        );
    }
    for note in &done.notes {
        println!("Note: {note}.");
    }
    if !done.written {
        println!("Nothing changed: it already was so.");
    }
    Ok(ExitCode::SUCCESS)
}

fn remove(app: &App, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let done: Removed = cron::remove(app, id)?;
    done.warnings.iter().for_each(warn);
    if json {
        print_json(&done)?;
    } else if done.removed {
        println!("Removed {}.", done.id);
    } else {
        println!("{} was already gone.", done.id);
    }
    Ok(ExitCode::SUCCESS)
}

fn list(app: &App, args: ListArgs) -> anyhow::Result<ExitCode> {
    let query = ListQuery {
        enabled: if args.all {
            EnabledFilter::All
        } else if args.disabled {
            EnabledFilter::Disabled
        } else {
            EnabledFilter::Enabled
        },
        query: args.query,
        sort_by: match args.sort_by.as_str() {
            "updatedAtMs" => SortBy::UpdatedAtMs,
            "name" => SortBy::Name,
            _ => SortBy::NextRunAtMs,
        },
        sort_dir: if args.sort_dir == "desc" {
            SortDir::Desc
        } else {
            SortDir::Asc
        },
        limit: args.limit,
        offset: args.offset,
    };
    let listing = cron::list(app, &query)?;
    listing.warnings.iter().for_each(warn);
    if args.json.json {
        print_json(&listing)?;
    } else {
        print_listing(app, &listing, query.enabled);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_listing(app: &App, listing: &Listing, which: EnabledFilter) {
    if listing.jobs.is_empty() {
        match (listing.total, which) {
            (0, EnabledFilter::Enabled) => {
                println!("No enabled jobs (--all also shows disabled ones).")
            }
            (0, EnabledFilter::Disabled) => println!("No disabled jobs."),
            (0, EnabledFilter::All) => println!("No jobs."),
            _ => println!(
                "No jobs from {} on ({} in all).",
                listing.offset, listing.total
            ),
        }
        return;
    }
    let zone = app.host.time_zone();
    let rows: Vec<[String; 6]> = listing
        .jobs
        .iter()
        .map(|job| {
            let line = JobLine::of(job, zone);
            [
                line.id.chars().take(8).collect(),
                line.name,
                line.schedule,
                match (line.enabled, line.next_run_at_ms) {
                    (false, _) => "disabled".to_string(),
                    (true, Some(ms)) => app.local_time(ms),
                    (true, None) => "-".to_string(),
                },
                line.last_status.unwrap_or_else(|| "-".to_string()),
                line.target,
            ]
        })
        .collect();
    let header = ["Job", "Name", "Schedule", "Next run", "Last", "Target"];
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < cells.len() {
                out.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
    if let Some(next) = listing.next_offset {
        println!(
            "{}–{} of {}; --offset {next} shows more.",
            listing.offset + 1,
            next,
            listing.total
        );
    }
}

fn status(app: &App, json: bool) -> anyhow::Result<ExitCode> {
    let status: CronStatus = cron::status(app)?;
    status.warnings.iter().for_each(warn);
    if json {
        print_json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Cron: {}",
        if status.enabled {
            "on"
        } else {
            "off (cron.enabled is false)"
        }
    );
    println!("Store: {}", app.host.tilde(&status.store_path));
    println!("Jobs: {} ({} enabled)", status.jobs, status.enabled_jobs);
    match status.next_wake_at_ms {
        Some(ms) => println!("Next wake: {}", app.local_time(ms)),
        None => println!("Next wake: none"),
    }
    if !status.gateway_running {
        println!("Gateway: not running (jobs run only while it does: `almanac gateway run`)");
    }
    Ok(ExitCode::SUCCESS)
}

fn runs(app: &App, id: &str, query: RunQuery, json: bool) -> anyhow::Result<ExitCode> {
    let page: RunPage = cron::runs(app, id, &query)?;
    if page.unreadable > 0 {
        warn(format!(
            "skipped {} unreadable line(s) of the run log",
            page.unreadable
        ));
    }
    if json {
        print_json(&page)?;
        return Ok(ExitCode::SUCCESS);
    }
    if page.entries.is_empty() {
        println!("No runs of {}.", page.job_id);
        return Ok(ExitCode::SUCCESS);
    }
    for run in &page.entries {
        let when = app.local_time(run.run_at_ms.unwrap_or(run.ts));
        let status = run.status.as_ref().map_or("-", |s| s.as_str());
        let took = run
            .duration_ms
            .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
            .unwrap_or_else(|| "-".to_string());
        let text = run
            .error
            .as_deref()
            .or(run.summary.as_deref())
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("");
        println!("{when}  {status:<7}  {took:>7}  {text}");
    }
    if let Some(next) = page.next_offset {
        println!("… {} more (--offset {next}).", page.total - next);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_now(app: &App, id: &str, due: bool, json: bool) -> anyhow::Result<ExitCode> {
    let answer = cron::run(app, id, due)?;
    let ran = answer["ran"].as_bool() == Some(true) || answer["enqueued"].as_bool() == Some(true);
    if json {
        print_json(&answer)?;
    } else if ran {
        match answer["runId"].as_str() {
            Some(run_id) => println!(
                "Started {} ({run_id}).",
                answer["id"].as_str().unwrap_or(id)
            ),
            None => println!("Ran {}.", answer["id"].as_str().unwrap_or(id)),
        }
    } else {
        println!(
            "Did not run {}: {}.",
            answer["id"].as_str().unwrap_or(id),
            answer["reason"]
                .as_str()
                .unwrap_or("the gateway did not say why")
        );
    }
    Ok(if ran {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn next(args: NextArgs, host: &Host) -> anyhow::Result<ExitCode> {
    let expr = args.expr.join(" ");
    let fires = cron_next::next_fires(
        host,
        &NextRequest {
            expr: &expr,
            tz: args.tz.as_deref(),
            from: args.from.as_deref(),
            count: args.count,
        },
    )?;
    if args.json.json {
        print_json(&fires)?;
    } else {
        print_fires(&fires)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `Time zone: Europe/Paris`, then one line per fire time in that zone
/// with the UTC time beside it; a note when none is left.
fn print_fires(fires: &NextFires) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let zone_name = fires.zone.iana_name().unwrap_or("the host's time zone");
    writeln!(out, "Time zone: {zone_name}")?;
    for (instant, utc) in fires.instants.iter().zip(&fires.next) {
        let local = instant.to_zoned_datetime(fires.zone.clone());
        writeln!(out, "{} ({utc})", local.strftime("%Y-%m-%d %H:%M:%S %Q"))?;
    }
    if fires.next.is_empty() {
        writeln!(out, "No fire time before the year 3000.")?;
    }
    out.flush()?;
    Ok(())
}
