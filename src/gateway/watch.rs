//! Watchers: the memory index, the skills snapshot and the config follow
//! the files while the gateway runs.
//!
//! * The memory watcher brings the index up to date once at start, then
//!   re-reads only the files the OS reports changed (debounced), so a
//!   note written by any process is searchable within a second and no
//!   command needs to scan the tree while the gateway runs (they read
//!   `gateway.json`'s `watching`). An overflowed event queue falls back to
//!   a quick sync.
//! * The skills watcher rebuilds what turns keep of the skills when a
//!   skill file changes, so the next turn does not pay for it.
//! * The config watcher reloads `config.json5` into the engine; a changed
//!   port or bind address is logged as needing a restart.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::supervisor::{Component, ComponentKind};
use super::{GatewayEvent, Shared};
use crate::app::App;
use crate::memory::index::SyncMode;

/// Quiet time after the last file event before acting on a burst.
const DEBOUNCE: Duration = Duration::from_millis(150);

type Events = mpsc::UnboundedReceiver<notify::Result<notify::Event>>;

/// A watcher whose events arrive on a tokio channel, reads left out.
///
/// The OS reports every open of a file in a watched folder: each command
/// that reads `gateway.json` and the token in the state folder, every
/// read of a note. Dropped here, on the watcher's own thread, they wake
/// no task of the gateway's (each woke a worker, which woke another,
/// while the command that opened the file waited for a CPU).
fn watcher() -> anyhow::Result<(notify::RecommendedWatcher, Events)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if !is_read(&event) {
            let _ = tx.send(event);
        }
    })?;
    Ok((watcher, rx))
}

/// An event that changed nothing: a file opened, read or closed unwritten.
fn is_read(event: &notify::Result<notify::Event>) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match event {
        Ok(event) => match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
            EventKind::Access(_) => !event.need_rescan(),
            _ => false,
        },
        Err(_) => false,
    }
}

/// Longest wait after the first change of a burst: files that keep
/// changing are still looked at.
const MAX_BURST: Duration = Duration::from_secs(1);

/// Waits for a burst of changes to paths `relevant` accepts to end (quiet
/// for `debounce`, at most [`MAX_BURST`]): the paths it touched, and
/// whether the OS said it lost some (then everything must be looked at).
/// Reads are not changes. `None` when stopped.
async fn next_burst(
    events: &mut Events,
    stop: &CancellationToken,
    relevant: &(dyn Fn(&Path) -> bool + Send + Sync),
    debounce: Duration,
) -> anyhow::Result<Option<(BTreeSet<PathBuf>, bool)>> {
    loop {
        let first = tokio::select! {
            e = events.recv() => e,
            () = stop.cancelled() => return Ok(None),
        };
        match finish_burst(first, events, stop, relevant, debounce).await? {
            Some((paths, false)) if paths.is_empty() => continue,
            burst => return Ok(burst),
        }
    }
}

/// A burst's paths so far.
#[derive(Default)]
struct Burst {
    paths: BTreeSet<PathBuf>,
    rescan: bool,
}

impl Burst {
    /// Adds an event; `false` when it changed nothing that matters.
    fn take(
        &mut self,
        event: notify::Result<notify::Event>,
        relevant: &(dyn Fn(&Path) -> bool + Send + Sync),
    ) -> bool {
        match event {
            Ok(event) if event.kind.is_access() => false,
            Ok(event) => {
                let lost = event.need_rescan();
                let before = self.paths.len();
                self.paths
                    .extend(event.paths.into_iter().filter(|p| relevant(p)));
                self.rescan |= lost;
                self.paths.len() > before || lost
            }
            Err(err) => {
                tracing::warn!(%err, "file watcher error");
                self.rescan = true;
                true
            }
        }
    }
}

/// [`next_burst`] from its first event on (`None` from the channel: the
/// watcher stopped); nothing (no paths, no rescan) when that event
/// changed nothing that matters.
async fn finish_burst(
    first: Option<notify::Result<notify::Event>>,
    events: &mut Events,
    stop: &CancellationToken,
    relevant: &(dyn Fn(&Path) -> bool + Send + Sync),
    debounce: Duration,
) -> anyhow::Result<Option<(BTreeSet<PathBuf>, bool)>> {
    let mut burst = Burst::default();
    let Some(first) = first else {
        anyhow::bail!("the file watcher stopped");
    };
    if !burst.take(first, relevant) {
        return Ok(Some((burst.paths, false)));
    }
    let cap = tokio::time::Instant::now() + MAX_BURST;
    let mut quiet_until = tokio::time::Instant::now() + debounce;
    loop {
        tokio::select! {
            e = events.recv() => match e {
                Some(e) => {
                    if burst.take(e, relevant) {
                        quiet_until = tokio::time::Instant::now() + debounce;
                    }
                }
                None => anyhow::bail!("the file watcher stopped"),
            },
            () = tokio::time::sleep_until(quiet_until.min(cap)) => break,
            () = stop.cancelled() => return Ok(None),
        }
    }
    Ok(Some((burst.paths, burst.rescan)))
}

/// How often the memory watcher also looks at every file (by size and
/// time), for what the OS may not have reported (an overflowed event
/// queue, a network file system): a few milliseconds of stats.
const FULL_SCAN_EVERY: Duration = Duration::from_secs(10 * 60);

/// Keeps the memory index in step with the files.
pub(crate) struct MemoryWatcher;

/// Why one watch ended.
enum Watch {
    Stopped,
    /// The memory paths changed, or the index file was deleted or
    /// replaced: watch again from the start.
    Again,
}

impl Component for MemoryWatcher {
    fn kind(&self) -> ComponentKind {
        ComponentKind::MemoryWatcher
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            while let Watch::Again = watch_memory(&shared, &stop).await? {}
            Ok(())
        })
    }
}

/// Brings the index up to date with every file (the gateway may have
/// been down while they changed), then follows what the OS reports.
async fn watch_memory(shared: &Arc<Shared>, stop: &CancellationToken) -> anyhow::Result<Watch> {
    let app = shared.engine.app();
    let memory = app.memory();
    let (layout, _) = memory.layout();
    let (mut watcher, mut events) = watcher()?;
    let mut stand_in = None;
    arm_memory(&mut watcher, &layout, &mut stand_in);
    // The index this component keeps open and alone writes to.
    let index = {
        let app = app.clone();
        shared
            .engine
            .blocking(move || {
                app.ensure_state_dir()?;
                let (index, report) = app
                    .memory()
                    .synced_index_with(SyncMode::Full, app.wall_ns())?;
                for w in &report.warnings {
                    tracing::warn!("{w}");
                }
                index.settle()?;
                Ok::<_, anyhow::Error>(index)
            })
            .await??
    };
    // Building an index frees most of what it took; hand it back to the
    // OS so an idle gateway stays small.
    super::resident::release_free_memory();
    let _ = shared.bus.send(GatewayEvent::MemoryIndexed);
    let index = Arc::new(Mutex::new(index));
    let relevant = {
        let layout = layout.clone();
        // A memory file; a folder (that may hold some); or a path gone
        // (maybe a folder of notes, moved out or deleted).
        move |p: &Path| {
            layout.classify(&layout.name_of(p)).is_some()
                || std::fs::metadata(p).map_or(true, |m| m.is_dir())
        }
    };
    let mut full_scan = tokio::time::interval_at(
        tokio::time::Instant::now() + FULL_SCAN_EVERY,
        FULL_SCAN_EVERY,
    );
    full_scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let first = tokio::select! {
            e = events.recv() => e,
            () = stop.cancelled() => return Ok(Watch::Stopped),
            () = shared.memory_paths_changed.notified() => {
                if shared.engine.app().memory().layout().0 != layout {
                    tracing::info!("memory paths changed: watching the new ones");
                    return Ok(Watch::Again);
                }
                continue;
            }
            _ = full_scan.tick() => {
                if !still_current(shared, &index, &memory, &layout).await {
                    return Ok(Watch::Again);
                }
                sync_memory(shared, &index, Look::Sync(SyncMode::Full)).await?;
                super::resident::release_free_memory();
                shared.work_ran.notify_one();
                continue;
            }
        };
        let Some((paths, rescan)) =
            finish_burst(first, &mut events, stop, &relevant, DEBOUNCE).await?
        else {
            return Ok(Watch::Stopped);
        };
        if paths.is_empty() && !rescan {
            continue;
        }
        if !still_current(shared, &index, &memory, &layout).await {
            return Ok(Watch::Again);
        }
        // A folder that appeared (memory/ made after start, a folder of
        // notes moved in, the root itself) is watched from now on, and
        // what it already holds is read by a full look.
        let new_folder = paths.iter().any(|p| p.is_dir());
        if new_folder {
            arm_memory(&mut watcher, &layout, &mut stand_in);
        }
        let mut rels = Vec::new();
        let mut vanished = Vec::new();
        for p in &paths {
            let rel = layout.name_of(p);
            if layout.classify(&rel).is_some() {
                rels.push(rel);
            } else if !p.exists() {
                // Maybe a folder of notes, deleted or moved out.
                vanished.push(rel);
            }
        }
        let look = if rescan || new_folder {
            Look::Sync(SyncMode::Full)
        } else if rels.is_empty() && vanished.is_empty() {
            continue;
        } else {
            Look::Refresh {
                files: rels,
                folders: vanished,
            }
        };
        let files = sync_memory(shared, &index, look).await?;
        let _ = shared.bus.send(GatewayEvent::MemoryRefreshed { files });
    }
}

/// What the memory watcher brings up to date.
enum Look {
    /// The whole index, as the mode says.
    Sync(SyncMode),
    /// The files a burst touched, and those of folders that vanished.
    Refresh {
        files: Vec<String>,
        folders: Vec<String>,
    },
}

/// Brings the index up to date as `look` says; the number of files
/// indexed or removed.
async fn sync_memory(
    shared: &Arc<Shared>,
    index: &Arc<Mutex<crate::memory::index::Index>>,
    look: Look,
) -> anyhow::Result<usize> {
    let index = index.clone();
    let wall = shared.engine.app().wall_ns();
    let report = shared
        .engine
        .blocking(move || {
            let mut index = index.lock().unwrap_or_else(|p| p.into_inner());
            match look {
                Look::Sync(mode) => index.sync(mode, wall),
                Look::Refresh { mut files, folders } => {
                    for folder in &folders {
                        files.extend(index.indexed_under(folder)?);
                    }
                    index.refresh(&files)
                }
            }
        })
        .await??;
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    Ok(report.files_indexed + report.files_removed)
}

/// Whether the open index is still the file searches read: a command may
/// have rebuilt it after it was deleted.
async fn still_current(
    shared: &Arc<Shared>,
    index: &Arc<Mutex<crate::memory::index::Index>>,
    memory: &crate::memory::Memory,
    layout: &crate::memory::files::Layout,
) -> bool {
    let (index, path, layout, tz) = (
        index.clone(),
        memory.index_path.clone(),
        layout.clone(),
        memory.tz.clone(),
    );
    let current = shared
        .engine
        .blocking(move || {
            index
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_current(&path, &layout, &tz)
        })
        .await
        .unwrap_or(false);
    if !current {
        tracing::warn!("the memory index was deleted or replaced: opening it again");
    }
    current
}

/// Watches the memory root and its folders that exist (watching one
/// again is harmless). While the root does not exist, its nearest
/// existing parent stands in (not recursively), so its creation is seen.
fn arm_memory(
    watcher: &mut notify::RecommendedWatcher,
    layout: &crate::memory::files::Layout,
    stand_in: &mut Option<PathBuf>,
) {
    if !layout.root.is_dir() {
        let Some(parent) = layout.root.ancestors().skip(1).find(|p| p.is_dir()) else {
            return;
        };
        if stand_in.as_deref() == Some(parent) {
            return;
        }
        if let Some(old) = stand_in.take() {
            let _ = watcher.unwatch(&old);
        }
        match watcher.watch(parent, RecursiveMode::NonRecursive) {
            Ok(()) => *stand_in = Some(parent.to_path_buf()),
            Err(err) => tracing::warn!(%err, path = %parent.display(), "cannot watch"),
        }
        return;
    }
    if let Some(old) = stand_in.take() {
        let _ = watcher.unwatch(&old);
    }
    for (dir, recursive) in layout.top_dirs() {
        let path = layout.path_of(&dir);
        if !path.is_dir() {
            continue;
        }
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        if let Err(err) = watcher.watch(&path, mode) {
            tracing::warn!(%err, path = %path.display(), "cannot watch");
        }
    }
}

/// Rebuilds the turns' skills snapshot when a skill changes.
pub(crate) struct SkillsWatcher;

impl Component for SkillsWatcher {
    fn kind(&self) -> ComponentKind {
        ComponentKind::SkillsWatcher
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let app = shared.engine.app();
            if !app.config.config.skills.load.watch {
                // `skills.load.watch: false`: turns still see every change
                // (they check what the snapshot was made from), only
                // nothing is rebuilt ahead of them. A reload may turn it on.
                tracing::info!("skills.load.watch is false: skill folders are not watched");
                refresh_skills(&shared).await?;
                let mut bus = shared.bus.subscribe();
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        _ = bus.recv() => {
                            if shared.engine.app().config.config.skills.load.watch {
                                break;
                            }
                        }
                    }
                }
            }
            let app = shared.engine.app();
            let debounce = Duration::from_millis(app.config.config.skills.load.watch_debounce_ms);
            let (mut watcher, mut events) = watcher()?;
            let (inputs, _) = app.skills_inputs();
            let mut missing: Vec<PathBuf> = inputs.roots.iter().map(|r| r.dir.clone()).collect();
            crate::skills::snapshot::arm_roots(&mut watcher, &mut missing)?;
            // Fresh at start, so the first turn finds it ready.
            refresh_skills(&shared).await?;
            let roots: Vec<PathBuf> = missing.clone();
            let relevant = move |p: &Path| {
                crate::skills::snapshot::relevant(p)
                    || p.is_dir()
                    || roots.iter().any(|root| root.starts_with(p))
            };
            // A snapshot built right after a change is not stored (the
            // change may not show in the files' times yet): build it once
            // more when that window has passed, so the next turn finds it.
            let mut again_at: Option<tokio::time::Instant> = None;
            loop {
                let burst = tokio::select! {
                    burst = next_burst(&mut events, &stop, &relevant, debounce) => burst?,
                    () = sleep_until_some(again_at) => {
                        again_at = None;
                        refresh_skills(&shared).await?;
                        continue;
                    }
                };
                let Some((paths, rescan)) = burst else {
                    break;
                };
                let creates_root = paths
                    .iter()
                    .any(|p| missing.iter().any(|root| root.starts_with(p)));
                if creates_root {
                    crate::skills::snapshot::arm_roots(&mut watcher, &mut missing)?;
                }
                if rescan
                    || creates_root
                    || paths.iter().any(|p| crate::skills::snapshot::relevant(p))
                {
                    refresh_skills(&shared).await?;
                    let _ = shared.bus.send(GatewayEvent::SkillsChanged);
                    again_at = Some(
                        tokio::time::Instant::now() + crate::skills::stored::RACY_WINDOW + DEBOUNCE,
                    );
                }
            }
            Ok(())
        })
    }
}

/// Sleeps until `at`; never, without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn refresh_skills(shared: &Arc<Shared>) -> anyhow::Result<()> {
    let app = shared.engine.app();
    shared
        .engine
        .blocking(move || crate::engine::assemble::refresh_skills(&app))
        .await?
}

/// Applies `config.json5` edits to the engine.
pub(crate) struct ConfigWatcher;

impl Component for ConfigWatcher {
    fn kind(&self) -> ComponentKind {
        ComponentKind::ConfigWatcher
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let config_path = shared.engine.app().paths.config_path.clone();
            let dir = config_path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            let (mut watcher, mut events) = watcher()?;
            // The folder, not the file: editors and `config set` replace
            // the file by renaming over it.
            watcher.watch(&dir, RecursiveMode::NonRecursive)?;
            let relevant = {
                let config_path = config_path.clone();
                move |p: &Path| p == config_path
            };
            while let Some((_, _)) = next_burst(&mut events, &stop, &relevant, DEBOUNCE).await? {
                let options = shared.options.clone();
                let host = shared.host.clone();
                let loaded = shared
                    .engine
                    .blocking(move || App::load(&options, host))
                    .await?;
                match loaded {
                    Ok(app) => {
                        let before = shared.engine.app();
                        let old = &before.config.config.gateway;
                        let new = &app.config.config.gateway;
                        if old.port != new.port
                            || old.bind != new.bind
                            || old.custom_bind_host != new.custom_bind_host
                        {
                            tracing::warn!(
                                "gateway.port / gateway.bind changed: restart the gateway to listen there"
                            );
                        }
                        for w in &app.config.warnings {
                            tracing::warn!("config: {w}");
                        }
                        let memory_moved = before.memory().layout().0 != app.memory().layout().0;
                        shared.engine.reload(app);
                        shared.registry.report(ComponentKind::ConfigWatcher, None);
                        tracing::info!("config reloaded");
                        if memory_moved {
                            shared.memory_paths_changed.notify_one();
                        }
                        let _ = shared.bus.send(GatewayEvent::ConfigReloaded);
                    }
                    // A half-written or broken file: keep the config in
                    // use and say why, in the log and in `gateway status`,
                    // until the file is fixed.
                    Err(err) => {
                        let problem = format!(
                            "{}: {err:#}; the last good config stays in use",
                            config_path.display()
                        );
                        tracing::warn!("config not reloaded: {problem}");
                        shared
                            .registry
                            .report(ComponentKind::ConfigWatcher, Some(problem));
                    }
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str) -> notify::Result<notify::Event> {
        Ok(
            notify::Event::new(notify::EventKind::Modify(notify::event::ModifyKind::Any))
                .add_path(PathBuf::from(path)),
        )
    }

    /// A burst ends once it has been quiet for the debounce it is given
    /// (`skills.load.watchDebounceMs` for the skills watcher), not before.
    #[tokio::test(start_paused = true)]
    async fn a_burst_waits_for_the_debounce_it_is_given() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let everything = |_: &Path| true;
        tx.send(change("/skills/a/SKILL.md")).unwrap();
        let began = tokio::time::Instant::now();
        let burst = next_burst(&mut rx, &stop, &everything, Duration::from_millis(400))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(began.elapsed(), Duration::from_millis(400));
        assert!(burst.0.contains(Path::new("/skills/a/SKILL.md")));
        tx.send(change("/skills/b/SKILL.md")).unwrap();
        let began = tokio::time::Instant::now();
        next_burst(&mut rx, &stop, &everything, Duration::from_millis(50))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(began.elapsed(), Duration::from_millis(50));
    }

    /// Opening and reading files in a watched folder (what every command
    /// does to `gateway.json` and the token) sends the gateway nothing; a
    /// write behind them still arrives, and it arrives first.
    #[tokio::test]
    async fn reads_in_a_watched_folder_reach_no_task_and_writes_do() {
        let dir = tempfile::tempdir().unwrap();
        let read = dir.path().join("gateway.json");
        std::fs::write(&read, "{}").unwrap();
        let (mut watcher, mut events) = watcher().unwrap();
        watcher
            .watch(dir.path(), RecursiveMode::NonRecursive)
            .unwrap();
        for _ in 0..3 {
            assert_eq!(std::fs::read_to_string(&read).unwrap(), "{}");
        }
        let written = dir.path().join("config.json5");
        std::fs::write(&written, "{}").unwrap();
        // The OS reports in order: the reads' events would come first.
        let first = events.recv().await.unwrap().unwrap();
        assert!(!first.kind.is_access(), "{first:?}");
        assert_eq!(first.paths, vec![written.clone()], "{first:?}");
        assert!(is_read(&Ok(notify::Event::new(notify::EventKind::Access(
            notify::event::AccessKind::Open(notify::event::AccessMode::Any)
        )))));
        let closed_written = notify::EventKind::Access(notify::event::AccessKind::Close(
            notify::event::AccessMode::Write,
        ));
        assert!(!is_read(&Ok(notify::Event::new(closed_written))));
        assert!(!is_read(&change("/a")));
        assert!(!is_read(&Err(notify::Error::generic("lost"))));
    }
}
