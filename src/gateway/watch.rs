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
use super::{Event, Shared};
use crate::app::App;

/// Quiet time after the last file event before acting on a burst.
const DEBOUNCE: Duration = Duration::from_millis(150);

type Events = mpsc::UnboundedReceiver<notify::Result<notify::Event>>;

/// A watcher whose events arrive on a tokio channel.
fn watcher() -> anyhow::Result<(notify::RecommendedWatcher, Events)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })?;
    Ok((watcher, rx))
}

/// Longest wait after the first change of a burst: files that keep
/// changing are still looked at.
const MAX_BURST: Duration = Duration::from_secs(1);

/// Waits for a burst of changes to paths `relevant` accepts to end (quiet
/// for [`DEBOUNCE`], at most [`MAX_BURST`]): the paths it touched, and
/// whether the OS said it lost some (then everything must be looked at).
/// Reads are not changes. `None` when stopped.
async fn next_burst(
    events: &mut Events,
    stop: &CancellationToken,
    relevant: &(dyn Fn(&Path) -> bool + Send + Sync),
) -> anyhow::Result<Option<(BTreeSet<PathBuf>, bool)>> {
    let mut paths = BTreeSet::new();
    let mut rescan = false;
    // Adds an event; `false` when it changed nothing that matters.
    let mut take = |event: notify::Result<notify::Event>| match event {
        Ok(event) if event.kind.is_access() => false,
        Ok(event) => {
            let lost = event.need_rescan();
            let before = paths.len();
            paths.extend(event.paths.into_iter().filter(|p| relevant(p)));
            rescan |= lost;
            paths.len() > before || lost
        }
        Err(err) => {
            tracing::warn!(%err, "file watcher error");
            rescan = true;
            true
        }
    };
    loop {
        let first = tokio::select! {
            e = events.recv() => e,
            () = stop.cancelled() => return Ok(None),
        };
        let Some(first) = first else {
            anyhow::bail!("the file watcher stopped");
        };
        if take(first) {
            break;
        }
    }
    let cap = tokio::time::Instant::now() + MAX_BURST;
    let mut quiet_until = tokio::time::Instant::now() + DEBOUNCE;
    loop {
        tokio::select! {
            e = events.recv() => match e {
                Some(e) => {
                    if take(e) {
                        quiet_until = tokio::time::Instant::now() + DEBOUNCE;
                    }
                }
                None => anyhow::bail!("the file watcher stopped"),
            },
            () = tokio::time::sleep_until(quiet_until.min(cap)) => break,
            () = stop.cancelled() => return Ok(None),
        }
    }
    Ok(Some((paths, rescan)))
}

/// Keeps the memory index in step with the files.
pub(crate) struct MemoryWatcher;

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
            let app = shared.engine.app();
            let memory = app.memory();
            let (layout, _) = memory.layout();
            let (mut watcher, mut events) = watcher()?;
            arm_memory(&mut watcher, &layout);
            // The index this component keeps open and alone writes to.
            let index = {
                let app = app.clone();
                shared
                    .engine
                    .blocking(move || {
                        app.ensure_state_dir()?;
                        let (index, _) = app.memory().synced_index(app.wall_ns())?;
                        index.settle()?;
                        Ok::<_, anyhow::Error>(index)
                    })
                    .await??
            };
            // Building an index frees most of what it took; hand it back
            // to the OS so an idle gateway stays small.
            super::resident::release_free_memory();
            let _ = shared.bus.send(Event::MemoryIndexed);
            let index = Arc::new(Mutex::new(index));
            let relevant = {
                let layout = layout.clone();
                move |p: &Path| p.is_dir() || layout.classify(&layout.name_of(p)).is_some()
            };
            while let Some((paths, rescan)) = next_burst(&mut events, &stop, &relevant).await? {
                // New folders (memory/ made after start) need watching.
                if paths.iter().any(|p| p.is_dir()) {
                    arm_memory(&mut watcher, &layout);
                }
                let rels: Vec<String> = paths
                    .iter()
                    .map(|p| layout.name_of(p))
                    .filter(|rel| layout.classify(rel).is_some())
                    .collect();
                if rels.is_empty() && !rescan {
                    continue;
                }
                let index = index.clone();
                let wall = app.clone();
                let files = rels.len();
                let report = shared
                    .engine
                    .blocking(move || {
                        let mut index = index.lock().unwrap_or_else(|p| p.into_inner());
                        if rescan {
                            index.sync(crate::memory::index::SyncMode::Quick, wall.wall_ns())
                        } else {
                            index.refresh(&rels)
                        }
                    })
                    .await??;
                for w in &report.warnings {
                    tracing::warn!("{w}");
                }
                let _ = shared.bus.send(Event::MemoryRefreshed { files });
            }
            drop(watcher);
            Ok(())
        })
    }
}

/// Watches the memory root and its folders that exist (watching one
/// again is harmless).
fn arm_memory(watcher: &mut notify::RecommendedWatcher, layout: &crate::memory::files::Layout) {
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
            while let Some((paths, rescan)) = next_burst(&mut events, &stop, &relevant).await? {
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
                    let _ = shared.bus.send(Event::SkillsChanged);
                }
            }
            Ok(())
        })
    }
}

async fn refresh_skills(shared: &Arc<Shared>) -> anyhow::Result<()> {
    let app = shared.engine.app();
    shared
        .engine
        .blocking(move || crate::app::agent::refresh_skills(&app))
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
            while let Some((_, _)) = next_burst(&mut events, &stop, &relevant).await? {
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
                        shared.engine.reload(app);
                        tracing::info!("config reloaded");
                        let _ = shared.bus.send(Event::ConfigReloaded);
                    }
                    // A half-written or broken file: keep the config in
                    // use and say why.
                    Err(err) => tracing::warn!("config not reloaded: {err:#}"),
                }
            }
            Ok(())
        })
    }
}
