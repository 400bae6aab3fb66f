//! The agent's tool policy, separate from skill gating: which tools the
//! model is offered (`tools.profile`, `tools.allow`, `tools.deny`, with
//! OpenClaw's names and groups) and what `exec` may run
//! (`tools.exec.security`, `safeBins`, `ask`).
//!
//! Invariants:
//! * A tool the policy removes is not offered, and a call to it anyway is
//!   refused with the setting that removed it. `deny` always wins. A
//!   run's own list (a cron job's `--tools`) narrows what is offered; it
//!   never adds a tool.
//! * `exec` runs a command only when `security` is `full`, or when the
//!   allowlist accepts it (then the re-quoted words run, see
//!   [`super::shell`]), or when a person approved it on a terminal. With
//!   no terminal, a command that needs approval is refused.
//! * Terminal I/O stays out of the library: approval goes through an
//!   [`Approver`] the caller passes in.

use std::future::Future;
use std::pin::Pin;

use super::shell::Allowlist;
use crate::config::{ExecAsk, ExecSecurity, ToolProfile, ToolsConfig};

/// almanac's built-in tools.
pub(crate) const BUILT_IN: &[&str] = &[
    "read",
    "write",
    "edit",
    "exec",
    "memory_search",
    "memory_get",
    "memory_append",
    "cron",
];

/// OpenClaw's tool groups, with almanac's tools in them (names almanac
/// does not have are kept, so OpenClaw lists mean the same here).
pub(crate) const GROUPS: &[(&str, &[&str])] = &[
    ("group:fs", &["read", "write", "edit", "apply_patch"]),
    ("group:runtime", &["exec", "bash", "process"]),
    (
        "group:memory",
        &["memory_search", "memory_get", "memory_append"],
    ),
    (
        "group:sessions",
        &[
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
            "session_status",
            "subagents",
        ],
    ),
    ("group:messaging", &["message"]),
    ("group:web", &["web_search", "web_fetch"]),
    ("group:ui", &["browser", "canvas"]),
    ("group:automation", &["cron", "gateway"]),
    ("group:nodes", &["nodes"]),
    ("group:openclaw", BUILT_IN),
];

/// What each profile offers (`full` offers everything).
fn profile_entries(profile: ToolProfile) -> Option<&'static [&'static str]> {
    match profile {
        ToolProfile::Minimal => Some(&["session_status"]),
        ToolProfile::Coding => Some(&[
            "group:fs",
            "group:runtime",
            "group:sessions",
            "group:memory",
            "image",
        ]),
        ToolProfile::Messaging => Some(&[
            "group:messaging",
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "session_status",
        ]),
        ToolProfile::Full => None,
    }
}

fn profile_name(profile: ToolProfile) -> &'static str {
    match profile {
        ToolProfile::Minimal => "minimal",
        ToolProfile::Coding => "coding",
        ToolProfile::Messaging => "messaging",
        ToolProfile::Full => "full",
    }
}

/// `*` wildcards, any case.
fn glob(pattern: &str, name: &str) -> bool {
    // Tool names and policy entries are ASCII: matched byte by byte, with
    // nothing allocated (every turn checks every tool against the policy).
    if pattern.is_ascii() && name.is_ascii() {
        return glob_in(pattern.as_bytes(), name.as_bytes(), b'*', |a, b| {
            a.eq_ignore_ascii_case(&b)
        });
    }
    let pattern: Vec<char> = pattern.to_lowercase().chars().collect();
    let name: Vec<char> = name.to_lowercase().chars().collect();
    glob_in(&pattern, &name, '*', |a, b| a == b)
}

/// Wildcard matching (`star` matches any run) with backtracking to the
/// last `star`.
fn glob_in<T: Copy + PartialEq>(
    pattern: &[T],
    name: &[T],
    star: T,
    same: impl Fn(T, T) -> bool,
) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] != star && same(pattern[p], name[n]) {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == star {
            last_star = Some((p, n));
            p += 1;
        } else if let Some((sp, sn)) = last_star {
            p = sp + 1;
            n = sn + 1;
            last_star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == star)
}

/// Whether a policy entry (a tool name, a `group:*` name, or a pattern)
/// covers `tool`.
fn entry_covers(entry: &str, tool: &str) -> bool {
    let entry = entry.trim();
    if let Some((_, members)) = GROUPS.iter().find(|(g, _)| g.eq_ignore_ascii_case(entry)) {
        return members.iter().any(|m| m.eq_ignore_ascii_case(tool));
    }
    glob(entry, tool)
}

/// Which tools the model is offered.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ToolPolicy {
    profile: Option<ToolProfile>,
    allow: Vec<String>,
    deny: Vec<String>,
    /// A run's own list (a cron job's `--tools`): only tools it covers,
    /// of those the rest keeps.
    only: Option<Vec<String>>,
    /// Tools a subagent is not offered (`tools.subagents.tools.deny`, and
    /// the session tools).
    child_deny: Vec<String>,
}

/// The tools a subagent never gets, whatever its config: they act on
/// other sessions, which is its parent's business.
const CHILD_SESSION_TOOLS: &[&str] = &["sessions_list", "sessions_history", "sessions_send"];

impl ToolPolicy {
    pub(crate) fn new(config: &ToolsConfig) -> ToolPolicy {
        ToolPolicy {
            profile: config.profile,
            allow: config.allow.clone(),
            deny: config.deny.clone(),
            only: None,
            child_deny: Vec::new(),
        }
    }

    /// The same policy for a subagent's turn: narrowed to
    /// `tools.subagents.tools.allow` when set, without its `deny`, the
    /// session tools, and `sessions_spawn` unless `may_spawn`.
    pub(crate) fn for_subagent(
        mut self,
        filter: &crate::config::SubagentToolFilter,
        may_spawn: bool,
    ) -> ToolPolicy {
        if let Some(allow) = &filter.allow {
            self.only = Some(allow.clone());
        }
        self.child_deny = filter.deny.clone();
        self.child_deny
            .extend(CHILD_SESSION_TOOLS.iter().map(|t| t.to_string()));
        if !may_spawn {
            // A child that may not spawn has no children to control.
            self.child_deny.push("sessions_spawn".to_string());
            self.child_deny.push("subagents".to_string());
        }
        self
    }

    /// The same policy, narrowed to the tools `only` covers (entries as
    /// in `tools.allow`); `None` narrows nothing. It never adds a tool.
    pub(crate) fn narrowed_to(mut self, only: Option<Vec<String>>) -> ToolPolicy {
        self.only = only;
        self
    }

    /// `Ok` when `tool` is offered; else which setting removed it.
    pub(crate) fn check(&self, tool: &str) -> Result<(), String> {
        self.check_config(tool)?;
        if let Some(entry) = self.child_deny.iter().find(|e| entry_covers(e, tool)) {
            return Err(format!(
                "the tool `{tool}` is not offered to a subagent (\"{entry}\")"
            ));
        }
        match &self.only {
            Some(only) if !only.iter().any(|e| entry_covers(e, tool)) => Err(format!(
                "the tool `{tool}` is not among this run's tools ({})",
                if only.is_empty() {
                    "none".to_string()
                } else {
                    only.join(", ")
                }
            )),
            _ => Ok(()),
        }
    }

    /// What `tools.profile`, `allow` and `deny` say of `tool`.
    fn check_config(&self, tool: &str) -> Result<(), String> {
        if let Some(entry) = self.deny.iter().find(|e| entry_covers(e, tool)) {
            return Err(format!(
                "the tool `{tool}` is turned off by tools.deny (\"{entry}\")"
            ));
        }
        let allowed = || self.allow.iter().any(|e| entry_covers(e, tool));
        match self
            .profile
            .and_then(|p| profile_entries(p).map(|e| (p, e)))
        {
            Some((profile, entries)) => {
                if entries.iter().any(|e| entry_covers(e, tool)) || allowed() {
                    Ok(())
                } else {
                    Err(format!(
                        "the tool `{tool}` is not in tools.profile \"{}\" (tools.allow can add it)",
                        profile_name(profile)
                    ))
                }
            }
            None if self.allow.is_empty() || allowed() => Ok(()),
            None => Err(format!("the tool `{tool}` is not in tools.allow")),
        }
    }

    pub(crate) fn allows(&self, tool: &str) -> bool {
        self.check(tool).is_ok()
    }
}

/// What `exec` may run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExecPolicy {
    pub security: ExecSecurity,
    pub ask: ExecAsk,
    pub allowlist: Allowlist,
}

/// What to do with one `exec` call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExecPlan {
    /// Run `script` with `sh -c`, after approval when `ask` says why one is
    /// needed.
    Run { script: String, ask: Option<String> },
    /// Refused: why, for the model.
    Refuse(String),
}

fn security_name(security: ExecSecurity) -> &'static str {
    match security {
        ExecSecurity::Deny => "deny",
        ExecSecurity::Allowlist => "allowlist",
        ExecSecurity::Full => "full",
    }
}

pub(crate) fn ask_name(ask: ExecAsk) -> &'static str {
    match ask {
        ExecAsk::Off => "off",
        ExecAsk::OnMiss => "on-miss",
        ExecAsk::Always => "always",
    }
}

impl ExecPolicy {
    /// Decides what `command` may do under this policy.
    pub(crate) fn plan(&self, command: &str) -> ExecPlan {
        let always =
            (self.ask == ExecAsk::Always).then(|| "tools.exec.ask is \"always\"".to_string());
        match self.security {
            ExecSecurity::Deny => ExecPlan::Refuse(
                "exec is turned off (tools.exec.security is \"deny\"); nothing ran".to_string(),
            ),
            ExecSecurity::Full => ExecPlan::Run {
                script: command.to_string(),
                ask: always,
            },
            ExecSecurity::Allowlist => match self.allowlist.check(command) {
                Ok(script) => ExecPlan::Run {
                    script,
                    ask: always,
                },
                Err(refusal) => {
                    let why = format!(
                        "{refusal}. tools.exec.security is \"allowlist\": commands are simple programs from tools.exec.safeBins ({}) joined by |, &&, || or ;, with no $, redirections, globs or subshells",
                        self.allowlist
                    );
                    match self.ask {
                        ExecAsk::Off => ExecPlan::Refuse(format!(
                            "exec refused, nothing ran: {why}. Read files with the `read` tool. The user can add a program to tools.exec.safeBins, set tools.exec.security to \"full\", or set tools.exec.ask to \"on-miss\" to approve commands on a terminal."
                        )),
                        ExecAsk::OnMiss | ExecAsk::Always => ExecPlan::Run {
                            script: command.to_string(),
                            ask: Some(why),
                        },
                    }
                }
            },
        }
    }

    /// The refusal when approval was needed but not given.
    pub(crate) fn not_approved(&self, why: &str, approval: Approval) -> String {
        let how = match approval {
            Approval::Refused => "the user did not approve it".to_string(),
            _ => format!(
                "approving it needs a terminal and there is none (tools.exec.ask is \"{}\")",
                ask_name(self.ask)
            ),
        };
        format!(
            "exec refused, nothing ran: {why}; {how}. Read files with the `read` tool. The user can add a program to tools.exec.safeBins or set tools.exec.security to \"full\" (now \"{}\").",
            security_name(self.security)
        )
    }

    /// A line for the `exec` tool's description.
    pub(crate) fn describe(&self) -> String {
        match self.security {
            ExecSecurity::Deny => "Commands are turned off.".to_string(),
            ExecSecurity::Full => "Any shell command runs.".to_string(),
            ExecSecurity::Allowlist => format!(
                "Allowed programs: {}; join them with |, &&, || or ;. No $, redirections, globs or subshells; quote literal text. Read files with `read`, not exec.",
                self.allowlist
            ),
        }
    }
}

/// The answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approval {
    Approved,
    Refused,
    /// Nobody can be asked (no terminal).
    Unavailable,
}

/// A command waiting for a person's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApprovalRequest {
    /// The command as it will run.
    pub command: String,
    /// Why approval is asked.
    pub reason: String,
}

/// Asks a person whether a command may run.
pub(crate) trait Approver: Send + Sync {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>>;
}

/// Nobody to ask: every request is unanswered, so refused.
pub(crate) struct NoApprover;

impl Approver for NoApprover {
    fn approve<'a>(
        &'a self,
        _: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(std::future::ready(Approval::Unavailable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(profile: Option<ToolProfile>, allow: &[&str], deny: &[&str]) -> ToolPolicy {
        ToolPolicy::new(&ToolsConfig {
            profile,
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            ..ToolsConfig::default()
        })
    }

    const TOOLS: &[&str] = &[
        "read",
        "write",
        "edit",
        "exec",
        "memory_search",
        "memory_get",
        "memory_append",
        "cron",
        "weather",
    ];

    fn offered(p: &ToolPolicy) -> Vec<&'static str> {
        TOOLS.iter().copied().filter(|t| p.allows(t)).collect()
    }

    /// A subagent loses the session tools, `sessions_spawn` unless another
    /// level is allowed, and what `tools.subagents.tools` takes away; its
    /// `allow` narrows and never widens.
    #[test]
    fn a_subagent_gets_the_usual_tools_without_the_session_ones() {
        use crate::config::SubagentToolFilter;
        let usual = policy(None, &[], &["cron"]);
        let none = SubagentToolFilter::default();
        let child = usual.clone().for_subagent(&none, false);
        for tool in ["sessions_spawn", "sessions_send", "subagents", "cron"] {
            assert!(!child.allows(tool), "{tool}");
        }
        assert!(child.allows("read") && child.allows("exec"));
        assert!(
            child
                .check("sessions_spawn")
                .unwrap_err()
                .contains("not offered to a subagent")
        );
        assert!(
            usual
                .clone()
                .for_subagent(&none, true)
                .allows("sessions_spawn")
        );
        assert!(usual.clone().for_subagent(&none, true).allows("subagents"));
        let narrow = SubagentToolFilter {
            allow: Some(vec!["group:fs".into(), "cron".into()]),
            deny: vec!["write".into()],
        };
        let child = usual.for_subagent(&narrow, true);
        let kept: Vec<_> = ["read", "write", "edit", "exec", "cron"]
            .into_iter()
            .filter(|t| child.allows(t))
            .collect();
        assert_eq!(kept, ["read", "edit"]);
    }

    /// A run's own list narrows the policy (names, groups, patterns) and
    /// never widens it: `deny` and the profile still win.
    #[test]
    fn a_runs_list_is_intersected_with_the_policy() {
        let only = |list: &[&str]| Some(list.iter().map(|s| s.to_string()).collect());
        let cases: Vec<(ToolPolicy, Vec<&str>)> = vec![
            (
                policy(None, &[], &[]).narrowed_to(only(&["read"])),
                vec!["read"],
            ),
            (
                policy(None, &[], &[]).narrowed_to(only(&["group:memory", "w*"])),
                vec![
                    "write",
                    "memory_search",
                    "memory_get",
                    "memory_append",
                    "weather",
                ],
            ),
            (
                policy(None, &[], &["write"]).narrowed_to(only(&["read", "write"])),
                vec!["read"],
            ),
            (
                policy(Some(ToolProfile::Minimal), &[], &[]).narrowed_to(only(&["read"])),
                vec![],
            ),
            (policy(None, &[], &[]).narrowed_to(only(&[])), vec![]),
            (policy(None, &[], &[]).narrowed_to(None), TOOLS.to_vec()),
        ];
        for (p, expected) in cases {
            assert_eq!(offered(&p), expected, "{p:?}");
        }
        let why = policy(None, &[], &[])
            .narrowed_to(only(&["read"]))
            .check("write")
            .unwrap_err();
        assert!(why.contains("not among this run's tools (read)"), "{why}");
    }

    #[test]
    fn profiles_allow_and_deny_resolve_like_openclaw() {
        use ToolProfile::*;
        let all = TOOLS.to_vec();
        let builtin = TOOLS[..8].to_vec();
        let coding = TOOLS[..7].to_vec();
        let cases: Vec<(&str, ToolPolicy, Vec<&str>)> = vec![
            ("unset: everything", policy(None, &[], &[]), all.clone()),
            (
                "full: everything",
                policy(Some(Full), &[], &[]),
                all.clone(),
            ),
            (
                "minimal: nothing almanac has",
                policy(Some(Minimal), &[], &[]),
                vec![],
            ),
            (
                "messaging: nothing almanac has",
                policy(Some(Messaging), &[], &[]),
                vec![],
            ),
            (
                "coding: fs, runtime, memory",
                policy(Some(Coding), &[], &[]),
                coding.clone(),
            ),
            (
                "cron is in group:automation",
                policy(Some(Coding), &["group:automation"], &[]),
                builtin.clone(),
            ),
            (
                "cron denied by name",
                policy(None, &[], &["cron"]),
                vec![
                    "read",
                    "write",
                    "edit",
                    "exec",
                    "memory_search",
                    "memory_get",
                    "memory_append",
                    "weather",
                ],
            ),
            (
                "coding without runtime",
                policy(Some(Coding), &[], &["group:runtime"]),
                vec![
                    "read",
                    "write",
                    "edit",
                    "memory_search",
                    "memory_get",
                    "memory_append",
                ],
            ),
            (
                "allow adds to a profile",
                policy(Some(Minimal), &["read", "Weather"], &[]),
                vec!["read", "weather"],
            ),
            (
                "allow alone restricts",
                policy(None, &["group:fs", "memory_*"], &[]),
                vec![
                    "read",
                    "write",
                    "edit",
                    "memory_search",
                    "memory_get",
                    "memory_append",
                ],
            ),
            (
                "full with allow restricts to allow",
                policy(Some(Full), &["READ"], &[]),
                vec!["read"],
            ),
            (
                "deny wins over allow",
                policy(None, &["*"], &["exec", "w*"]),
                vec![
                    "read",
                    "edit",
                    "memory_search",
                    "memory_get",
                    "memory_append",
                    "cron",
                ],
            ),
            (
                "deny wins over the profile",
                policy(Some(Coding), &["weather"], &["group:memory", "weather"]),
                vec!["read", "write", "edit", "exec"],
            ),
            ("deny everything", policy(None, &[], &["*"]), vec![]),
            (
                "group:openclaw is the built-in tools",
                policy(None, &["group:openclaw"], &[]),
                builtin.clone(),
            ),
            (
                "an unknown group covers nothing",
                policy(None, &["group:nope"], &[]),
                vec![],
            ),
        ];
        for (label, p, want) in cases {
            assert_eq!(offered(&p), want, "{label}");
        }
        assert_eq!(
            policy(Some(Coding), &[], &[]).check("weather").unwrap_err(),
            "the tool `weather` is not in tools.profile \"coding\" (tools.allow can add it)"
        );
        assert_eq!(
            policy(None, &[], &["group:runtime"])
                .check("exec")
                .unwrap_err(),
            "the tool `exec` is turned off by tools.deny (\"group:runtime\")"
        );
        assert_eq!(
            policy(None, &["read"], &[]).check("exec").unwrap_err(),
            "the tool `exec` is not in tools.allow"
        );
    }

    #[test]
    fn wildcards() {
        for (pattern, name, want) in [
            ("*", "anything", true),
            ("memory_*", "memory_get", true),
            ("MEMORY_*", "memory_get", true),
            ("*_get", "memory_get", true),
            ("m*y*t", "memory_get", true),
            ("m*y*x", "memory_get", false),
            ("read", "reader", false),
            ("re*d", "read", true),
            ("", "read", false),
            ("", "", true),
            ("**", "", true),
            ("ÉTAT_*", "état_lire", true),
            ("é*", "etat", false),
        ] {
            assert_eq!(glob(pattern, name), want, "{pattern} {name}");
        }
    }

    fn exec(security: ExecSecurity, ask: ExecAsk) -> ExecPolicy {
        ExecPolicy {
            security,
            ask,
            allowlist: Allowlist::new(crate::config::DEFAULT_SAFE_BINS.iter().copied(), []),
        }
    }

    #[test]
    fn exec_plans_by_security_and_ask() {
        use ExecAsk::*;
        use ExecSecurity::*;
        let run = |script: &str, ask: bool| (script.to_string(), ask);
        let cases: Vec<(ExecSecurity, ExecAsk, &str, Option<(String, bool)>)> = vec![
            (Deny, Off, "echo hi", None),
            (Deny, Always, "echo hi", None),
            (Allowlist, Off, "echo hi", Some(run("'echo' 'hi'", false))),
            (
                Allowlist,
                OnMiss,
                "echo hi",
                Some(run("'echo' 'hi'", false)),
            ),
            (Allowlist, Always, "echo hi", Some(run("'echo' 'hi'", true))),
            (Allowlist, Off, "env", None),
            (Allowlist, OnMiss, "env", Some(run("env", true))),
            (Allowlist, Always, "cat x", Some(run("cat x", true))),
            (Full, Off, "env | cat", Some(run("env | cat", false))),
            (Full, OnMiss, "env | cat", Some(run("env | cat", false))),
            (Full, Always, "env", Some(run("env", true))),
        ];
        for (security, ask, command, want) in cases {
            let got = match exec(security, ask).plan(command) {
                ExecPlan::Run { script, ask } => Some((script, ask.is_some())),
                ExecPlan::Refuse(_) => None,
            };
            assert_eq!(got, want, "{security:?} {ask:?} {command}");
        }
        match exec(Allowlist, Off).plan("cat /etc/passwd") {
            ExecPlan::Refuse(why) => {
                assert!(why.contains("`cat` is not an allowed program"), "{why}");
                assert!(why.contains("nothing ran") && why.contains("tools.exec.safeBins"));
                assert!(why.contains("`read` tool"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        let p = exec(Allowlist, OnMiss);
        let refusal = p.not_approved("`env` is not an allowed program", Approval::Unavailable);
        assert!(
            refusal.contains("needs a terminal") && refusal.contains("on-miss"),
            "{refusal}"
        );
        assert!(
            p.not_approved("x", Approval::Refused)
                .contains("did not approve")
        );
    }
}
