//! What the host gives a command: environment variables, home directory,
//! working directory, the running executable and the clock; the
//! process's allocator ([`allocator`]) and the signals that stop it
//! ([`signals`]).
//!
//! Invariants: nothing below the CLI reads `std::env` or the system clock
//! directly; it receives a [`Host`] and asks its [`Clock`] for the time
//! each time it needs it (never a copy frozen at start-up, which a
//! long-running gateway would keep for days). Tests build one by hand, so every
//! behaviour that depends on the environment or on "now" is reproducible.
//! All boolean environment values go through [`parse_bool`], so `SECURITY=0`,
//! `SECURITY=false` and `SECURITY=off` mean the same thing everywhere.

pub(crate) mod allocator;
mod clock;
pub(crate) mod signals;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::ZonedDateTime;
use jiff::tz::TimeZone;

pub(crate) use clock::{Clock, FixedClock, SystemClock};
#[cfg(test)]
pub(crate) use clock::{ManualClock, TokioClock};

/// A snapshot of the process environment and clock.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    vars: BTreeMap<String, String>,
    pub home: Option<PathBuf>,
    pub cwd: PathBuf,
    /// The absolute path of the running almanac executable (`None` when
    /// the system cannot tell, and in hand-built hosts until set).
    exe: Option<PathBuf>,
    /// What commands treat as "now" (`--now` / `ALMANAC_NOW` fix it).
    clock: Arc<dyn Clock>,
    /// The real time, for file freshness checks, which compare against
    /// real modification times even when "now" is pretended.
    wall: Arc<dyn Clock>,
    /// The host's time zone ("now" is shown in it).
    zone: TimeZone,
}

impl Host {
    /// Reads the real process environment. `ALMANAC_NOW` (an RFC 3339
    /// timestamp, optionally with a `[Zone/Name]` suffix) fixes the clock for
    /// reproducible runs.
    pub(crate) fn from_process() -> Result<Host, HostError> {
        let vars = process_vars();
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Host::of_parts(vars, cwd, std::env::current_exe().ok(), TimeZone::system()).with_env_now()
    }

    /// The host of a command that sent its command line to this process
    /// (the gateway answering it): the command's variables and working
    /// directory, this process's executable and time zone (the caller has
    /// checked that the command's `TZ` and `TZDIR` are this process's).
    /// `ALMANAC_NOW` fixes its clock as in [`Host::from_process`].
    pub(crate) fn for_command(
        &self,
        vars: BTreeMap<String, String>,
        cwd: PathBuf,
    ) -> Result<Host, HostError> {
        Host::of_parts(vars, cwd, self.exe.clone(), self.zone.clone()).with_env_now()
    }

    /// Just enough of this process's host to find its state directory:
    /// its variables and working directory, in UTC (its time is not read).
    pub(crate) fn for_paths(vars: BTreeMap<String, String>, cwd: PathBuf) -> Host {
        Host::of_parts(vars, cwd, None, TimeZone::UTC)
    }

    fn of_parts(
        vars: BTreeMap<String, String>,
        cwd: PathBuf,
        exe: Option<PathBuf>,
        zone: TimeZone,
    ) -> Host {
        let home = vars
            .get("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(std::env::home_dir);
        Host {
            vars,
            home,
            cwd,
            exe,
            clock: Arc::new(SystemClock),
            wall: Arc::new(SystemClock),
            zone,
        }
    }

    /// `ALMANAC_NOW` (an RFC 3339 timestamp, optionally with a
    /// `[Zone/Name]` suffix) fixes the clock.
    fn with_env_now(mut self) -> Result<Host, HostError> {
        if let Some(text) = self.var("ALMANAC_NOW") {
            let now = parse_now(text)?;
            self.set_now(now);
        }
        Ok(self)
    }

    /// The current instant in the host's time zone.
    pub(crate) fn now(&self) -> ZonedDateTime {
        self.clock.now().to_zoned_datetime(self.zone.clone())
    }

    /// The current instant.
    pub(crate) fn now_ts(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    /// The current instant in epoch milliseconds.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now().as_millisecond()
    }

    /// The host's time zone.
    pub(crate) fn time_zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The real time, even when "now" is pretended (file freshness).
    pub(crate) fn wall_now(&self) -> jiff::Timestamp {
        self.wall.now()
    }

    /// The value of a variable; empty values count as unset.
    pub(crate) fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The value of a variable, including an explicitly empty one.
    pub(crate) fn raw_var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// All variables, for handing a filtered environment to children.
    pub(crate) fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }

    /// The same host seeing only the variables named in `keep`: what a
    /// process started with just those would see (a service's unit).
    pub(crate) fn with_only_vars(&self, keep: &[&str]) -> Host {
        let mut host = self.clone();
        host.vars.retain(|name, _| keep.contains(&name.as_str()));
        host
    }

    /// Where the system keeps its copy of the IANA time zone database:
    /// `TZDIR` (as the C library reads it), else `/usr/share/zoneinfo`.
    /// almanac reads zones from its own bundled copy; the system's is only
    /// compared with it (`status`).
    pub(crate) fn system_zoneinfo_dir(&self) -> PathBuf {
        self.var("TZDIR")
            .map_or_else(|| PathBuf::from("/usr/share/zoneinfo"), PathBuf::from)
    }

    /// The absolute path of the running almanac executable.
    pub(crate) fn exe(&self) -> Option<&Path> {
        self.exe.as_deref()
    }

    /// Fixes "now" at `now`, shown in its zone (the `--now` flag).
    pub(crate) fn set_now(&mut self, now: ZonedDateTime) {
        self.zone = now.time_zone().clone();
        self.clock = Arc::new(FixedClock(now.timestamp()));
    }

    /// Expands a leading `~` and makes `path` absolute against the working
    /// directory.
    pub(crate) fn resolve_path(&self, path: &str) -> PathBuf {
        let expanded = match (path.strip_prefix('~'), &self.home) {
            (Some(""), Some(home)) => home.clone(),
            (Some(rest), Some(home)) if rest.starts_with('/') => {
                home.join(rest.trim_start_matches('/'))
            }
            _ => PathBuf::from(path),
        };
        if expanded.is_absolute() {
            expanded
        } else {
            self.cwd.join(expanded)
        }
    }

    /// Shows `path` with the home directory as `~`.
    pub(crate) fn tilde(&self, path: &Path) -> String {
        match &self.home {
            Some(home) => match path.strip_prefix(home) {
                Ok(rest) if rest.as_os_str().is_empty() => "~".to_string(),
                Ok(rest) => format!("~/{}", rest.display()),
                Err(_) => path.display().to_string(),
            },
            None => path.display().to_string(),
        }
    }
}

/// How tests build a host by hand.
#[cfg(test)]
impl Host {
    /// A host with exactly the given variables.
    pub(crate) fn with_vars<I, K, V>(vars: I, home: &Path, cwd: &Path, now: ZonedDateTime) -> Host
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Host {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            home: Some(home.to_path_buf()),
            cwd: cwd.to_path_buf(),
            exe: None,
            clock: Arc::new(FixedClock(now.timestamp())),
            wall: Arc::new(FixedClock(now.timestamp())),
            zone: now.time_zone().clone(),
        }
    }

    /// Replaces the clock.
    pub(crate) fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    /// Sets the running executable's path.
    pub(crate) fn set_exe(&mut self, path: PathBuf) {
        self.exe = Some(path);
    }
}

/// Errors reading the host environment.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostError {
    #[error("invalid time `{0}`: expected an RFC 3339 timestamp such as 2026-11-29T09:00:00+01:00")]
    BadNow(String),
}

/// Fixes the sentence model's thread count for the process when the user
/// has not (`RAYON_NUM_THREADS`). The model's kernels look the count up at
/// every matrix product and, without it, parse `/proc/cpuinfo` each time
/// (a search's query pays that dozens of times); the count is the
/// parallelism the OS grants, read once. Called from `main`, before any
/// thread starts, by the commands that may run the model.
pub(crate) fn pin_compute_threads() {
    const NAME: &str = "RAYON_NUM_THREADS";
    if std::env::var_os(NAME).is_some() {
        return;
    }
    let threads = compute_threads();
    // SAFETY: called at the top of `main`, while the process has one
    // thread, so nothing reads the environment concurrently.
    unsafe { std::env::set_var(NAME, threads.to_string()) };
}

/// The parallelism the OS grants this process, read once (each reading
/// opens the cgroup files).
pub(crate) fn compute_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS
        .get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

/// Parses a `--now` / `ALMANAC_NOW` value: RFC 3339 with offset, optionally
/// with a bracketed IANA zone; a value without a zone is read in the host's
/// zone.
/// This process's variables whose name and value are UTF-8.
pub(crate) fn process_vars() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// This process's arguments after its name, if every one is UTF-8.
pub(crate) fn process_args() -> Option<Vec<String>> {
    std::env::args_os()
        .skip(1)
        .map(|arg| arg.into_string().ok())
        .collect()
}

/// This process's working directory.
pub(crate) fn process_cwd() -> Option<PathBuf> {
    std::env::current_dir().ok()
}

pub(crate) fn parse_now(text: &str) -> Result<ZonedDateTime, HostError> {
    let text = text.trim();
    if let Ok(zoned) = text.parse::<ZonedDateTime>() {
        return Ok(zoned);
    }
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Ok(ts.to_zoned_datetime(jiff::tz::TimeZone::system()));
    }
    if let Ok(dt) = text.parse::<jiff::civil::DateTime>() {
        return dt
            .to_zoned_datetime(jiff::tz::TimeZone::system())
            .map_err(|_| HostError::BadNow(text.to_string()));
    }
    Err(HostError::BadNow(text.to_string()))
}

/// The one parser for boolean settings: `1/true/yes/on` and
/// `0/false/no/off`, case-insensitive, surrounding whitespace ignored.
pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The nice value of the threads that do a daemon's bookkeeping (group
/// commits, feeding accepted records on): below the threads that answer
/// requests, so a request never waits out a bookkeeping time slice.
pub(crate) const BACKGROUND_NICE: i32 = 10;

/// The text of this process's `/proc/self/status` (memory figures), if
/// the system has one.
pub(crate) fn own_status_text() -> Option<String> {
    std::fs::read_to_string("/proc/self/status").ok()
}

/// Lowers the calling thread's CPU priority to [`BACKGROUND_NICE`] (Linux
/// keeps a nice value per thread). For threads that do nothing else for
/// their whole life: an unprivileged process cannot raise it again.
pub(crate) fn lower_this_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority only read and set the calling
    // thread's scheduling priority.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        Host::with_vars(
            [("EMPTY", ""), ("FLAG", " Off ")],
            Path::new("/home/u"),
            Path::new("/work"),
            "2026-11-29T09:00:00+00:00[UTC]".parse().unwrap(),
        )
    }

    #[test]
    fn bool_values_table() {
        for (text, want) in [
            ("1", Some(true)),
            ("TRUE", Some(true)),
            ("yes", Some(true)),
            ("On", Some(true)),
            ("0", Some(false)),
            ("false", Some(false)),
            (" no ", Some(false)),
            ("OFF", Some(false)),
            ("", None),
            ("2", None),
            ("maybe", None),
        ] {
            assert_eq!(parse_bool(text), want, "{text:?}");
        }
    }

    #[test]
    fn empty_variables_count_as_unset_except_raw() {
        let h = host();
        assert_eq!(h.var("EMPTY"), None);
        assert_eq!(h.raw_var("EMPTY"), Some(""));
        assert_eq!(h.var("FLAG").and_then(parse_bool), Some(false));
        assert_eq!(h.var("MISSING"), None);
    }

    #[test]
    fn a_host_can_be_narrowed_to_named_variables() {
        let mut h = host();
        h.set_exe(PathBuf::from("/opt/almanac"));
        let narrowed = h.with_only_vars(&["FLAG", "MISSING"]);
        assert_eq!(narrowed.vars().keys().collect::<Vec<_>>(), ["FLAG"]);
        assert_eq!(narrowed.var("FLAG"), Some(" Off "));
        assert_eq!(narrowed.exe(), Some(Path::new("/opt/almanac")));
        assert_eq!(narrowed.cwd, h.cwd);
    }

    #[test]
    fn paths_expand_tilde_and_become_absolute() {
        let h = host();
        for (input, want) in [
            ("~", "/home/u"),
            ("~/x/y", "/home/u/x/y"),
            ("rel/dir", "/work/rel/dir"),
            ("/abs", "/abs"),
            ("~other", "/work/~other"),
        ] {
            assert_eq!(h.resolve_path(input), PathBuf::from(want), "{input}");
        }
        assert_eq!(h.tilde(Path::new("/home/u/.almanac")), "~/.almanac");
        assert_eq!(h.tilde(Path::new("/home/u")), "~");
        assert_eq!(h.tilde(Path::new("/elsewhere")), "/elsewhere");
    }

    #[test]
    fn now_accepts_rfc3339_with_and_without_zone() {
        let z = parse_now("2026-11-29T09:00:00+01:00[Europe/Paris]").unwrap();
        assert_eq!(z.time_zone().iana_name(), Some("Europe/Paris"));
        let ts = parse_now("2026-11-29T08:00:00Z").unwrap();
        assert_eq!(ts.timestamp(), z.timestamp());
        assert!(parse_now("yesterday").is_err());
    }

    /// "Now" is asked of the clock each time, never kept from start-up,
    /// while the real time for file freshness stays the host's own.
    #[test]
    fn now_follows_the_clock_it_is_given() {
        let mut h = host();
        let start: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let clock = ManualClock::new(start);
        h.set_clock(Arc::new(clock.clone()));
        assert_eq!(h.now_ts(), start);
        clock.advance(std::time::Duration::from_secs(90));
        assert_eq!(h.now_ms() - start.as_millisecond(), 90_000);
        assert_eq!(h.now().timestamp(), h.now_ts());
        assert_eq!(
            h.wall_now(),
            "2026-11-29T09:00:00Z".parse::<jiff::Timestamp>().unwrap()
        );
    }
}
