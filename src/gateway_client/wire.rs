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
    /// The gateway process's memory: resident, and its own (private).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<ProcessMemory>,
}

/// A process's memory, in bytes: `rssBytes` everything resident (shared
/// pages of the executable and libraries included), `privateBytes` what
/// is its own (anonymous resident memory: heap, stacks, caches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProcessMemory {
    pub rss_bytes: u64,
    pub private_bytes: u64,
}

impl ProcessMemory {
    /// From the text of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, in kB).
    pub(crate) fn from_proc_status(text: &str) -> Option<ProcessMemory> {
        let field = |name: &str| -> Option<u64> {
            let line = text.lines().find(|l| l.starts_with(name))?;
            let kb: u64 = line[name.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(kb * 1024)
        };
        Some(ProcessMemory {
            rss_bytes: field("VmRSS:")?,
            private_bytes: field("RssAnon:")?,
        })
    }
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
            memory: None,
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
    /// Of those, the searches it answered for a command line sent over
    /// its command socket (`gateway.sock`).
    #[serde(default)]
    pub forwarded: u64,
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

#[cfg(test)]
mod tests {
    use super::ProcessMemory;

    #[test]
    fn memory_is_read_from_the_kernels_status_text() {
        let text =
            "Name:\talmanac\nVmRSS:\t    9400 kB\nRssAnon:\t    3100 kB\nRssFile:\t    6300 kB\n";
        assert_eq!(
            ProcessMemory::from_proc_status(text),
            Some(ProcessMemory {
                rss_bytes: 9400 * 1024,
                private_bytes: 3100 * 1024
            })
        );
        assert_eq!(ProcessMemory::from_proc_status("Name:\tx\n"), None);
    }
}
