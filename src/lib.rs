//! almanac: the memory, time and skills core of a personal AI agent.
//!
//! See `ARCHITECTURE.md` for the map of modules and their invariants.
//!
//! The library is the executable's: its public surface is the command
//! line ([`cli::main`], and [`cli::Cli`], whose command tree a test walks)
//! plus what the integration tests reach directly ([`testing`]), so the
//! compiler sees which code nothing calls.

#![warn(unreachable_pub)]
#![warn(clippy::too_many_lines)]

pub(crate) mod activity;
pub(crate) mod agent;
pub(crate) mod agents;
pub(crate) mod app;
pub(crate) mod channels;
pub(crate) mod child;
pub mod cli;
pub(crate) mod config;
pub(crate) mod cron;
pub(crate) mod delivery;
pub(crate) mod durable;
pub(crate) mod engine;
pub(crate) mod entry;
pub(crate) mod gateway;
pub(crate) mod gateway_client;
pub(crate) mod hooks;
pub(crate) mod host;
pub(crate) mod mcp;
pub(crate) mod memory;
pub(crate) mod par;
pub(crate) mod paths;
pub(crate) mod provider;
pub(crate) mod session;
pub(crate) mod skills;
pub(crate) mod store;
pub(crate) mod tasks;
pub(crate) mod trigger;

// The system allocator for short commands, mimalloc for the gateway from
// its start (see `host::allocator`). SQLite always uses the system's.
#[global_allocator]
static ALLOCATOR: host::allocator::Allocator = host::allocator::Allocator;

/// What the integration tests (`tests/cli`) use besides the executable:
/// the task ledger, to record tasks as a running gateway does before the
/// commands read them, the outbox, to append to it as a writer does, and
/// the cron job store and run logs, to record runs as the gateway does;
/// and the cron slot ledger, which `examples/cron_ledger.rs` drives as the
/// gateway's runner does to measure its size (`bench/cron_ledger.sh`).
#[doc(hidden)]
pub mod testing {
    pub use crate::tasks::Ledger;
    pub use crate::tasks::record::{Lease, NewTask, Terminal};
    pub use crate::tasks::vocab::{DeliveryStatus, Runtime, TerminalStatus};

    /// Appends an entry to the outbox of `state_dir` as a command does
    /// (locked, synced); returns its id. `source`: heartbeat, cron or hook.
    pub fn append_outbox(
        state_dir: &std::path::Path,
        source: &str,
        session_key: &str,
        text: &str,
        ts_ms: i64,
    ) -> std::io::Result<String> {
        let item = crate::delivery::Item {
            source: source.parse().map_err(std::io::Error::other)?,
            session_key: session_key.to_string(),
            agent_id: "main".to_string(),
            text: text.to_string(),
            task_id: None,
            to: None,
            channel: None,
            account_id: None,
        };
        crate::delivery::outbox::append_synced(&state_dir.join("outbox"), &item, ts_ms)
            .map(|entry| entry.id)
    }

    /// The job store of `state_dir` at its default place, as the gateway
    /// uses it (cron expressions without a zone in UTC).
    fn cron_store(state_dir: &std::path::Path) -> crate::cron::CronStore {
        crate::cron::CronStore::new(
            state_dir.join("cron").join("jobs.json"),
            state_dir.join("almanac.sqlite"),
            jiff::tz::TimeZone::UTC,
        )
    }

    /// Logs a finished run of `job_id` as the gateway does after a run
    /// (`status`: ok, error or skipped), with the default limits.
    pub fn append_cron_run(
        state_dir: &std::path::Path,
        job_id: &str,
        status: &str,
        summary: &str,
        ts_ms: i64,
    ) -> std::io::Result<()> {
        let record = crate::cron::runlog::RunRecord {
            status: Some(crate::cron::job::RunStatus::parse(status)),
            summary: Some(summary.to_string()),
            run_at_ms: Some(ts_ms - 1_000),
            duration_ms: Some(1_000),
            ..crate::cron::runlog::RunRecord::finished(job_id, ts_ms)
        };
        let limits = (&crate::config::CronRunLogConfig::default()).into();
        crate::cron::runlog::append(&cron_store(state_dir).runs_dir(), &record, limits)
            .map(|_| ())
            .map_err(std::io::Error::other)
    }

    /// The cron slot ledger of a state store, claimed, ended and trimmed
    /// as the gateway's runner does it.
    pub struct CronSlots(crate::cron::slots::SlotLedger);

    impl CronSlots {
        /// Opens (creating and migrating) the state store at `path`.
        pub fn open(path: &std::path::Path) -> std::io::Result<CronSlots> {
            let store = crate::store::Store::open(path, crate::store::StoreKind::State)
                .map_err(std::io::Error::other)?;
            Ok(CronSlots(crate::cron::slots::SlotLedger::new(store.conn)))
        }

        /// Claims each `(job, slot)` as due on time for the gateway start
        /// `generation`, in one transaction; how many were claimed.
        pub fn claim_due(
            &mut self,
            slots: &[(String, i64)],
            generation: i64,
            now_ms: i64,
        ) -> std::io::Result<usize> {
            let slots: Vec<(String, i64, crate::cron::slots::SlotTrigger)> = slots
                .iter()
                .map(|(job, slot)| (job.clone(), *slot, crate::cron::slots::SlotTrigger::Due))
                .collect();
            self.0
                .claim(&slots, generation, now_ms)
                .map(|claimed| claimed.len())
                .map_err(std::io::Error::other)
        }

        /// Records each `(job, slot, task id)` as ended well, in one
        /// transaction.
        pub fn finish_ok(
            &mut self,
            slots: &[(String, i64, String)],
            now_ms: i64,
        ) -> std::io::Result<()> {
            let ended: Vec<crate::cron::slots::EndedSlot> = slots
                .iter()
                .map(|(job, slot, task)| {
                    let how = crate::cron::slots::Ended::Ok;
                    (job.clone(), *slot, how, None, Some(task.clone()))
                })
                .collect();
            self.0.finish(&ended, now_ms).map_err(std::io::Error::other)
        }

        /// Cuts the history back to its budget, as the runner does every
        /// hour; how many rows went.
        pub fn trim(&mut self) -> std::io::Result<usize> {
            self.0
                .trim(crate::cron::slots::Budget::DEFAULT)
                .map_err(std::io::Error::other)
        }
    }

    /// Records the runtime state of a job (a JSON object in the file's
    /// shape) as the gateway does after a run.
    pub fn record_cron_state(
        state_dir: &std::path::Path,
        job_id: &str,
        state: serde_json::Value,
        now_ms: i64,
    ) -> std::io::Result<()> {
        let state = serde_json::from_value(state).map_err(std::io::Error::other)?;
        let now = jiff::Timestamp::from_millisecond(now_ms).map_err(std::io::Error::other)?;
        cron_store(state_dir)
            .update_states(&[(job_id.to_string(), state)], now)
            .map(|_| ())
            .map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod architecture_tests;
