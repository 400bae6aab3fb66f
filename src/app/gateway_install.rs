//! `gateway install` and `gateway uninstall`: the gateway's per-user
//! service file (see [`crate::gateway_client::install`] for its text).
//!
//! The only files almanac writes outside its state directory and
//! workspace. Installing writes the file atomically (0644, a new folder
//! 0700), writes nothing when the same text is there, and replaces only a
//! file almanac wrote; uninstalling removes only such a file (and the
//! link `systemctl --user enable` made for it). A dry run reads and
//! changes nothing. No service manager is run: the outcome lists the
//! commands for the user.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use super::App;
use crate::config::{self, LoadedConfig, Origin};
use crate::durable;
use crate::gateway_client::install::{self, InstallChange, InstallError, Platform, ServiceSpec};

/// Permission bits of a new service file: service managers read it, and it
/// holds no secret.
pub(crate) const SERVICE_FILE_MODE: u32 = 0o644;

/// What a command did to the service file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Action {
    /// A new file was written.
    Written,
    /// The same file was there already; nothing was written.
    Unchanged,
    /// An earlier file of almanac's was replaced.
    Replaced,
    /// The file was removed.
    Removed,
    /// There was no file; nothing was removed.
    Absent,
    /// A dry run that would have written or removed the file.
    DryRun,
}

/// The outcome of `gateway install` or `gateway uninstall`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServiceOutcome {
    /// The service file.
    pub path: PathBuf,
    pub platform: Platform,
    pub action: Action,
    /// The file's full text: what was (or would be) written, or removed.
    pub text: Option<String>,
    /// Commands for the service manager, which almanac does not run.
    pub next_steps: Vec<String>,
    /// Links to the unit removed with it (or that a dry run would remove).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<PathBuf>,
    /// Settings this command had from flags or the environment that the
    /// service will not see (`key (--set)`, `key (VARIABLE)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_carried: Vec<String>,
    /// What the command did or, on a dry run, would do.
    #[serde(skip)]
    pub change: Action,
    #[serde(skip)]
    pub dry_run: bool,
}

impl ServiceOutcome {
    fn new(path: PathBuf, platform: Platform, change: Action, dry_run: bool) -> ServiceOutcome {
        let changes_something =
            matches!(change, Action::Written | Action::Replaced | Action::Removed);
        ServiceOutcome {
            path,
            platform,
            action: if dry_run && changes_something {
                Action::DryRun
            } else {
                change
            },
            text: None,
            next_steps: Vec::new(),
            links: Vec::new(),
            not_carried: Vec::new(),
            change,
            dry_run,
        }
    }
}

/// Writes the service file that runs `almanac gateway run` for this app's
/// profile and locations (nothing on a dry run).
pub(crate) fn install(
    app: &App,
    platform: Platform,
    dry_run: bool,
) -> anyhow::Result<ServiceOutcome> {
    let exe = app.host.exe().ok_or(InstallError::NoExecutable)?;
    if !exe.is_file() {
        return Err(InstallError::ExecutableGone(exe.to_path_buf()).into());
    }
    let spec = ServiceSpec::new(exe, &app.paths, &app.host)?;
    let text = install::render(platform, &spec)?;
    let path = install::service_path(platform, &app.host, &app.paths.profile)?;
    let existing = read(&path)?;
    let change = match install::install_change(&path, existing.as_deref(), &text)? {
        InstallChange::Create => Action::Written,
        InstallChange::Unchanged => Action::Unchanged,
        InstallChange::Replace => Action::Replaced,
    };
    if !dry_run {
        if platform == Platform::Launchd {
            // launchd opens the log files but does not create their folder.
            let logs = app.paths.state_dir.join("logs");
            durable::create_private_dir_all(&logs)
                .with_context(|| format!("cannot create {}", logs.display()))?;
        }
        if change != Action::Unchanged {
            durable::atomic_replace(&path, text.as_bytes(), SERVICE_FILE_MODE)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    let mut outcome = ServiceOutcome::new(path, platform, change, dry_run);
    outcome.next_steps = install::install_commands(
        platform,
        &outcome.path,
        &app.paths.profile,
        change == Action::Replaced,
    );
    outcome.not_carried = not_carried(&app.config);
    outcome.text = Some(text);
    Ok(outcome)
}

/// Removes this profile's service file, if almanac wrote it, with its
/// enablement link (nothing on a dry run).
pub(crate) fn uninstall(
    app: &App,
    platform: Platform,
    dry_run: bool,
) -> anyhow::Result<ServiceOutcome> {
    let path = install::service_path(platform, &app.host, &app.paths.profile)?;
    let existing = read(&path)?;
    if !install::uninstall_change(&path, existing.as_deref())? {
        return Ok(ServiceOutcome::new(path, platform, Action::Absent, dry_run));
    }
    let links: Vec<PathBuf> = install::enablement_link(platform, &path)
        .filter(|link| links_to(link, &path))
        .into_iter()
        .collect();
    if !dry_run {
        for link in &links {
            durable::remove_if_exists(link)
                .with_context(|| format!("cannot remove {}", link.display()))?;
        }
        durable::remove_if_exists(&path)
            .with_context(|| format!("cannot remove {}", path.display()))?;
    }
    let mut outcome = ServiceOutcome::new(path, platform, Action::Removed, dry_run);
    outcome.text = existing.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    outcome.links = links;
    outcome.next_steps = install::uninstall_commands(platform, &app.paths.profile);
    Ok(outcome)
}

fn read(path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    durable::read_if_exists(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Whether `link` is a symlink to `unit_path`.
fn links_to(link: &Path, unit_path: &Path) -> bool {
    std::fs::read_link(link).is_ok_and(|target| install::link_points_to(link, &target, unit_path))
}

/// Settings of this command from `--set` or the environment, which the
/// service does not get (the workspace is carried by the service file).
fn not_carried(config: &LoadedConfig) -> Vec<String> {
    config
        .origins
        .iter()
        .filter(|(key, _)| key.as_str() != "agents.defaults.workspace")
        .filter_map(|(key, origin)| match origin {
            Origin::Flag => Some(format!("{key} (--set)")),
            Origin::Env => {
                let var = config::ENV_KEYS
                    .iter()
                    .find(|(_, k)| k == key)
                    .map_or("environment", |(var, _)| var);
                Some(format!("{key} ({var})"))
            }
            Origin::Config | Origin::Default => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::GlobalOptions;
    use crate::host::Host;

    struct Setup {
        dir: tempfile::TempDir,
    }

    impl Setup {
        fn new() -> Setup {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("bin")).unwrap();
            std::fs::write(dir.path().join("bin/almanac"), "").unwrap();
            Setup { dir }
        }

        fn home(&self) -> &Path {
            self.dir.path()
        }

        fn app(&self, vars: &[(&str, &str)], options: GlobalOptions) -> App {
            let mut host = Host::with_vars(
                vars.iter().copied(),
                self.home(),
                self.home(),
                "2026-11-29T09:00:00+00:00[UTC]".parse().unwrap(),
            );
            host.set_exe(self.home().join("bin/almanac"));
            App::load(&options, host).unwrap()
        }
    }

    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(files_under(&path));
            }
            out.push(path);
        }
        out.sort();
        out
    }

    #[test]
    fn install_writes_once_then_reports_unchanged_and_replaces_its_own_file() {
        let s = Setup::new();
        let app = s.app(&[], GlobalOptions::default());
        let unit = s
            .home()
            .join(".config/systemd/user/almanac-gateway.service");

        let dry = install(&app, Platform::Systemd, true).unwrap();
        assert_eq!((dry.action, dry.change), (Action::DryRun, Action::Written));
        assert!(!unit.exists(), "a dry run writes nothing");

        let first = install(&app, Platform::Systemd, false).unwrap();
        assert_eq!(first.action, Action::Written);
        assert_eq!(first.path, unit);
        let text = std::fs::read_to_string(&unit).unwrap();
        assert_eq!(Some(text.clone()), first.text);
        assert!(text.contains(&format!(
            "ExecStart={}/bin/almanac gateway run\n",
            s.home().display()
        )));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&unit).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);

        let again = install(&app, Platform::Systemd, false).unwrap();
        assert_eq!(again.action, Action::Unchanged);

        // An older file of ours (another executable) is replaced.
        std::fs::write(&unit, text.replace("/bin/almanac", "/old/almanac")).unwrap();
        let replaced = install(&app, Platform::Systemd, false).unwrap();
        assert_eq!(replaced.action, Action::Replaced);
        assert_eq!(std::fs::read_to_string(&unit).unwrap(), text);
        assert!(replaced.next_steps.iter().any(|c| c.contains("restart")));
    }

    #[test]
    fn a_file_almanac_did_not_write_is_neither_replaced_nor_removed() {
        let s = Setup::new();
        let app = s.app(&[], GlobalOptions::default());
        let unit = s
            .home()
            .join(".config/systemd/user/almanac-gateway.service");
        std::fs::create_dir_all(unit.parent().unwrap()).unwrap();
        std::fs::write(&unit, "[Service]\nExecStart=/usr/bin/mine\n").unwrap();
        for dry_run in [true, false] {
            let err = install(&app, Platform::Systemd, dry_run).unwrap_err();
            assert!(
                matches!(
                    err.downcast_ref(),
                    Some(InstallError::Foreign {
                        verb: "replace",
                        ..
                    })
                ),
                "{err:#}"
            );
            let err = uninstall(&app, Platform::Systemd, dry_run).unwrap_err();
            assert!(
                matches!(
                    err.downcast_ref(),
                    Some(InstallError::Foreign { verb: "remove", .. })
                ),
                "{err:#}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(&unit).unwrap(),
            "[Service]\nExecStart=/usr/bin/mine\n"
        );
    }

    #[test]
    fn uninstall_removes_the_unit_and_its_enablement_link_only() {
        let s = Setup::new();
        let app = s.app(&[], GlobalOptions::default());
        let written = install(&app, Platform::Systemd, false).unwrap();
        let unit = written.path.clone();
        let wants = unit.parent().unwrap().join("default.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        let link = wants.join("almanac-gateway.service");
        std::os::unix::fs::symlink(&unit, &link).unwrap();
        // A link to something else with another name stays.
        let other = wants.join("other.service");
        std::os::unix::fs::symlink("/usr/lib/systemd/user/other.service", &other).unwrap();

        let dry = uninstall(&app, Platform::Systemd, true).unwrap();
        assert_eq!((dry.action, dry.change), (Action::DryRun, Action::Removed));
        assert_eq!(dry.links, std::slice::from_ref(&link));
        assert!(unit.exists() && link.symlink_metadata().is_ok());

        let removed = uninstall(&app, Platform::Systemd, false).unwrap();
        assert_eq!(removed.action, Action::Removed);
        assert_eq!(removed.text, written.text);
        assert!(!unit.exists());
        assert!(link.symlink_metadata().is_err());
        assert!(other.symlink_metadata().is_ok());
        assert!(removed.next_steps[0].contains("systemctl --user stop"));

        let absent = uninstall(&app, Platform::Systemd, false).unwrap();
        assert_eq!(absent.action, Action::Absent);
        assert_eq!(absent.text, None);
    }

    #[test]
    fn a_link_with_the_units_name_pointing_elsewhere_is_kept() {
        let s = Setup::new();
        let app = s.app(&[], GlobalOptions::default());
        let unit = install(&app, Platform::Systemd, false).unwrap().path;
        let wants = unit.parent().unwrap().join("default.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        let link = wants.join("almanac-gateway.service");
        std::os::unix::fs::symlink("/etc/elsewhere.service", &link).unwrap();
        let removed = uninstall(&app, Platform::Systemd, false).unwrap();
        assert!(removed.links.is_empty());
        assert!(link.symlink_metadata().is_ok());
    }

    #[test]
    fn launchd_agent_goes_to_launch_agents_and_gets_its_log_folder() {
        let s = Setup::new();
        let options = GlobalOptions {
            paths: crate::paths::PathFlags {
                profile: Some("work".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let app = s.app(&[], options);
        let dry = install(&app, Platform::Launchd, true).unwrap();
        assert_eq!(
            dry.path,
            s.home()
                .join("Library/LaunchAgents/ai.almanac.gateway.work.plist")
        );
        let before = files_under(s.home());
        assert!(!before.iter().any(|p| p.ends_with("logs")));
        install(&app, Platform::Launchd, false).unwrap();
        assert!(s.home().join(".almanac-work/logs").is_dir());
        assert!(
            dry.next_steps
                .iter()
                .any(|c| c.starts_with("launchctl bootstrap gui/$UID "))
        );
    }

    #[test]
    fn a_dry_run_creates_nothing_anywhere() {
        let s = Setup::new();
        let app = s.app(&[], GlobalOptions::default());
        let before = files_under(s.home());
        for platform in [Platform::Systemd, Platform::Launchd] {
            install(&app, platform, true).unwrap();
            uninstall(&app, platform, true).unwrap();
        }
        assert_eq!(files_under(s.home()), before);
    }

    #[test]
    fn settings_from_set_and_the_environment_are_reported_as_not_carried() {
        let s = Setup::new();
        let options = GlobalOptions {
            config_values: vec![("logging.level".into(), "debug".into())],
            paths: crate::paths::PathFlags {
                workspace: Some("ws".into()),
                ..Default::default()
            },
        };
        let app = s.app(&[("SECURITY", "0")], options);
        let outcome = install(&app, Platform::Systemd, true).unwrap();
        assert_eq!(
            outcome.not_carried,
            ["logging.level (--set)", "security.enabled (SECURITY)"]
        );
        let text = outcome.text.unwrap();
        assert!(
            text.contains(&format!(
                "--workspace {}/ws gateway run",
                s.home().display()
            )),
            "{text}"
        );
    }

    #[test]
    fn a_missing_executable_is_an_error_not_a_unit() {
        let s = Setup::new();
        let mut app = s.app(&[], GlobalOptions::default());
        app.host.set_exe(s.home().join("bin/almanac (deleted)"));
        let err = install(&app, Platform::Systemd, true).unwrap_err();
        assert!(matches!(
            err.downcast_ref(),
            Some(InstallError::ExecutableGone(_))
        ));
    }

    #[test]
    fn json_names_the_action_in_kebab_case() {
        let s = Setup::new();
        let app = s.app(&[], GlobalOptions::default());
        let value = serde_json::to_value(install(&app, Platform::Systemd, true).unwrap()).unwrap();
        assert_eq!(value["action"], "dry-run");
        assert_eq!(value["platform"], "systemd");
        assert!(value["text"].as_str().unwrap().contains("[Service]"));
        assert!(value.get("change").is_none());
    }
}
