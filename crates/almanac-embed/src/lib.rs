//! Sentence embeddings on the CPU, and the int8 vectors they are kept as.
//!
//! [`Encoder`] runs a BERT-family sentence model (all-MiniLM-L6-v2 and
//! its kin) from a folder holding `config.json`, `model.safetensors` and
//! `tokenizer.json`: WordPiece tokens, the transformer, mean pooling over
//! the real tokens, L2 normalisation — what sentence-transformers does for
//! these models, so the vectors match theirs to float rounding.
//!
//! Invariants:
//! * Nothing is downloaded: a model is only ever read from its folder.
//! * The weights are memory-mapped, not read: a process that loads the
//!   model pays for the pages it touches.
//! * Every vector [`Encoder::embed`] returns has unit length (a text the
//!   tokenizer finds nothing in gives the zero vector, never NaN).
//! * [`Quantized`] keeps a vector as int8 with one scale; the dot product
//!   of two quantized vectors is within about 1% of the float one.

mod bert;
mod quantize;

use std::path::Path;

pub use quantize::{Quantized, dot_i8};

/// Why a model folder cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0} is missing")]
    Missing(String),
    #[error("config.json: {0}")]
    Config(String),
    #[error("model.safetensors: {0}")]
    Weights(String),
    #[error("tokenizer.json: {0}")]
    Tokenizer(String),
}

/// Why a batch could not be embedded.
#[derive(Debug, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(String);

/// The files a model folder must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// The most tokens of a text the encoder reads (the rest is cut), unless
/// the folder's `sentence_bert_config.json` says otherwise.
const DEFAULT_MAX_TOKENS: usize = 256;
/// Texts per forward pass: batches of similar length waste little on
/// padding, and a batch this size keeps both cores' matrix work large.
const BATCH_TEXTS: usize = 32;

/// A loaded sentence model.
pub struct Encoder {
    model: bert::Bert,
    tokenizer: tokenizers::Tokenizer,
    max_tokens: usize,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("dims", &self.dims())
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl Encoder {
    /// Loads the model in `dir` (see [`MODEL_FILES`]).
    pub fn load(dir: &Path) -> Result<Encoder, LoadError> {
        for file in MODEL_FILES {
            if !dir.join(file).is_file() {
                return Err(LoadError::Missing(file.to_string()));
            }
        }
        let config = bert::Config::read(&dir.join("config.json"))?;
        let model = bert::Bert::load(&dir.join("model.safetensors"), &config)?;
        let mut tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| LoadError::Tokenizer(e.to_string()))?;
        let max_tokens = std::fs::read(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|v| v["max_seq_length"].as_u64())
            .map_or(DEFAULT_MAX_TOKENS, |n| n as usize)
            .clamp(8, config.max_position_embeddings);
        // The file may pad every text to a fixed length; padding is done
        // here, per batch, and masked out of the mean.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| LoadError::Tokenizer(e.to_string()))?;
        Ok(Encoder {
            model,
            tokenizer,
            max_tokens,
        })
    }

    /// The length of the vectors.
    pub fn dims(&self) -> usize {
        self.model.hidden()
    }

    /// One unit vector per text, in order. Texts are run in batches of
    /// similar length.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError(e.to_string()))?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].get_ids().len());
        let mut out = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH_TEXTS) {
            let ids: Vec<&[u32]> = batch.iter().map(|&i| encodings[i].get_ids()).collect();
            let vectors = self
                .model
                .embed(&ids)
                .map_err(|e| EmbedError(e.to_string()))?;
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_without_its_files_names_the_first_missing_one() {
        let dir = std::env::temp_dir().join(format!("almanac-embed-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = Encoder::load(&dir).unwrap_err();
        assert_eq!(err.to_string(), "config.json is missing");
        std::fs::write(dir.join("config.json"), "{not json").unwrap();
        std::fs::write(dir.join("model.safetensors"), b"").unwrap();
        std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
        let err = Encoder::load(&dir).unwrap_err();
        assert!(err.to_string().starts_with("config.json: "), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
