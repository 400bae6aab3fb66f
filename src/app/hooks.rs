//! Hooks use cases: where the hook sources are for this app, firing an
//! event (off the caller's path), and `hooks enable|disable`.

use serde_json::Value;

use super::App;
use crate::hooks::discover::{HookRoot, HooksInputs};
use crate::hooks::{self, HookEvent, HookSource, HooksReport};

impl App {
    /// The managed hooks folder (`<state dir>/hooks`).
    pub(crate) fn managed_hooks_dir(&self) -> std::path::PathBuf {
        self.paths.state_dir.join("hooks")
    }

    /// The inputs of hooks for this app.
    pub(crate) fn hooks_inputs(&self) -> HooksInputs {
        let internal = &self.config.config.hooks.internal;
        let mut roots = vec![HookRoot {
            source: HookSource::Managed,
            dir: self.managed_hooks_dir(),
        }];
        for dir in &internal.load.extra_dirs {
            roots.push(HookRoot {
                source: HookSource::Managed,
                dir: self.host.resolve_path(dir),
            });
        }
        roots.push(HookRoot {
            source: HookSource::Workspace,
            dir: self.paths.workspace.join("hooks"),
        });
        HooksInputs {
            roots,
            config: self.config.clone(),
            env: self.host.vars().clone(),
        }
    }

    /// Discovers and gates the hooks (writing nothing).
    pub(crate) fn hooks_report(&self) -> HooksReport {
        hooks::report(&self.hooks_inputs())
    }

    /// Fires the event `name` of session `session_key`. Returns at once:
    /// with internal hooks off nothing else happens; otherwise the hooks
    /// are read and their handlers run on the hooks thread, after the
    /// events fired before this one.
    pub(crate) fn fire_hook(&self, name: &str, session_key: &str, context: Value) {
        if !self.config.config.hooks.internal.enabled {
            return;
        }
        let event = HookEvent::new(name, session_key, context, self.host.now_ts());
        let inputs = self.hooks_inputs();
        let builtin = hooks::bundled::BuiltinContext {
            state_dir: self.paths.state_dir.clone(),
            session_memory_messages: self
                .config
                .config
                .hooks
                .internal
                .entries
                .get("session-memory")
                .and_then(|e| e.extra.get("messages"))
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok()),
            notes: {
                let memory = self.memory();
                hooks::bundled::NoteRules {
                    root: memory.root,
                    allow_symlink_targets: memory.allow_symlink_targets,
                    max_chars: memory.settings.max_note_chars as usize,
                    gate: memory.gate,
                }
            },
        };
        hooks::enqueue(move || {
            let report = hooks::report(&inputs);
            let handlers = report.handlers_for(&event.name());
            if handlers.is_empty() {
                return;
            }
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    tracing::warn!(%err, "cannot run hooks");
                    return;
                }
            };
            runtime.block_on(hooks::run::run_handlers(
                &handlers,
                &event,
                &inputs.env,
                &inputs.config.config.hooks.internal,
                &builtin,
            ));
        });
    }

    /// The turn the bundled `boot-md` hook asks for at gateway start:
    /// `<workspace>/BOOT.md`'s instructions in the session `boot`, when
    /// internal hooks and the hook are on and the file is not empty.
    pub(crate) fn boot_request(&self) -> Option<crate::trigger::TurnRequest> {
        if !self.config.config.hooks.internal.enabled {
            return None;
        }
        let report = self.hooks_report();
        let hook = report.find("boot-md")?;
        if !hook.gate.runnable || hook.hook.source != HookSource::Bundled {
            return None;
        }
        let text = std::fs::read_to_string(self.paths.workspace.join("BOOT.md")).ok()?;
        if text.trim().is_empty() {
            return None;
        }
        Some(crate::trigger::TurnRequest {
            message: format!(
                "You are running a boot check. Follow the BOOT.md instructions below exactly.\n\nBOOT.md:\n{}\n\nIf nothing needs attention, reply with ONLY: NO_REPLY",
                text.trim()
            ),
            session_key: Some("boot".to_string()),
            ..Default::default()
        })
    }

    /// `hooks enable|disable <name>`: sets
    /// `hooks.internal.entries.<name>.enabled` in the config file, keeping
    /// the rest of it as written.
    pub(crate) fn set_hook_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> anyhow::Result<crate::config::SetOutcome> {
        let report = self.hooks_report();
        if report.find(name).is_none() {
            anyhow::bail!("no hook named `{name}`; `almanac hooks list` shows them");
        }
        let key = format!("hooks.internal.entries.{name}.enabled");
        Ok(crate::config::set(
            &self.paths.config_path,
            &key,
            if enabled { "true" } else { "false" },
        )?)
    }
}

#[cfg(test)]
mod tests {
    use crate::app::testing::test_app as app;

    #[test]
    fn boot_md_asks_for_a_turn_only_when_on_and_the_file_says_something() {
        let dir = tempfile::tempdir().unwrap();
        let on = r#"{hooks: {internal: {enabled: true}}}"#;
        let a = app(dir.path(), on);
        assert!(a.boot_request().is_none(), "no BOOT.md");
        std::fs::create_dir_all(&a.paths.workspace).unwrap();
        let boot = a.paths.workspace.join("BOOT.md");
        std::fs::write(&boot, "  \n\n").unwrap();
        assert!(a.boot_request().is_none(), "an empty BOOT.md");
        std::fs::write(&boot, "Say good morning.\n").unwrap();
        let req = a.boot_request().expect("a turn");
        assert!(req.message.contains("Say good morning."));
        assert_eq!(req.session_key.as_deref(), Some("boot"));
        let cases = [
            "{}",
            r#"{hooks: {internal: {enabled: true, entries: {"boot-md": {enabled: false}}}}}"#,
        ];
        for config in cases {
            assert!(app(dir.path(), config).boot_request().is_none(), "{config}");
        }
    }
}
