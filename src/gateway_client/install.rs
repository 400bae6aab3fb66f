//! The gateway as a per-user service: the text of a systemd user unit
//! (Linux) or a launchd agent (macOS), where it goes, and what installing
//! or removing it means.
//!
//! Pure: everything here is computed from a [`Host`] and resolved
//! [`Paths`]; the app layer reads and writes the file. This is the one
//! file almanac writes outside its state directory and workspace, so:
//!
//! * the service file carries [`MARKER`], and only a file carrying it is
//!   ever replaced or removed;
//! * the service runs the same executable against the same state
//!   directory, profile, config file and workspace as the command that
//!   installed it: the location flags it needs and, as environment,
//!   only almanac's own location variables ([`LOCATION_VARS`]), never a
//!   provider key or token;
//! * every value is quoted for the file's syntax (systemd's quoting and
//!   specifiers, XML escaping); a value no service file can hold (a
//!   control character, a path that is not UTF-8) is an error, never a
//!   mangled file.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::Origin;
use crate::host::Host;
use crate::paths::{self, DEFAULT_PROFILE, PathError, PathFlags, Paths};

/// Which service manager runs the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Platform {
    /// A systemd user unit (Linux).
    Systemd,
    /// A launchd agent (macOS).
    Launchd,
}

impl Platform {
    /// The service manager of the system almanac was built for.
    pub(crate) fn current() -> Result<Platform, InstallError> {
        if cfg!(target_os = "macos") {
            Ok(Platform::Launchd)
        } else if cfg!(target_os = "linux") {
            Ok(Platform::Systemd)
        } else {
            Err(InstallError::Unsupported)
        }
    }

    /// What the file is, for people.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Platform::Systemd => "systemd user unit",
            Platform::Launchd => "launchd agent",
        }
    }
}

/// The words that mark a service file as written by almanac: only a file
/// containing them is replaced or removed.
pub(crate) const MARKER: &str = "Written by almanac gateway install";

/// The only environment variables a service file sets: almanac's own
/// location settings, when the installing command had them.
pub(crate) const LOCATION_VARS: [&str; 4] = [
    "ALMANAC_STATE_DIR",
    "ALMANAC_PROFILE",
    "ALMANAC_CONFIG",
    "ALMANAC_WORKSPACE",
];

/// The location variables whose values are paths (made absolute in the
/// service file: a service does not start in the installing shell's
/// working directory).
const PATH_VARS: [&str; 3] = ["ALMANAC_STATE_DIR", "ALMANAC_CONFIG", "ALMANAC_WORKSPACE"];

/// Seconds the service manager waits after SIGTERM before killing the
/// gateway; the gateway's own shutdown deadline is 10 s.
const STOP_TIMEOUT_SECS: u32 = 15;

/// Why a service file cannot be written or removed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InstallError {
    /// A file at the service's path that almanac did not write (a refusal).
    #[error(
        "refusing to {verb} {}: almanac did not write it (it has no `{MARKER}` line); move it away yourself if it should go",
        path.display()
    )]
    Foreign { path: PathBuf, verb: &'static str },
    #[error(
        "installing the gateway as a service works on Linux (systemd) and macOS (launchd) only"
    )]
    Unsupported,
    #[error("cannot tell where the running almanac executable is")]
    NoExecutable,
    #[error("the running almanac executable {} no longer exists (was it replaced?); run the installed one", .0.display())]
    ExecutableGone(PathBuf),
    #[error("{} is not valid UTF-8, which a service file cannot name", .0.display())]
    NotUnicode(PathBuf),
    #[error("{0:?} contains a control character, which a service file cannot hold")]
    ControlCharacter(String),
}

/// What the service runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceSpec {
    /// The profile; it names the service so that profiles do not collide.
    pub profile: String,
    /// The almanac executable, an absolute path.
    pub program: String,
    /// The arguments: location flags, then `gateway run`.
    pub args: Vec<String>,
    /// Location variables of the installing command, paths made absolute.
    pub env: Vec<(String, String)>,
    /// Where a launchd agent's output goes (`<state dir>/logs`).
    pub log_dir: String,
}

impl ServiceSpec {
    /// The service running `exe` against the state `paths` resolved to
    /// for a command run on `host`.
    pub(crate) fn new(exe: &Path, paths: &Paths, host: &Host) -> Result<ServiceSpec, InstallError> {
        let mut args = location_flags(paths, host)?;
        args.extend(["gateway".to_string(), "run".to_string()]);
        Ok(ServiceSpec {
            profile: paths.profile.clone(),
            program: path_text(exe)?,
            args,
            env: location_env(host)?,
            log_dir: path_text(&paths.state_dir.join("logs"))?,
        })
    }

    fn values(&self) -> impl Iterator<Item = &str> {
        [self.program.as_str(), self.log_dir.as_str(), &self.profile]
            .into_iter()
            .chain(self.args.iter().map(String::as_str))
            .chain(self.env.iter().map(|(_, v)| v.as_str()))
    }
}

/// The location variables set on `host`, from [`LOCATION_VARS`] only,
/// with path values made absolute.
pub(crate) fn location_env(host: &Host) -> Result<Vec<(String, String)>, InstallError> {
    let mut env = Vec::new();
    for name in LOCATION_VARS {
        let Some(value) = host.var(name) else {
            continue;
        };
        let value = if PATH_VARS.contains(&name) {
            path_text(&host.resolve_path(value))?
        } else {
            value.to_string()
        };
        env.push((name.to_string(), value));
    }
    Ok(env)
}

/// The global flags a process that sees only the location variables of
/// `host` needs to resolve the same profile, state directory, config file
/// and workspace as `paths`: none for what the environment already
/// decides, paths absolute.
pub(crate) fn location_flags(paths: &Paths, host: &Host) -> Result<Vec<String>, InstallError> {
    let service_host = host.with_only_vars(&LOCATION_VARS);
    let resolve = |flags: &PathFlags| paths::resolve_state(flags, &service_host).ok();
    let mut flags = PathFlags::default();
    let mut args = Vec::new();
    // The profile first: it also moves the state directory.
    if resolve(&flags).map(|s| s.profile).as_ref() != Some(&paths.profile) {
        flags.profile = Some(paths.profile.clone());
        args.extend(["--profile".to_string(), paths.profile.clone()]);
    }
    if resolve(&flags).map(|s| s.state_dir).as_ref() != Some(&paths.state_dir) {
        let dir = path_text(&paths.state_dir)?;
        flags.state_dir = Some(dir.clone());
        args.extend(["--state-dir".to_string(), dir]);
    }
    if resolve(&flags).map(|s| s.config_path).as_ref() != Some(&paths.config_path) {
        args.extend(["--config".to_string(), path_text(&paths.config_path)?]);
    }
    // The config file and the environment reach the service as they are;
    // only a flag would be lost.
    if paths.workspace_origin == Origin::Flag {
        args.extend(["--workspace".to_string(), path_text(&paths.workspace)?]);
    }
    Ok(args)
}

fn path_text(path: &Path) -> Result<String, InstallError> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| InstallError::NotUnicode(path.to_path_buf()))
}

/// The systemd unit name or launchd label of a profile's service.
pub(crate) fn service_name(platform: Platform, profile: &str) -> String {
    let suffix = |sep: &str| {
        if profile == DEFAULT_PROFILE {
            String::new()
        } else {
            format!("{sep}{profile}")
        }
    };
    match platform {
        Platform::Systemd => format!("almanac-gateway{}.service", suffix("-")),
        Platform::Launchd => format!("ai.almanac.gateway{}", suffix(".")),
    }
}

/// The folder the service manager reads per-user services from:
/// `$XDG_CONFIG_HOME/systemd/user` (else `~/.config/systemd/user`), or
/// `~/Library/LaunchAgents`.
pub(crate) fn service_dir(platform: Platform, host: &Host) -> Result<PathBuf, PathError> {
    let home = || host.home.clone().ok_or(PathError::NoHome);
    Ok(match platform {
        Platform::Systemd => {
            // The XDG rule: a relative value is invalid and ignored.
            let config = match host.var("XDG_CONFIG_HOME").map(PathBuf::from) {
                Some(dir) if dir.is_absolute() => dir,
                _ => home()?.join(".config"),
            };
            config.join("systemd").join("user")
        }
        Platform::Launchd => home()?.join("Library").join("LaunchAgents"),
    })
}

/// Where a profile's service file goes.
pub(crate) fn service_path(
    platform: Platform,
    host: &Host,
    profile: &str,
) -> Result<PathBuf, PathError> {
    let name = service_name(platform, profile);
    let file = match platform {
        Platform::Systemd => name,
        Platform::Launchd => format!("{name}.plist"),
    };
    Ok(service_dir(platform, host)?.join(file))
}

/// The link `systemctl --user enable` makes for the unit at `unit_path`
/// (`WantedBy=default.target`); launchd has none.
pub(crate) fn enablement_link(platform: Platform, unit_path: &Path) -> Option<PathBuf> {
    match platform {
        Platform::Systemd => {
            let name = unit_path.file_name()?;
            Some(unit_path.parent()?.join("default.target.wants").join(name))
        }
        Platform::Launchd => None,
    }
}

/// Whether a link at `link` whose target reads `target` points at
/// `unit_path` (systemctl writes absolute targets; a relative one is read
/// from the link's folder).
pub(crate) fn link_points_to(link: &Path, target: &Path, unit_path: &Path) -> bool {
    let resolved = match link.parent() {
        Some(dir) if target.is_relative() => dir.join(target),
        _ => target.to_path_buf(),
    };
    paths::normalize(&resolved).is_some_and(|p| p == unit_path)
}

/// The service file for `spec`.
pub(crate) fn render(platform: Platform, spec: &ServiceSpec) -> Result<String, InstallError> {
    if let Some(bad) = spec.values().find(|v| v.chars().any(char::is_control)) {
        return Err(InstallError::ControlCharacter(bad.to_string()));
    }
    Ok(match platform {
        Platform::Systemd => systemd_unit(spec),
        Platform::Launchd => launchd_plist(spec),
    })
}

fn systemd_unit(spec: &ServiceSpec) -> String {
    // Variables are expanded in the arguments only, never in the program.
    let mut exec = systemd_word(&spec.program, false);
    for arg in &spec.args {
        exec.push(' ');
        exec.push_str(&systemd_word(arg, true));
    }
    let mut out = String::new();
    out.push_str(&format!(
        "# {MARKER}: the almanac gateway as a systemd user service.\n\
         # `almanac gateway uninstall` removes this file. Provider keys and\n\
         # tokens are not written here: set them in almanac's config file or\n\
         # in an EnvironmentFile= you control.\n\
         [Unit]\n\
         Description={}\n\
         \n\
         [Service]\n\
         ExecStart={exec}\n",
        description(&spec.profile)
    ));
    for (name, value) in &spec.env {
        out.push_str(&format!(
            "Environment={}\n",
            systemd_word(&format!("{name}={value}"), false)
        ));
    }
    out.push_str(&format!(
        "Restart=on-failure\n\
         RestartSec=2\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec={STOP_TIMEOUT_SECS}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n"
    ));
    out
}

fn description(profile: &str) -> String {
    if profile == DEFAULT_PROFILE {
        "almanac gateway".to_string()
    } else {
        format!("almanac gateway (profile {profile})")
    }
}

/// One word of a systemd setting (systemd.syntax "Quoting"): as it is
/// when it holds only characters with no meaning there, else in double
/// quotes with `\` and `"` escaped. `%` starts a specifier everywhere,
/// so it is doubled; in a command's arguments `$` starts a variable
/// (`dollars_expand`), so it is doubled there too.
fn systemd_word(word: &str, dollars_expand: bool) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c));
    if plain {
        return word.to_string();
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' if dollars_expand => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn launchd_plist(spec: &ServiceSpec) -> String {
    let label = service_name(Platform::Launchd, &spec.profile);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <!-- {MARKER}: the almanac gateway as a launchd agent.\n     \
         `almanac gateway uninstall` removes this file. Provider keys and\n     \
         tokens are not written here: set them in almanac's config file. -->\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \t<key>Label</key>\n\
         \t<string>{}</string>\n\
         \t<key>ProgramArguments</key>\n\
         \t<array>\n",
        xml(&label)
    );
    for arg in std::iter::once(&spec.program).chain(&spec.args) {
        out.push_str(&format!("\t\t<string>{}</string>\n", xml(arg)));
    }
    out.push_str("\t</array>\n");
    if !spec.env.is_empty() {
        out.push_str("\t<key>EnvironmentVariables</key>\n\t<dict>\n");
        for (name, value) in &spec.env {
            out.push_str(&format!(
                "\t\t<key>{}</key>\n\t\t<string>{}</string>\n",
                xml(name),
                xml(value)
            ));
        }
        out.push_str("\t</dict>\n");
    }
    let log = |name: &str| xml(&format!("{}/{name}", spec.log_dir));
    out.push_str(&format!(
        "\t<key>RunAtLoad</key>\n\
         \t<true/>\n\
         \t<key>KeepAlive</key>\n\
         \t<dict>\n\
         \t\t<key>SuccessfulExit</key>\n\
         \t\t<false/>\n\
         \t</dict>\n\
         \t<key>ExitTimeOut</key>\n\
         \t<integer>{STOP_TIMEOUT_SECS}</integer>\n\
         \t<key>StandardOutPath</key>\n\
         \t<string>{}</string>\n\
         \t<key>StandardErrorPath</key>\n\
         \t<string>{}</string>\n\
         </dict>\n\
         </plist>\n",
        log("gateway.out.log"),
        log("gateway.err.log")
    ));
    out
}

/// Text for XML character data.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Whether a service file was written by almanac.
pub(crate) fn is_ours(bytes: &[u8]) -> bool {
    bytes
        .windows(MARKER.len())
        .any(|window| window == MARKER.as_bytes())
}

/// What installing `text` at `path` does, given what is there now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InstallChange {
    /// No file yet.
    Create,
    /// The same text is there already.
    Unchanged,
    /// An earlier almanac service file with other text.
    Replace,
}

/// Decides an install; a file almanac did not write is refused.
pub(crate) fn install_change(
    path: &Path,
    existing: Option<&[u8]>,
    text: &str,
) -> Result<InstallChange, InstallError> {
    match existing {
        None => Ok(InstallChange::Create),
        Some(bytes) if bytes == text.as_bytes() => Ok(InstallChange::Unchanged),
        Some(bytes) if is_ours(bytes) => Ok(InstallChange::Replace),
        Some(_) => Err(InstallError::Foreign {
            path: path.to_path_buf(),
            verb: "replace",
        }),
    }
}

/// Decides an uninstall: `true` when there is a file of ours to remove,
/// `false` when there is none; a file almanac did not write is refused.
pub(crate) fn uninstall_change(path: &Path, existing: Option<&[u8]>) -> Result<bool, InstallError> {
    match existing {
        None => Ok(false),
        Some(bytes) if is_ours(bytes) => Ok(true),
        Some(_) => Err(InstallError::Foreign {
            path: path.to_path_buf(),
            verb: "remove",
        }),
    }
}

/// Where provider keys go instead of the service file.
pub(crate) fn keys_note(platform: Platform) -> &'static str {
    match platform {
        Platform::Systemd => {
            "Provider API keys and tokens are not in this file: set them in almanac's config file or in an EnvironmentFile= you control."
        }
        Platform::Launchd => {
            "Provider API keys and tokens are not in this file: set them in almanac's config file."
        }
    }
}

/// The commands that start the installed service (almanac runs none of
/// them); `replaced` adds a restart so a running gateway picks up the new
/// file.
pub(crate) fn install_commands(
    platform: Platform,
    path: &Path,
    profile: &str,
    replaced: bool,
) -> Vec<String> {
    let name = service_name(platform, profile);
    match platform {
        Platform::Systemd => {
            let mut commands = vec![format!(
                "systemctl --user daemon-reload && systemctl --user enable --now {name}"
            )];
            if replaced {
                commands.push(format!("systemctl --user restart {name}"));
            }
            commands.push(
                "loginctl enable-linger \"$USER\"   # keep it running while you are logged out"
                    .to_string(),
            );
            commands
        }
        Platform::Launchd => {
            let mut commands = Vec::new();
            if replaced {
                commands.push(format!("launchctl bootout gui/$UID/{name}"));
            }
            commands.push(format!(
                "launchctl bootstrap gui/$UID {}",
                shell_word(&path.to_string_lossy())
            ));
            commands
        }
    }
}

/// The commands that stop a running gateway after its file is removed.
pub(crate) fn uninstall_commands(platform: Platform, profile: &str) -> Vec<String> {
    let name = service_name(platform, profile);
    match platform {
        Platform::Systemd => vec![format!(
            "systemctl --user stop {name} && systemctl --user daemon-reload"
        )],
        Platform::Launchd => vec![format!("launchctl bootout gui/$UID/{name}")],
    }
}

/// `word` as one POSIX shell word.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;
