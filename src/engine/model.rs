//! Which model a turn calls: a `provider/model` reference resolved to
//! its endpoint (`models.providers.<id>`, the built-in providers and
//! their environment variables), and the fallbacks tried after it.
//!
//! Invariants: a public endpoint is never called without its key; a
//! fallback that cannot be used is left out with a warning, never an
//! error of the turn.

use std::time::Duration;

use crate::agent::models::Link;
use crate::app::App;
use crate::config::ModelRef;
use crate::provider::{self, Api, Endpoint};

/// Why no model can be called.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelError {
    #[error(
        "no model is configured: set agents.defaults.model (for example openai/gpt-4o-mini) or pass --model provider/model"
    )]
    None,
    #[error("`{0}` is not a model reference: use provider/model, for example openai/gpt-4o-mini")]
    BadRef(String),
    #[error("unknown provider `{0}`: set models.providers.{0}.baseUrl (and api)")]
    UnknownProvider(String),
    #[error("no API key for {provider}: set {hint}")]
    NoKey { provider: String, hint: String },
    #[error(
        "models.providers.{provider}.api is `{api}`; almanac speaks openai-completions and anthropic-messages"
    )]
    BadApi { provider: String, api: String },
}

/// A model ready to call.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// `provider/model`.
    pub reference: String,
    /// The name sent to the provider.
    pub name: String,
    pub endpoint: Endpoint,
}

/// The limits of one model call: `agents.defaults.llm.connectTimeoutSeconds`
/// (at least 1), `llm.idleTimeoutSeconds` (0: none) and `timeoutSeconds`
/// for the whole answer (at least 1).
fn call_timeouts(defaults: &crate::config::AgentDefaults) -> provider::Timeouts {
    let secs = |n: u32| Duration::from_secs(u64::from(n.max(1)));
    provider::Timeouts {
        connect: secs(defaults.llm.connect_timeout_seconds),
        idle: (defaults.llm.idle_timeout_seconds > 0)
            .then(|| secs(defaults.llm.idle_timeout_seconds)),
        total: secs(defaults.timeout_seconds),
    }
}

impl App {
    /// The model `requested` (the turn's choice: `--model`, else the
    /// session's model, see [`session_model`]), else `agents.defaults.model`;
    /// its endpoint from `models.providers.<id>` and the usual environment
    /// variables. The public endpoints need an API key.
    pub(crate) fn model(&self, requested: Option<&str>) -> Result<Model, ModelError> {
        self.resolve_model(requested, true)
    }

    /// The same model, for showing a prompt: nothing is sent, so no API key
    /// is needed.
    pub(crate) fn model_without_key(&self, requested: Option<&str>) -> Result<Model, ModelError> {
        self.resolve_model(requested, false)
    }

    fn resolve_model(&self, requested: Option<&str>, need_key: bool) -> Result<Model, ModelError> {
        let configured = self
            .config
            .config
            .agents
            .defaults
            .model
            .as_ref()
            .map(ModelRef::primary);
        let reference = requested
            .or(configured)
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .ok_or(ModelError::None)?;
        let (provider, name) = reference
            .split_once('/')
            .filter(|(p, n)| !p.is_empty() && !n.is_empty())
            .ok_or_else(|| ModelError::BadRef(reference.to_string()))?;
        let provider = provider.to_lowercase();
        let cfg = self.config.config.models.providers.get(&provider);
        let known = provider::known::KNOWN.iter().find(|k| k.0 == provider);
        let api = match cfg.and_then(|c| c.api.as_deref()) {
            Some(text) => Api::parse(text).ok_or_else(|| ModelError::BadApi {
                provider: provider.clone(),
                api: text.to_string(),
            })?,
            None => known.map(|k| k.1).unwrap_or(Api::OpenAiCompletions),
        };
        let env_base = known
            .and_then(|k| k.4)
            .and_then(|var| self.host.var(var))
            .map(str::to_string);
        let base_url = cfg
            .and_then(|c| c.base_url.clone())
            .or(env_base.clone())
            .or_else(|| known.map(|k| k.2.to_string()))
            .ok_or_else(|| ModelError::UnknownProvider(provider.clone()))?;
        let env_key = known
            .and_then(|k| k.3)
            .and_then(|var| self.host.var(var))
            .map(str::to_string);
        let api_key = cfg
            .and_then(|c| c.api_key.clone())
            .or(env_key)
            .filter(|k| !k.is_empty());
        // The public endpoints need a key; a server the user points at
        // (a base URL of their own, a local server) may not.
        let own_server = cfg.and_then(|c| c.base_url.as_ref()).is_some() || env_base.is_some();
        if need_key
            && api_key.is_none()
            && let Some(k) = known.filter(|k| k.5 && !own_server)
        {
            return Err(ModelError::NoKey {
                provider: provider.clone(),
                hint: format!(
                    "{} or models.providers.{provider}.apiKey",
                    k.3.unwrap_or("an API key")
                ),
            });
        }
        let headers = cfg
            .map(|c| {
                c.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Model {
            reference: format!("{provider}/{name}"),
            name: name.to_string(),
            endpoint: Endpoint {
                provider,
                api,
                base_url: base_url.trim_end_matches('/').to_string(),
                api_key,
                headers,
                timeouts: call_timeouts(&self.config.config.agents.defaults),
            },
        })
    }

    /// The models tried after `first` fails: `asked` (a cron job's
    /// `fallbacks`, `[]` for none), else `agents.defaults.model.fallbacks`;
    /// `first` itself and repeats left out. One that cannot be used (an
    /// unknown provider, no key) is left out with a warning.
    pub(crate) fn fallback_models(
        &self,
        first: &Model,
        asked: Option<&[String]>,
        warnings: &mut Vec<String>,
    ) -> Vec<Link> {
        let configured = match &self.config.config.agents.defaults.model {
            Some(ModelRef::Chain { fallbacks, .. }) => fallbacks.as_slice(),
            _ => &[],
        };
        let mut seen = vec![first.reference.clone()];
        let mut links = Vec::new();
        for reference in asked.unwrap_or(configured) {
            match self.model(Some(reference)) {
                Ok(model) if !seen.contains(&model.reference) => {
                    seen.push(model.reference.clone());
                    links.push(Link::new(model.reference, model.name, model.endpoint));
                }
                Ok(_) => {}
                Err(err) => warnings.push(format!("fallback model `{reference}` left out: {err}")),
            }
        }
        links
    }
}
