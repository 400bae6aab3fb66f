//! `almanac status`: where everything is and a one-line health summary per
//! subsystem, and the zone data in use (see `zone_data`). Read-only: it
//! creates no directory, file or database.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::GlobalOptions;
use super::zone_data::ZoneDatabase;
use crate::config::{self, Origin};
use crate::host::Host;
use crate::paths::{self, Paths};
use crate::store::{Store, StoreKind};
use crate::tasks::{Counts, Ledger};

/// Files whose presence tells a user what kind of workspace this is.
const WORKSPACE_FILES: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "IDENTITY.md",
    "TOOLS.md",
    "MEMORY.md",
    "HEARTBEAT.md",
];

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusReport {
    pub version: &'static str,
    pub profile: String,
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    pub config_path: PathBuf,
    pub store_path: PathBuf,
    pub index_path: PathBuf,
    /// The zone data almanac reads, and whether the system's differs for
    /// the user's zone.
    pub time_zone_database: ZoneDatabase,
    pub subsystems: Subsystems,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Subsystems {
    pub state_dir: DirStatus,
    pub config: ConfigStatus,
    pub workspace: WorkspaceStatus,
    pub store: StoreStatus,
    pub index: StoreStatus,
    /// Absent when the config file is unusable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStatus>,
    pub heartbeat: HeartbeatStatus,
    /// Queued and running tasks and the audit's findings now; absent when
    /// the ledger cannot be read (the store's status says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Counts>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemoryStatus {
    pub enabled: bool,
    pub root: PathBuf,
    pub long_term_lines: usize,
    pub daily_files: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HeartbeatStatus {
    pub exists: bool,
    /// The file is not valid (the next heartbeat command repairs it).
    pub corrupt: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    pub events_total: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DirStatus {
    pub exists: bool,
    pub origin: Origin,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConfigStatus {
    pub exists: bool,
    pub origin: Origin,
    pub valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub unknown_keys: Vec<String>,
    /// Settings that could not be used as given.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkspaceStatus {
    pub exists: bool,
    pub origin: Origin,
    /// Which of the well-known workspace files are present.
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoreStatus {
    pub exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u32>,
    pub latest_schema_version: u32,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StatusReport {
    /// Whether every subsystem is usable (the exit code of `status`).
    pub(crate) fn healthy(&self) -> bool {
        self.subsystems.config.valid
            && self.subsystems.store.error.is_none()
            && self.subsystems.index.error.is_none()
    }
}

/// Gathers the report. Only an unusable state location (bad profile, no
/// home) or a bad `--set` is an error; a broken config file is reported
/// inside the report.
pub(crate) fn collect(options: &GlobalOptions, host: &Host) -> anyhow::Result<StatusReport> {
    let state = paths::resolve_state(&options.paths, host)?;
    tracing::debug!(state_dir = %state.state_dir.display(), profile = %state.profile, "state location resolved");
    let state_dir_exists = state.state_dir.is_dir();
    let config_origin = state.config_origin;
    let values = options.config_flag_values();
    let (config_status, layered) = match config::load(&state.config_path, host, &values) {
        // A bad `--set` is the invocation's fault, not the file's.
        Err(err @ (config::ConfigError::UnknownKey(_) | config::ConfigError::BadValue { .. })) => {
            return Err(err.into());
        }
        Ok(loaded) => (
            ConfigStatus {
                exists: loaded.file.exists,
                origin: config_origin,
                valid: true,
                error: None,
                unknown_keys: loaded.file.unknown_keys.clone(),
                warnings: loaded.warnings.clone(),
            },
            Some(loaded),
        ),
        Err(err) => (
            ConfigStatus {
                exists: state.config_path.exists(),
                origin: config_origin,
                valid: false,
                error: Some(error_chain(&anyhow::Error::new(err))),
                unknown_keys: Vec::new(),
                warnings: Vec::new(),
            },
            // Without a usable file the flag and environment layers still
            // decide the workspace.
            config::load_without_file(&state.config_path, host, &values).ok(),
        ),
    };
    let user_zone = layered
        .as_ref()
        .and_then(|l| l.config.agents.defaults.user_timezone.as_deref())
        .and_then(|name| jiff::tz::TimeZone::get(name).ok())
        .unwrap_or_else(|| host.time_zone().clone());
    let time_zone_database =
        ZoneDatabase::describe(&user_zone, &host.system_zoneinfo_dir(), host.now_ts());
    let key = "agents.defaults.workspace";
    let workspace_value = layered
        .as_ref()
        .and_then(|l| l.config.agents.defaults.workspace.clone());
    let workspace_origin = layered.as_ref().map_or(Origin::Default, |l| l.origin(key));
    let state_dir_origin = state.state_dir_origin;
    let paths = paths::resolve_workspace(state, workspace_value.as_deref(), workspace_origin, host);
    let memory = match (&config_status.error, layered) {
        (None, Some(config)) => {
            let app = super::App::with_config(host.clone(), paths.clone(), config);
            let memory = app.memory();
            let stats = memory.stats();
            Some((
                MemoryStatus {
                    enabled: memory.settings.enabled,
                    root: memory.root.clone(),
                    long_term_lines: stats.long_term_lines,
                    daily_files: stats.daily_files,
                },
                memory.index_path,
            ))
        }
        _ => None,
    };
    let index_path = memory
        .as_ref()
        .map_or_else(|| paths.workspace_index(), |(_, p)| p.clone());
    Ok(StatusReport {
        version: env!("CARGO_PKG_VERSION"),
        profile: paths.profile.clone(),
        state_dir: paths.state_dir.clone(),
        workspace: paths.workspace.clone(),
        config_path: paths.config_path.clone(),
        store_path: paths.state_store(),
        index_path: index_path.clone(),
        time_zone_database,
        subsystems: Subsystems {
            state_dir: DirStatus {
                exists: state_dir_exists,
                origin: state_dir_origin,
            },
            config: config_status,
            workspace: workspace_status(&paths),
            store: store_status(&paths.state_store(), StoreKind::State),
            index: store_status(&index_path, StoreKind::Index),
            memory: memory.map(|(m, _)| m),
            heartbeat: heartbeat_status(&paths),
            tasks: task_counts(&paths, host),
        },
    })
}

fn workspace_status(paths: &Paths) -> WorkspaceStatus {
    let ws = &paths.workspace;
    let files = WORKSPACE_FILES
        .iter()
        .filter(|name| ws.join(name).is_file())
        .map(|name| name.to_string())
        .collect();
    WorkspaceStatus {
        exists: ws.is_dir(),
        origin: paths.workspace_origin,
        files,
    }
}

/// Reads `heartbeat.json` without repairing it (status changes nothing).
fn heartbeat_status(paths: &Paths) -> HeartbeatStatus {
    let path = paths.state_dir.join("heartbeat.json");
    let mut status = HeartbeatStatus {
        exists: path.exists(),
        corrupt: false,
        last_activity: None,
        when: None,
        events_total: 0,
    };
    let Ok(bytes) = std::fs::read(&path) else {
        return status;
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(map)) => {
            let text = |k: &str| map.get(k).and_then(|v| v.as_str()).map(str::to_string);
            status.last_activity = text("last_activity");
            status.when = text("when");
            let history = map
                .get("history")
                .and_then(|h| h.as_array())
                .map_or(0, Vec::len);
            status.events_total = map
                .get("events_total")
                .and_then(|v| v.as_u64())
                .unwrap_or(history as u64);
        }
        _ => status.corrupt = true,
    }
    status
}

/// The ledger's numbers, read without creating or migrating anything.
fn task_counts(paths: &Paths, host: &Host) -> Option<Counts> {
    // No store yet: no tasks, and no database to open for saying so.
    if !paths.state_store().exists() {
        return Some(Counts::default());
    }
    let counted = Ledger::open_for_reading(&paths.state_store())
        .and_then(|ledger| ledger.counts(host.now_ms()));
    match counted {
        Ok(counts) => Some(counts),
        Err(err) => {
            tracing::debug!(%err, "task ledger unreadable");
            None
        }
    }
}

fn store_status(path: &Path, kind: StoreKind) -> StoreStatus {
    let latest = kind.migrations().last().map_or(0, |m| m.version);
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut status = StoreStatus {
        exists: path.exists(),
        schema_version: None,
        latest_schema_version: latest,
        bytes,
        error: None,
    };
    match Store::open_existing_read_only(path).and_then(|conn| match conn {
        Some(conn) => Store::schema_version(&conn).map(Some),
        None => Ok(None),
    }) {
        Ok(version) => status.schema_version = version,
        Err(err) => status.error = Some(error_chain(&anyhow::Error::new(err))),
    }
    status
}

/// `message: cause: cause` on one line.
pub(crate) fn error_chain(err: &anyhow::Error) -> String {
    err.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}
