//! The BERT encoder: embeddings, self-attention layers, mean pooling.

use std::path::Path;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

use crate::LoadError;
use crate::blocks::BlockLinear;

/// The parts of a Hugging Face `config.json` the encoder needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Config {
    pub(crate) vocab_size: usize,
    pub(crate) hidden_size: usize,
    pub(crate) num_hidden_layers: usize,
    pub(crate) num_attention_heads: usize,
    pub(crate) intermediate_size: usize,
    pub(crate) max_position_embeddings: usize,
    #[serde(default = "two")]
    pub(crate) type_vocab_size: usize,
    #[serde(default = "bert_eps")]
    pub(crate) layer_norm_eps: f64,
    #[serde(default = "gelu")]
    hidden_act: String,
    #[serde(default = "absolute")]
    position_embedding_type: String,
}

fn two() -> usize {
    2
}
fn bert_eps() -> f64 {
    1e-12
}
fn gelu() -> String {
    "gelu".into()
}
fn absolute() -> String {
    "absolute".into()
}

impl Config {
    pub(crate) fn read(path: &Path) -> Result<Config, LoadError> {
        let bytes = std::fs::read(path).map_err(|e| LoadError::Config(e.to_string()))?;
        let config: Config =
            serde_json::from_slice(&bytes).map_err(|e| LoadError::Config(e.to_string()))?;
        if config.hidden_act != "gelu" {
            return Err(LoadError::Config(format!(
                "hidden_act {:?} is not supported (gelu only)",
                config.hidden_act
            )));
        }
        if config.position_embedding_type != "absolute" {
            return Err(LoadError::Config(format!(
                "position_embedding_type {:?} is not supported (absolute only)",
                config.position_embedding_type
            )));
        }
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err(LoadError::Config(
                "hidden_size is not a multiple of num_attention_heads".into(),
            ));
        }
        Ok(config)
    }
}

/// A lookup table (word, position, token type embeddings).
pub(crate) enum Table {
    /// The whole table in memory.
    Loaded(Embedding),
    /// f16 rows read from a mapped file as they are looked up: a query
    /// touches a few pages of the 30 000-row word table, not all of it.
    Mapped(MappedRows),
}

pub(crate) struct MappedRows {
    pub(crate) map: std::sync::Arc<memmap2::Mmap>,
    /// Where row 0 starts in `map`.
    pub(crate) start: usize,
    pub(crate) rows: usize,
    pub(crate) dims: usize,
}

impl Table {
    /// The rows of `ids`, shaped `(b, t, dims)`.
    fn lookup(&self, ids: &[u32], (b, t): (usize, usize)) -> candle_core::Result<Tensor> {
        match self {
            Table::Loaded(embedding) => {
                embedding.forward(&Tensor::from_slice(ids, (b, t), &Device::Cpu)?)
            }
            Table::Mapped(table) => {
                let mut out = Vec::with_capacity(ids.len() * table.dims);
                let row_bytes = table.dims * 2;
                for &id in ids {
                    let id = id as usize;
                    if id >= table.rows {
                        candle_core::bail!("token id {id} is outside the table of {}", table.rows);
                    }
                    let at = table.start + id * row_bytes;
                    let row = &table.map[at..at + row_bytes];
                    out.extend(
                        row.chunks_exact(2).map(|h| {
                            half::f16::from_bits(u16::from_le_bytes([h[0], h[1]])).to_f32()
                        }),
                    );
                }
                Tensor::from_vec(out, (b, t, table.dims), &Device::Cpu)
            }
        }
    }
}

/// Where the encoder's weights come from. Names are the Hugging Face
/// ones without the `bert.` prefix (`encoder.layer.0.attention.self.query`).
pub(crate) trait Source {
    fn dense(&self, name: &str, inputs: usize, outputs: usize) -> Result<Dense, LoadError>;
    fn norm(&self, name: &str, size: usize, eps: f64) -> Result<LayerNorm, LoadError>;
    fn table(&self, name: &str, rows: usize, dims: usize) -> Result<Table, LoadError>;
}

/// The f32 weights of `model.safetensors`, memory-mapped.
pub(crate) struct Safetensors<'a>(VarBuilder<'a>);

impl Safetensors<'static> {
    pub(crate) fn open(weights: &Path) -> Result<Safetensors<'static>, LoadError> {
        // SAFETY: the file is mapped read-only; the model folder is
        // almanac's own (installed under the state directory) or named by
        // the user, and nothing in almanac writes to it while it is mapped.
        let root = unsafe {
            VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, &Device::Cpu)
                .map_err(weights_error)?
        };
        // Checkpoints saved from a task model prefix their keys `bert.`.
        Ok(Safetensors(
            if root.contains_tensor("embeddings.word_embeddings.weight") {
                root
            } else {
                root.pp("bert")
            },
        ))
    }
}

fn weights_error(e: candle_core::Error) -> LoadError {
    LoadError::Weights(e.to_string())
}

impl Source for Safetensors<'_> {
    fn dense(&self, name: &str, inputs: usize, outputs: usize) -> Result<Dense, LoadError> {
        candle_nn::linear(inputs, outputs, self.0.pp(name))
            .map(Dense::Float)
            .map_err(weights_error)
    }

    fn norm(&self, name: &str, size: usize, eps: f64) -> Result<LayerNorm, LoadError> {
        candle_nn::layer_norm(size, eps, self.0.pp(name)).map_err(weights_error)
    }

    fn table(&self, name: &str, rows: usize, dims: usize) -> Result<Table, LoadError> {
        candle_nn::embedding(rows, dims, self.0.pp(name))
            .map(Table::Loaded)
            .map_err(weights_error)
    }
}

/// A dense layer: f32 weights multiplied by candle (batches of texts),
/// or int8 blocks read in place (see the `blocks` module).
pub(crate) enum Dense {
    Float(Linear),
    Blocks(BlockLinear),
}

impl Dense {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Dense::Float(linear) => linear.forward(x),
            Dense::Blocks(layer) => layer.forward(x),
        }
    }
}

struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attention_out: Dense,
    attention_norm: LayerNorm,
    up: Dense,
    down: Dense,
    output_norm: LayerNorm,
}

pub(crate) struct Bert {
    words: Table,
    positions: Table,
    token_types: Table,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
}

impl Bert {
    pub(crate) fn load(source: &dyn Source, config: &Config) -> Result<Bert, LoadError> {
        let h = config.hidden_size;
        let eps = config.layer_norm_eps;
        let inner = config.intermediate_size;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = |part: &str| format!("encoder.layer.{i}.{part}");
            layers.push(Layer {
                query: source.dense(&l("attention.self.query"), h, h)?,
                key: source.dense(&l("attention.self.key"), h, h)?,
                value: source.dense(&l("attention.self.value"), h, h)?,
                attention_out: source.dense(&l("attention.output.dense"), h, h)?,
                attention_norm: source.norm(&l("attention.output.LayerNorm"), h, eps)?,
                up: source.dense(&l("intermediate.dense"), h, inner)?,
                down: source.dense(&l("output.dense"), inner, h)?,
                output_norm: source.norm(&l("output.LayerNorm"), h, eps)?,
            });
        }
        Ok(Bert {
            words: source.table("embeddings.word_embeddings", config.vocab_size, h)?,
            positions: source.table(
                "embeddings.position_embeddings",
                config.max_position_embeddings,
                h,
            )?,
            token_types: source.table(
                "embeddings.token_type_embeddings",
                config.type_vocab_size,
                h,
            )?,
            norm: source.norm("embeddings.LayerNorm", h, eps)?,
            layers,
            heads: config.num_attention_heads,
            hidden: h,
        })
    }

    pub(crate) fn hidden(&self) -> usize {
        self.hidden
    }

    /// Unit vectors (mean of the token states) of a batch of token ids.
    pub(crate) fn embed(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let b = batch.len();
        let t = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(b * t);
        let mut mask = Vec::with_capacity(b * t);
        for row in batch {
            ids.extend_from_slice(row);
            ids.extend(std::iter::repeat_n(0, t - row.len()));
            mask.extend(std::iter::repeat_n(1f32, row.len()));
            mask.extend(std::iter::repeat_n(0f32, t - row.len()));
        }
        let mask = Tensor::from_vec(mask, (b, t), &Device::Cpu)?;
        let positions: Vec<u32> = (0..b).flat_map(|_| 0..t as u32).collect();
        let mut x = self
            .words
            .lookup(&ids, (b, t))?
            .add(&self.positions.lookup(&positions, (b, t))?)?
            .add(&self.token_types.lookup(&vec![0; b * t], (b, t))?)?;
        x = self.norm.forward(&x)?;
        let head = self.hidden / self.heads;
        // Padding gets a large negative score before the softmax.
        let padding = ((1.0 - &mask)? * -10_000.0)?.reshape((b, 1, 1, t))?;
        let scale = 1.0 / (head as f64).sqrt();
        for layer in &self.layers {
            let split = |y: Tensor| -> candle_core::Result<Tensor> {
                y.reshape((b, t, self.heads, head))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&padding)?;
            let weights = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = weights
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((b, t, self.hidden))?;
            x = layer
                .attention_norm
                .forward(&(layer.attention_out.forward(&context)? + &x)?)?;
            let inner = layer.up.forward(&x)?.gelu_erf()?;
            x = layer
                .output_norm
                .forward(&(layer.down.forward(&inner)? + &x)?)?;
        }
        let mask = mask.unsqueeze(2)?;
        let summed = x.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1.0, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let rows: Vec<Vec<f32>> = mean.to_vec2()?;
        Ok(rows.into_iter().map(unit).collect())
    }
}

/// `v` scaled to length 1; non-finite parts count as 0, and a zero vector
/// stays zero.
fn unit(mut v: Vec<f32>) -> Vec<f32> {
    for x in v.iter_mut() {
        if !x.is_finite() {
            *x = 0.0;
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_vectors_have_length_one_and_bad_parts_are_zero() {
        let v = unit(vec![3.0, 4.0]);
        assert_eq!(v, vec![0.6, 0.8]);
        assert_eq!(unit(vec![0.0, 0.0]), vec![0.0, 0.0]);
        assert_eq!(unit(vec![f32::NAN, 2.0]), vec![0.0, 1.0]);
    }
}
