//! The immutable skills snapshot a long-running process (the gateway)
//! hands to each session, and what keeps it current.
//!
//! * A [`Snapshot`] never changes; a new one replaces it with a higher
//!   `version` (a counter: versions only grow).
//! * [`SkillsManager::snapshot`] rebuilds when the snapshot is stale: a
//!   watched skill file changed, or an input changed (PATH, the variables
//!   skills require, `SKILLS_PATH`, `SKILL_PERMISSIONS`, the config file),
//!   so a change of environment or PATH is seen by the next request.
//! * The watcher ([`SkillsManager::watch`]) reacts to changes of `SKILL.md`
//!   and manifest files (and skill folders) under the roots, ignoring
//!   `.git`, `node_modules` and build folders, and fires once writes have
//!   been quiet for the debounce interval (250 ms by default).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, mpsc};
use std::time::{Duration, Instant};

use super::catalog::Catalog;
use super::parse::MANIFEST_NAMES;
use super::{SkillsInputs, SkillsReport};

/// Path segments whose changes never matter.
const IGNORED_SEGMENTS: &[&str] = &[
    ".git",
    "node_modules",
    "dist",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    "build",
    ".cache",
];

/// One immutable view of the skills.
#[derive(Debug)]
pub struct Snapshot {
    pub version: u64,
    pub report: SkillsReport,
    pub catalog: Catalog,
    /// Inputs it was built from (see [`fingerprint`]).
    pub fingerprint: u64,
}

/// What makes a snapshot stale besides skill files: the environment
/// values gating reads and the config.
pub fn fingerprint(inputs: &SkillsInputs, report: Option<&SkillsReport>) -> u64 {
    let vars = report.map(required_vars).unwrap_or_default();
    inputs_fingerprint(inputs, &vars)
}

/// The environment variables the skills of `report` read for gating and
/// their own keys, sorted.
pub fn required_vars(report: &SkillsReport) -> Vec<String> {
    let mut vars: Vec<String> = report
        .skills
        .iter()
        .flat_map(|s| {
            s.skill
                .requires
                .env
                .iter()
                .chain(&s.skill.requires.env_any)
                .chain(s.skill.primary_env.iter())
        })
        .cloned()
        .collect();
    vars.sort();
    vars.dedup();
    vars
}

/// A hash of every input of gating but the files: `PATH`, `SKILLS_PATH`,
/// `HOME`, `SKILL_PERMISSIONS`, the values of `vars`, the effective
/// config, the config file's identity, the roots and the folders symlinked
/// skills may point into.
pub fn inputs_fingerprint(inputs: &SkillsInputs, vars: &[String]) -> u64 {
    let mut text = String::new();
    for key in ["PATH", "SKILLS_PATH", "HOME"] {
        text.push_str(inputs.env.get(key).map_or("", String::as_str));
        text.push('\0');
    }
    text.push_str(inputs.permissions_override.as_deref().unwrap_or("\u{1}"));
    for v in vars {
        text.push_str(v);
        text.push('=');
        text.push_str(inputs.env.get(v).map_or("\u{1}", String::as_str));
        text.push('\0');
    }
    // Gates read config keys (`requires.config`), which environment
    // variables and flags can set as well as the file.
    if let Ok(config) = serde_json::to_string(&inputs.config.config) {
        text.push_str(&config);
    }
    let config = &inputs.config.file.path;
    if let Ok(meta) = std::fs::metadata(config) {
        use std::os::unix::fs::MetadataExt;
        text.push_str(&format!(
            "{}:{}:{}:{}",
            config.display(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.size()
        ));
    }
    for root in &inputs.roots {
        text.push_str(root.source.short());
        text.push_str(&root.dir.to_string_lossy());
        text.push('\0');
    }
    if let Some(dir) = &inputs.embedded_bundled {
        text.push_str("embedded bundled ");
        text.push_str(&dir.to_string_lossy());
        text.push('\0');
    }
    for dir in inputs.allow_symlink_targets.iter().chain(&inputs.homes) {
        text.push_str(&dir.to_string_lossy());
        text.push('\0');
    }
    crate::paths::fnv1a64(text.as_bytes())
}

/// Holds the current snapshot and rebuilds it when it goes stale.
pub struct SkillsManager {
    inputs: Mutex<SkillsInputs>,
    current: RwLock<Arc<Snapshot>>,
    version: AtomicU64,
    dirty: AtomicBool,
    listeners: Mutex<Vec<mpsc::Sender<u64>>>,
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

impl SkillsManager {
    pub fn new(inputs: SkillsInputs) -> Arc<SkillsManager> {
        let first = build(&inputs, 1);
        Arc::new(SkillsManager {
            inputs: Mutex::new(inputs),
            current: RwLock::new(Arc::new(first)),
            version: AtomicU64::new(1),
            dirty: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
            watcher: Mutex::new(None),
        })
    }

    /// The current snapshot, rebuilt first if anything it depends on
    /// changed.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let current = self.current.read().expect("snapshot lock").clone();
        let inputs = self.inputs.lock().expect("inputs lock").clone();
        let stale_inputs = fingerprint(&inputs, Some(&current.report)) != current.fingerprint;
        if !self.dirty.swap(false, Ordering::AcqRel) && !stale_inputs {
            return current;
        }
        self.rebuild(&inputs)
    }

    /// Replaces the inputs (a config reload, a new environment); the next
    /// [`SkillsManager::snapshot`] rebuilds if they differ.
    pub fn set_inputs(&self, inputs: SkillsInputs) {
        *self.inputs.lock().expect("inputs lock") = inputs;
    }

    /// Marks the snapshot stale (after an install or a config edit).
    pub fn invalidate(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Receives the new version after every rebuild.
    pub fn subscribe(&self) -> mpsc::Receiver<u64> {
        let (tx, rx) = mpsc::channel();
        self.listeners.lock().expect("listeners lock").push(tx);
        rx
    }

    fn rebuild(&self, inputs: &SkillsInputs) -> Arc<Snapshot> {
        let version = self.version.fetch_add(1, Ordering::AcqRel) + 1;
        let snapshot = Arc::new(build(inputs, version));
        *self.current.write().expect("snapshot lock") = snapshot.clone();
        self.listeners
            .lock()
            .expect("listeners lock")
            .retain(|tx| tx.send(version).is_ok());
        snapshot
    }

    /// Watches the skill roots; changes rebuild the snapshot once writes
    /// have been quiet for `debounce`. A root that does not exist yet is
    /// picked up when it is created (its nearest existing parent is
    /// watched until then).
    pub fn watch(self: &Arc<Self>, debounce: Duration) -> notify::Result<()> {
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let mut watcher = notify::recommended_watcher(tx)?;
        let mut missing: Vec<PathBuf> = self
            .inputs
            .lock()
            .expect("inputs lock")
            .roots
            .iter()
            .map(|r| r.dir.clone())
            .collect();
        arm_roots(&mut watcher, &mut missing)?;
        *self.watcher.lock().expect("watcher lock") = Some(watcher);
        let manager = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("skills-watch".into())
            .spawn(move || {
                let mut debouncer = Debouncer::new(debounce);
                loop {
                    let timeout = debouncer
                        .wait(Instant::now())
                        .unwrap_or(Duration::from_secs(3600));
                    match rx.recv_timeout(timeout) {
                        Ok(Ok(event)) => {
                            let creates_root = event
                                .paths
                                .iter()
                                .any(|p| missing.iter().any(|root| root.starts_with(p)));
                            if creates_root {
                                let Some(manager) = manager.upgrade() else {
                                    return;
                                };
                                let mut watcher = manager.watcher.lock().expect("watcher lock");
                                if let Some(watcher) = watcher.as_mut()
                                    && let Err(err) = arm_roots(watcher, &mut missing)
                                {
                                    tracing::warn!(%err, "cannot watch a new skills root");
                                }
                            }
                            if creates_root || event.paths.iter().any(|p| relevant(p)) {
                                debouncer.event(Instant::now());
                            }
                        }
                        Ok(Err(err)) => tracing::warn!(%err, "skills watcher error"),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                    if debouncer.due(Instant::now()) {
                        let Some(manager) = manager.upgrade() else {
                            return;
                        };
                        let inputs = manager.inputs.lock().expect("inputs lock").clone();
                        manager.rebuild(&inputs);
                    }
                }
            })
            .map_err(notify::Error::io)?;
        Ok(())
    }
}

/// Watches each root in `missing` that exists now (recursively) and drops
/// it from the list; for the others, watches the nearest existing parent
/// (not recursively) so their creation is seen.
pub(crate) fn arm_roots(
    watcher: &mut notify::RecommendedWatcher,
    missing: &mut Vec<PathBuf>,
) -> notify::Result<()> {
    use notify::{RecursiveMode, Watcher};
    let mut still_missing = Vec::new();
    let nearest_parent = |root: &Path| {
        root.ancestors()
            .skip(1)
            .find(|a| a.is_dir())
            .map(Path::to_path_buf)
    };
    for root in missing.drain(..) {
        loop {
            if root.is_dir() {
                watcher.watch(&root, RecursiveMode::Recursive)?;
                break;
            }
            let Some(parent) = nearest_parent(&root) else {
                still_missing.push(root);
                break;
            };
            // A parent that vanishes meanwhile is retried on the next event.
            let _ = watcher.watch(&parent, RecursiveMode::NonRecursive);
            // A deeper folder created before the watch took hold sends no
            // event: look again until nothing changed.
            if nearest_parent(&root).as_ref() == Some(&parent) && !root.is_dir() {
                still_missing.push(root);
                break;
            }
        }
    }
    *missing = still_missing;
    Ok(())
}

fn build(inputs: &SkillsInputs, version: u64) -> Snapshot {
    let report = super::report(inputs);
    let catalog = super::catalog(&report, inputs);
    Snapshot {
        version,
        fingerprint: fingerprint(inputs, Some(&report)),
        report,
        catalog,
    }
}

/// Whether a changed path can change the skills.
pub fn relevant(path: &Path) -> bool {
    if path
        .components()
        .any(|c| IGNORED_SEGMENTS.iter().any(|s| c.as_os_str() == *s))
    {
        return false;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name == "SKILL.md" || MANIFEST_NAMES.contains(&name.as_str()) || !name.contains('.')
}

/// Fires once no event has arrived for the quiet interval.
#[derive(Debug, Clone)]
pub struct Debouncer {
    quiet: Duration,
    last_event: Option<Instant>,
}

impl Debouncer {
    pub fn new(quiet: Duration) -> Debouncer {
        Debouncer {
            quiet,
            last_event: None,
        }
    }

    pub fn event(&mut self, at: Instant) {
        self.last_event = Some(at);
    }

    /// How long to wait before it may fire; `None` when nothing is pending.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        self.last_event
            .map(|t| (t + self.quiet).saturating_duration_since(now))
    }

    /// Whether it fires now (and resets if so).
    pub fn due(&mut self, now: Instant) -> bool {
        match self.last_event {
            Some(t) if now >= t + self.quiet => {
                self.last_event = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debouncer_waits_for_writes_to_settle() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut d = Debouncer::new(Duration::from_millis(250));
        assert_eq!(d.wait(t0), None);
        assert!(!d.due(ms(1000)));
        d.event(ms(0));
        d.event(ms(200)); // still writing
        assert!(!d.due(ms(300)));
        assert_eq!(d.wait(ms(300)), Some(Duration::from_millis(150)));
        assert!(d.due(ms(450)));
        assert!(!d.due(ms(900)), "fires once per burst");
    }

    #[test]
    fn only_skill_files_and_folders_are_relevant() {
        for (path, want) in [
            ("/ws/skills/x/SKILL.md", true),
            ("/ws/skills/x/skill.json", true),
            ("/ws/skills/new-skill", true),
            ("/ws/skills/x/README.md", false),
            ("/ws/skills/x/node_modules/y/SKILL.md", false),
            ("/ws/skills/.git/SKILL.md", false),
            ("/ws/skills/x/scripts/run.py", false),
        ] {
            assert_eq!(relevant(Path::new(path)), want, "{path}");
        }
    }
}
