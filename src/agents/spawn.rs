//! The rules of `sessions_spawn`: what a spawn request may ask for and
//! whether its parent may spawn it now. Pure: the caller says who the
//! parent is (its agent, its depth, its children alive) and gets back the
//! child to start or the one reason it may not be.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Agents, MAIN, normalize_id};
use crate::config::SubagentDefaults;

/// The longest task a child is given, in characters.
pub(crate) const MAX_TASK_CHARS: usize = 16_000;

/// The arguments of `sessions_spawn`, as a model sends them.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SpawnRequest {
    pub task: String,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub thinking: Option<String>,
    /// 0: no limit; unset: `agents.defaults.subagents.runTimeoutSeconds`.
    #[serde(default)]
    pub run_timeout_seconds: Option<u32>,
    #[serde(default)]
    pub cleanup: Cleanup,
    #[serde(default)]
    pub mode: Option<String>,
}

/// What becomes of a child's session after its announce.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Cleanup {
    /// Its session row goes and its transcript is archived.
    Delete,
    /// Kept until `archiveAfterMinutes`.
    #[default]
    Keep,
}

/// The session asking to spawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parent<'a> {
    pub agent_id: &'a str,
    /// 0 for a session a person or a schedule started; a child's is its
    /// parent's plus one.
    pub depth: u32,
    /// Its children queued or running.
    pub children_alive: usize,
}

/// A child the parent may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildPlan {
    pub agent_id: String,
    pub task: String,
    pub label: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<String>,
    /// `None`: no limit.
    pub timeout: Option<Duration>,
    pub cleanup: Cleanup,
    pub depth: u32,
}

/// Why a spawn is refused; the text is what the model is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SpawnRefused {
    #[error("the task is empty: say what the child should do")]
    EmptyTask,
    #[error("the task has {chars} characters; a child's task may have at most {MAX_TASK_CHARS}")]
    TaskTooLong { chars: usize },
    #[error("mode `{0}` is not supported: a child runs its task once (mode `run`)")]
    Mode(String),
    #[error("unknown agent `{0}`")]
    UnknownAgent(String),
    #[error(
        "agent `{parent}` may not spawn children as `{target}` (agents.list[].subagents.allowAgents)"
    )]
    NotAllowed { parent: String, target: String },
    #[error(
        "a session at depth {depth} may not spawn: agents.defaults.subagents.maxSpawnDepth is {max}"
    )]
    TooDeep { depth: u32, max: u32 },
    #[error(
        "this session has {alive} children alive, the most it may have (agents.defaults.subagents.maxChildrenPerAgent is {max}); wait for one to end"
    )]
    TooManyChildren { alive: usize, max: u32 },
}

impl Agents {
    /// The child `request` asks `parent` to start, or why it may not.
    pub(crate) fn plan_spawn(
        &self,
        limits: &SubagentDefaults,
        parent: Parent<'_>,
        request: SpawnRequest,
    ) -> Result<ChildPlan, SpawnRefused> {
        if let Some(mode) = request.mode.as_deref()
            && mode != "run"
        {
            return Err(SpawnRefused::Mode(mode.to_string()));
        }
        let task = request.task.trim();
        if task.is_empty() {
            return Err(SpawnRefused::EmptyTask);
        }
        let chars = task.chars().count();
        if chars > MAX_TASK_CHARS {
            return Err(SpawnRefused::TaskTooLong { chars });
        }
        let agent_id = self.spawn_target(parent.agent_id, request.agent_id.as_deref())?;
        if parent.depth >= limits.max_spawn_depth {
            return Err(SpawnRefused::TooDeep {
                depth: parent.depth,
                max: limits.max_spawn_depth,
            });
        }
        if parent.children_alive >= limits.max_children_per_agent as usize {
            return Err(SpawnRefused::TooManyChildren {
                alive: parent.children_alive,
                max: limits.max_children_per_agent,
            });
        }
        let seconds = request
            .run_timeout_seconds
            .unwrap_or(limits.run_timeout_seconds);
        Ok(ChildPlan {
            agent_id,
            task: task.to_string(),
            label: request.label.filter(|l| !l.trim().is_empty()),
            model: request.model,
            thinking: request.thinking,
            timeout: (seconds > 0).then(|| Duration::from_secs(u64::from(seconds))),
            cleanup: request.cleanup,
            depth: parent.depth + 1,
        })
    }

    /// The agent a child runs as: the parent's own, or another its entry's
    /// `subagents.allowAgents` names (`*`: any).
    fn spawn_target(&self, parent: &str, asked: Option<&str>) -> Result<String, SpawnRefused> {
        let parent_id = normalize_id(parent, MAIN);
        let Some(asked) = asked.map(str::trim).filter(|a| !a.is_empty()) else {
            return Ok(parent_id);
        };
        let target = normalize_id(asked, MAIN);
        if self.get(&target).is_none() {
            return Err(SpawnRefused::UnknownAgent(asked.to_string()));
        }
        if target == parent_id {
            return Ok(target);
        }
        let allowed = self
            .get(&parent_id)
            .and_then(|a| a.entry.as_ref())
            .and_then(|e| e.subagents.as_ref())
            .is_some_and(|s| {
                s.allow_agents
                    .iter()
                    .any(|a| a.trim() == "*" || normalize_id(a, MAIN) == target)
            });
        if allowed {
            Ok(target)
        } else {
            Err(SpawnRefused::NotAllowed {
                parent: parent_id,
                target,
            })
        }
    }
}

/// The session key of a child: `agent:<agentId>:subagent:<uuid>`.
pub(crate) fn child_session_key(agent_id: &str, run_id: &str) -> String {
    format!("agent:{}:subagent:{run_id}", normalize_id(agent_id, MAIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The agents of `config`, read by the config loader as a user's file is.
    fn agents(config: &str) -> Agents {
        let dir = tempfile::tempdir().unwrap();
        super::super::tests::agents_of(dir.path(), config).unwrap()
    }

    fn two() -> Agents {
        agents(
            r#"{"agents": {"list": [
                {"id": "main", "default": true, "subagents": {"allowAgents": ["research"]}},
                {"id": "research"},
                {"id": "home"}]}}"#,
        )
    }

    fn ask(json: &str) -> SpawnRequest {
        serde_json::from_str(json).unwrap()
    }

    fn parent(agent_id: &str, depth: u32, children_alive: usize) -> Parent<'_> {
        Parent {
            agent_id,
            depth,
            children_alive,
        }
    }

    #[test]
    fn a_plain_request_runs_as_the_parents_agent_one_level_down_with_the_defaults() {
        let plan = two()
            .plan_spawn(
                &SubagentDefaults::default(),
                parent("main", 0, 0),
                ask(r#"{"task": "  find the receipts  ", "label": "receipts"}"#),
            )
            .unwrap();
        assert_eq!(plan.agent_id, "main");
        assert_eq!(plan.task, "find the receipts");
        assert_eq!(plan.label.as_deref(), Some("receipts"));
        assert_eq!(plan.depth, 1);
        assert_eq!(plan.timeout, None, "runTimeoutSeconds 0 is no limit");
        assert_eq!(plan.cleanup, Cleanup::Keep);
    }

    #[test]
    fn every_refusal_names_its_reason() {
        let limits = SubagentDefaults::default();
        let long = format!(r#"{{"task": "{}"}}"#, "x".repeat(MAX_TASK_CHARS + 1));
        let cases: Vec<(Parent<'_>, String, SpawnRefused)> = vec![
            (
                parent("main", 0, 0),
                r#"{"task": " "}"#.into(),
                SpawnRefused::EmptyTask,
            ),
            (
                parent("main", 0, 0),
                long,
                SpawnRefused::TaskTooLong {
                    chars: MAX_TASK_CHARS + 1,
                },
            ),
            (
                parent("main", 0, 0),
                r#"{"task": "t", "mode": "session"}"#.into(),
                SpawnRefused::Mode("session".into()),
            ),
            (
                parent("main", 0, 0),
                r#"{"task": "t", "agentId": "ghost"}"#.into(),
                SpawnRefused::UnknownAgent("ghost".into()),
            ),
            (
                parent("main", 0, 0),
                r#"{"task": "t", "agentId": "home"}"#.into(),
                SpawnRefused::NotAllowed {
                    parent: "main".into(),
                    target: "home".into(),
                },
            ),
            (
                parent("research", 0, 0),
                r#"{"task": "t", "agentId": "main"}"#.into(),
                SpawnRefused::NotAllowed {
                    parent: "research".into(),
                    target: "main".into(),
                },
            ),
            (
                parent("main", 1, 0),
                r#"{"task": "t"}"#.into(),
                SpawnRefused::TooDeep { depth: 1, max: 1 },
            ),
            (
                parent("main", 0, 5),
                r#"{"task": "t"}"#.into(),
                SpawnRefused::TooManyChildren { alive: 5, max: 5 },
            ),
        ];
        for (who, request, refused) in cases {
            assert_eq!(
                two().plan_spawn(&limits, who, ask(&request)),
                Err(refused.clone()),
                "{request}"
            );
            assert!(!refused.to_string().is_empty());
        }
    }

    #[test]
    fn allowed_agents_deeper_limits_and_timeouts_take_effect() {
        let mut limits = SubagentDefaults {
            max_spawn_depth: 2,
            run_timeout_seconds: 90,
            ..SubagentDefaults::default()
        };
        let plan = two()
            .plan_spawn(
                &limits,
                parent("main", 1, 4),
                ask(r#"{"task": "t", "agentId": "Research", "cleanup": "delete"}"#),
            )
            .unwrap();
        assert_eq!((plan.agent_id.as_str(), plan.depth), ("research", 2));
        assert_eq!(plan.timeout, Some(Duration::from_secs(90)));
        assert_eq!(plan.cleanup, Cleanup::Delete);
        let own = ask(r#"{"task": "t", "agentId": "main", "runTimeoutSeconds": 0}"#);
        limits.max_children_per_agent = 50;
        let plan = two()
            .plan_spawn(&limits, parent("main", 0, 49), own)
            .unwrap();
        assert_eq!(plan.timeout, None, "0 asked is no limit");
        let any = agents(
            r#"{"agents": {"list": [{"id": "a", "subagents": {"allowAgents": ["*"]}}, {"id": "b"}]}}"#,
        );
        let plan = any
            .plan_spawn(
                &limits,
                parent("a", 0, 0),
                ask(r#"{"task": "t", "agentId": "b"}"#),
            )
            .unwrap();
        assert_eq!(plan.agent_id, "b");
    }

    #[test]
    fn unknown_fields_and_cleanups_are_refused_when_read() {
        assert!(serde_json::from_str::<SpawnRequest>(r#"{"task": "t", "to": "123"}"#).is_err());
        assert!(
            serde_json::from_str::<SpawnRequest>(r#"{"task": "t", "cleanup": "never"}"#).is_err()
        );
        assert!(serde_json::from_str::<SpawnRequest>(r#"{"label": "no task"}"#).is_err());
    }

    #[test]
    fn a_childs_session_key_is_openclaws() {
        assert_eq!(
            child_session_key("Research", "0b6f"),
            "agent:research:subagent:0b6f"
        );
    }
}
