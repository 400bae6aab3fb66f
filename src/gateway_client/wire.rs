//! What a running gateway answers `GET /v1/status` with: the shape both
//! the gateway (which fills it) and the commands (which print it) share.

use serde::{Deserialize, Serialize};

/// `gateway status --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GatewayStatus {
    pub running: bool,
    pub pid: Option<u32>,
    pub address: Option<String>,
    pub port: Option<u16>,
    pub started_at_ms: Option<i64>,
    pub uptime_ms: Option<i64>,
    pub components: Vec<ComponentStatus>,
    pub next_heartbeat_at_ms: Option<i64>,
    pub next_cron_at_ms: Option<i64>,
    /// Searches answered, notes embedded, vectors held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_search: Option<MemorySearchStatus>,
}

impl GatewayStatus {
    pub(crate) fn not_running() -> GatewayStatus {
        GatewayStatus {
            running: false,
            pid: None,
            address: None,
            port: None,
            started_at_ms: None,
            uptime_ms: None,
            components: Vec::new(),
            next_heartbeat_at_ms: None,
            next_cron_at_ms: None,
            memory_search: None,
        }
    }
}

/// What `gateway status` shows of a component.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ComponentStatus {
    pub name: String,
    /// `starting`, `running`, `failing` (running, but a journal it
    /// writes cannot be synced), `restarting` or `stopped`.
    pub state: String,
    /// Restarts, and episodes of a journal it writes failing.
    pub restarts: u32,
    pub last_error: Option<String>,
}

/// What `gateway status` shows of memory search.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct MemorySearchStatus {
    /// Searches this gateway answered.
    pub searches: u64,
    /// Items it embedded in the background.
    pub embedded: u64,
    /// Items still without a vector, as of its last look.
    pub without_vector: Option<usize>,
    /// Whether the embedding provider is loaded (it is dropped when idle).
    pub provider_loaded: bool,
    /// How many times it was started.
    pub provider_starts: u64,
    /// Vectors held in memory.
    pub vectors_in_memory: usize,
}
