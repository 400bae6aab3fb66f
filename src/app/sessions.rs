//! Session use cases: which sessions an agent has, which key a request
//! runs in, which model a session keeps, and `almanac sessions show`.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Value, json};

use super::App;
use crate::session::store::SessionEntry;
use crate::session::{Sessions, transcript};

impl App {
    /// The sessions of `agent` (default: the agent this app is for).
    pub(crate) fn sessions(&self, agent: Option<&str>) -> Sessions {
        Sessions::new(
            &self.paths.state_dir,
            agent.unwrap_or(&self.agent),
            &self.config.config.session,
            self.host.time_zone().clone(),
        )
    }

    /// What `sessions(agent).resolve_key(request)` gives, without building
    /// the agent's sessions (a copy of the session config): the gateway
    /// asks this for every request it queues.
    pub(crate) fn resolve_session_key(&self, agent: Option<&str>, request: Option<&str>) -> String {
        let session = &self.config.config.session;
        crate::session::key::resolve(
            request,
            agent.unwrap_or(&self.agent),
            &session.main_key,
            session.scope == "global",
        )
    }
}

/// The model a session keeps: its override (`/new provider/model`, or
/// OpenClaw's `providerOverride` + `modelOverride`), else the model it last
/// used (`modelProvider` + `model`).
pub(crate) fn session_model(entry: &SessionEntry) -> Option<String> {
    let named = |provider: Option<&String>, model: Option<&String>| {
        let model = model.map(|m| m.trim()).filter(|m| !m.is_empty())?;
        match provider.map(|p| p.trim()).filter(|p| !p.is_empty()) {
            Some(provider) if !model.starts_with(&format!("{provider}/")) => {
                Some(format!("{provider}/{model}"))
            }
            _ => Some(model.to_string()),
        }
    };
    named(
        entry.provider_override.as_ref(),
        entry.model_override.as_ref(),
    )
    .or_else(|| {
        named(entry.model_provider.as_ref(), entry.model.as_ref()).filter(|m| m.contains('/'))
    })
}

/// The stored entry of `key`, as it is before this turn touches it.
pub(crate) fn stored_entry(sessions: &Sessions, key: &str) -> Option<SessionEntry> {
    sessions
        .store()
        .load()
        .0
        .get(key)
        .and_then(SessionEntry::from_value)
}

/// `almanac sessions show`: the entry and the transcript's context.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionView {
    pub key: String,
    pub entry: Value,
    pub transcript: PathBuf,
    pub messages: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<String>,
}

pub(crate) fn session_view(
    app: &App,
    agent: Option<&str>,
    key: &str,
) -> anyhow::Result<Option<SessionView>> {
    let app = &app.for_agent(agent)?;
    let sessions = app.sessions(None);
    let key = sessions.resolve_key(Some(key));
    let (map, _) = sessions.store().load();
    let Some(raw) = map.get(&key) else {
        return Ok(None);
    };
    let Some(entry) = SessionEntry::from_value(raw) else {
        return Ok(None);
    };
    let path = sessions.transcript_path(&entry);
    let t = transcript::read(&path)?;
    Ok(Some(SessionView {
        key,
        entry: raw.clone(),
        transcript: path,
        messages: t
            .branch()
            .iter()
            .filter_map(|e| match &e.payload {
                transcript::Payload::Message {
                    message,
                    meta,
                    timestamp_ms,
                } => Some(transcript::message_json(
                    message,
                    meta.as_ref(),
                    *timestamp_ms,
                )),
                transcript::Payload::Compaction { summary, .. } => {
                    Some(json!({"role": "compaction", "summary": summary}))
                }
                transcript::Payload::Other(_) => None,
            })
            .collect(),
        diagnostics: t.diagnostics,
    }))
}

#[cfg(test)]
mod session_key_tests {
    use crate::app::testing::test_app as app;

    /// The shortcut the gateway takes per request gives the key the
    /// agent's sessions give, under each scope and main key.
    #[test]
    fn the_session_key_shortcut_agrees_with_the_sessions() {
        let dir = tempfile::tempdir().unwrap();
        for config in [
            "{}",
            r#"{session: {mainKey: "Desk"}}"#,
            r#"{session: {scope: "global"}}"#,
        ] {
            let app = app(dir.path(), config);
            for agent in [None, Some("main"), Some(" MAIN ")] {
                for request in [
                    None,
                    Some(""),
                    Some("main"),
                    Some("Ops"),
                    Some("agent:main:main"),
                    Some("agent:Main:telegram:dm:42"),
                    Some("global"),
                ] {
                    assert_eq!(
                        app.resolve_session_key(agent, request),
                        app.sessions(agent).resolve_key(request),
                        "{config} {agent:?} {request:?}"
                    );
                }
            }
        }
        let app = app(dir.path(), r#"{session: {mainKey: "Desk"}}"#);
        assert_eq!(app.resolve_session_key(None, None), "agent:main:desk");
    }
}
