//! The BERT encoder: embeddings, self-attention layers, mean pooling.

use std::path::Path;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

use crate::LoadError;

/// The parts of a Hugging Face `config.json` the encoder needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Config {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    pub(crate) max_position_embeddings: usize,
    #[serde(default = "two")]
    type_vocab_size: usize,
    #[serde(default = "bert_eps")]
    layer_norm_eps: f64,
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

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    up: Linear,
    down: Linear,
    output_norm: LayerNorm,
}

pub(crate) struct Bert {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
}

impl Bert {
    pub(crate) fn load(weights: &Path, config: &Config) -> Result<Bert, LoadError> {
        let err = |e: candle_core::Error| LoadError::Weights(e.to_string());
        // SAFETY: the file is mapped read-only; the model folder is
        // almanac's own (installed under the state directory) or named by
        // the user, and nothing in almanac writes to it while it is mapped.
        let root = unsafe {
            VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, &Device::Cpu)
                .map_err(err)?
        };
        // Checkpoints saved from a task model prefix their keys `bert.`.
        let root = if root.contains_tensor("embeddings.word_embeddings.weight") {
            root
        } else {
            root.pp("bert")
        };
        let h = config.hidden_size;
        let ln = |vb: VarBuilder| candle_nn::layer_norm(h, config.layer_norm_eps, vb).map_err(err);
        let linear = |vb: VarBuilder, i, o| candle_nn::linear(i, o, vb).map_err(err);
        let e = root.pp("embeddings");
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = root.pp(format!("encoder.layer.{i}"));
            layers.push(Layer {
                query: linear(l.pp("attention.self.query"), h, h)?,
                key: linear(l.pp("attention.self.key"), h, h)?,
                value: linear(l.pp("attention.self.value"), h, h)?,
                attention_out: linear(l.pp("attention.output.dense"), h, h)?,
                attention_norm: ln(l.pp("attention.output.LayerNorm"))?,
                up: linear(l.pp("intermediate.dense"), h, config.intermediate_size)?,
                down: linear(l.pp("output.dense"), config.intermediate_size, h)?,
                output_norm: ln(l.pp("output.LayerNorm"))?,
            });
        }
        Ok(Bert {
            words: candle_nn::embedding(config.vocab_size, h, e.pp("word_embeddings"))
                .map_err(err)?,
            positions: candle_nn::embedding(
                config.max_position_embeddings,
                h,
                e.pp("position_embeddings"),
            )
            .map_err(err)?,
            token_types: candle_nn::embedding(
                config.type_vocab_size,
                h,
                e.pp("token_type_embeddings"),
            )
            .map_err(err)?,
            norm: ln(e.pp("LayerNorm"))?,
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
        let device = Device::Cpu;
        let ids = Tensor::from_vec(ids, (b, t), &device)?;
        let mask = Tensor::from_vec(mask, (b, t), &device)?;
        let positions = Tensor::arange(0u32, t as u32, &device)?
            .unsqueeze(0)?
            .broadcast_as((b, t))?;
        let mut x = self
            .words
            .forward(&ids)?
            .add(&self.positions.forward(&positions)?)?
            .add(&self.token_types.forward(&ids.zeros_like()?)?)?;
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
