//! A chat message's way in: the router chooses the agent its bindings
//! send it to, and the session its chat keys to (`session.dmScope`,
//! `session.identityLinks`), as for every chat channel. The control API
//! is the first such channel (`channel: "http"`).
//!
//! Invariants: a message routed here names neither an agent nor a
//! session of its own (the router decides both); the route it came by is
//! what the turn records as the session's last route.

use crate::app::App;
use crate::trigger::TurnRequest;

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
}

/// Whether `req` came as a chat message (a channel or a peer).
pub(crate) fn is_chat(req: &TurnRequest) -> bool {
    req.chat_channel.is_some() || req.peer.is_some()
}

/// Sets `req`'s agent and session key as its bindings and the session
/// settings say, and its channel to the one it came in on.
pub(crate) fn route(app: &App, req: &mut TurnRequest) -> anyhow::Result<()> {
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
    let agents = app.agents()?;
    let router = agents.router();
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
