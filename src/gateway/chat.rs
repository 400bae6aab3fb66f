//! A chat message's way in: the router chooses the agent its bindings
//! send it to, and the session its chat keys to (`session.dmScope`,
//! `session.identityLinks`), as for every chat channel. The control API
//! is the first such channel (`channel: "http"`).
//!
//! Invariants: a message routed here names neither an agent nor a
//! session of its own (the router decides both); the route it came by is
//! what the turn records as the session's last route. One trust rule for
//! every channel: the sender's own text is the user's message; anything
//! that came with it (quoted or forwarded text, group history,
//! attachments' text, metadata) is appended inside untrusted-content
//! markers, and nothing from a chat gains system status.

use std::sync::{Arc, Mutex};

use crate::app::App;
use crate::config::Config;
use crate::trigger::TurnRequest;

/// The router of the config in use: built from the bindings once per
/// load of the config, not once per message.
#[derive(Debug, Default)]
pub(crate) struct RouterCache(Mutex<Option<(Arc<Config>, Arc<almanac_routing::Router>)>>);

impl RouterCache {
    /// The router for `app`'s config (built when the config changed).
    pub(crate) fn get(&self, app: &App) -> anyhow::Result<Arc<almanac_routing::Router>> {
        let config = app.base_config_shared();
        let mut cached = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((of, router)) = cached.as_ref()
            && Arc::ptr_eq(of, config)
        {
            return Ok(router.clone());
        }
        let router = Arc::new(app.agents()?.router());
        // Holding the config keeps its address from being reused by a
        // later load.
        *cached = Some((config.clone(), router.clone()));
        Ok(router)
    }
}

/// The control API's channel name.
pub(crate) const HTTP: &str = "http";

#[derive(Debug, thiserror::Error)]
pub(crate) enum ChatError {
    #[error("a routed message names no agent or session of its own: the bindings choose them")]
    Named,
    #[error("peer.kind `{0}`: use direct, group or channel")]
    PeerKind(String),
    #[error("peer.id is empty")]
    PeerId,
    #[error("context[].kind `{0}`: use quoted, forwarded, history, attachment or metadata")]
    ContextKind(String),
    #[error("context is for chat messages: give channel or peer")]
    ContextOutsideChat,
}

/// What a piece of context is called in the prompt.
fn context_label(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "quoted" => "Quoted message",
        "forwarded" => "Forwarded message",
        "history" => "Group history",
        "attachment" => "Attachment text",
        "metadata" => "Message metadata",
        _ => return None,
    })
}

/// The message the model sees: the sender's own words as the user's
/// message, then every piece of context as untrusted data (whoever wrote
/// it, and whatever it claims to be).
pub(crate) fn with_context(req: &mut TurnRequest) -> Result<(), ChatError> {
    let mut blocks = Vec::with_capacity(req.context.len());
    for piece in &req.context {
        let label = context_label(piece.kind.trim())
            .ok_or_else(|| ChatError::ContextKind(piece.kind.clone()))?;
        let source = match piece
            .from
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            Some(from) => format!("{label} from {from}"),
            None => label.to_string(),
        };
        blocks.push(super::http::external::untrusted_block(&piece.text, &source));
    }
    for block in blocks {
        req.message.push_str("\n\n");
        req.message.push_str(&block);
    }
    req.context.clear();
    Ok(())
}

/// A request that is no chat message carries no chat context.
pub(crate) fn check_not_chat(req: &TurnRequest) -> Result<(), ChatError> {
    if req.context.is_empty() {
        Ok(())
    } else {
        Err(ChatError::ContextOutsideChat)
    }
}

/// Whether `req` came as a chat message (a channel or a peer).
pub(crate) fn is_chat(req: &TurnRequest) -> bool {
    req.chat_channel.is_some() || req.peer.is_some()
}

/// Sets `req`'s agent and session key as its bindings and the session
/// settings say, and its channel to the one it came in on.
pub(crate) fn route(app: &App, routers: &RouterCache, req: &mut TurnRequest) -> anyhow::Result<()> {
    if req.agent.is_some() || req.session_key.is_some() {
        return Err(ChatError::Named.into());
    }
    let channel = req
        .chat_channel
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or(HTTP)
        .to_lowercase();
    let peer = match &req.peer {
        Some(p) => {
            let kind = almanac_routing::PeerKind::parse(&p.kind)
                .ok_or_else(|| ChatError::PeerKind(p.kind.clone()))?;
            if p.id.trim().is_empty() {
                return Err(ChatError::PeerId.into());
            }
            Some(almanac_routing::Peer {
                kind,
                id: p.id.trim().to_string(),
            })
        }
        None => None,
    };
    with_context(req)?;
    let router = routers.get(app)?;
    let inbound = almanac_routing::Inbound {
        channel: &channel,
        account_id: req.account_id.as_deref(),
        peer: peer.as_ref(),
        ..Default::default()
    };
    let routed = router.route(&inbound);
    let session = &app.config.config.session;
    let links = almanac_routing::IdentityLinks::new(session.identity_links.clone());
    let options = almanac_routing::KeyOptions {
        dm_scope: almanac_routing::DmScope::parse(&session.dm_scope).unwrap_or_default(),
        main_key: &session.main_key,
        identity_links: &links,
    };
    let key = almanac_routing::session_key(routed.agent_id, &inbound, &options);
    tracing::debug!(agent = routed.agent_id, tier = routed.tier.as_str(), %key, "chat message routed");
    req.agent = Some(routed.agent_id.to_string());
    req.session_key = Some(key);
    req.channel = Some(channel.clone());
    req.chat_channel = Some(channel);
    Ok(())
}
