//! The BERT encoder: embeddings, self-attention layers, mean pooling.

use std::path::Path;
use std::sync::Mutex;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

use crate::LoadError;
use crate::blocks::{BlockLinear, Scratch};
use crate::crew::Crew;
use crate::ops::{self, Norm};

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
    /// A small table's f32 rows (`dims` each), one after another.
    Rows { values: Vec<f32>, dims: usize },
}

pub(crate) struct MappedRows {
    pub(crate) map: std::sync::Arc<memmap2::Mmap>,
    /// Where row 0 starts in `map`.
    pub(crate) start: usize,
    pub(crate) rows: usize,
    pub(crate) dims: usize,
}

impl MappedRows {
    /// Row `id` added to `into` (`dims` long).
    fn add_row(&self, id: u32, into: &mut [f32]) -> candle_core::Result<()> {
        let id = id as usize;
        if id >= self.rows {
            candle_core::bail!("token id {id} is outside the table of {}", self.rows);
        }
        let row_bytes = self.dims * 2;
        let at = self.start + id * row_bytes;
        for (v, h) in into
            .iter_mut()
            .zip(self.map[at..at + row_bytes].chunks_exact(2))
        {
            *v += half::f16::from_bits(u16::from_le_bytes([h[0], h[1]])).to_f32();
        }
        Ok(())
    }
}

impl Table {
    /// Row `id` of a mapped or small table added to `into`; a loaded
    /// table is looked up whole by candle instead.
    fn add_row(&self, id: u32, into: &mut [f32]) -> candle_core::Result<()> {
        match self {
            Table::Mapped(table) => table.add_row(id, into),
            Table::Rows { values, dims } => {
                let at = id as usize * dims;
                let Some(row) = values.get(at..at + dims) else {
                    candle_core::bail!(
                        "token id {id} is outside the table of {}",
                        values.len() / dims
                    );
                };
                ops::add(into, row);
                Ok(())
            }
            Table::Loaded(_) => candle_core::bail!("the plain pass needs mapped tables"),
        }
    }

    /// The rows of `ids`, shaped `(b, t, dims)`.
    fn lookup(&self, ids: &[u32], (b, t): (usize, usize)) -> candle_core::Result<Tensor> {
        let dims = match self {
            Table::Loaded(embedding) => {
                return embedding.forward(&Tensor::from_slice(ids, (b, t), &Device::Cpu)?);
            }
            Table::Mapped(table) => table.dims,
            Table::Rows { dims, .. } => *dims,
        };
        let mut out = vec![0f32; ids.len() * dims];
        for (&id, row) in ids.iter().zip(out.chunks_exact_mut(dims)) {
            self.add_row(id, row)?;
        }
        Tensor::from_vec(out, (b, t, dims), &Device::Cpu)
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
    /// The pass without tensors ([`Bert::embed_one`]), when every dense
    /// layer is int8 blocks and every table is mapped (compact weights).
    plain: Option<Plain>,
    /// The last short pass's buffers, for the next one (taken while a pass
    /// runs; a pass that finds none makes its own).
    buffers: Mutex<Option<PassBuffers>>,
}

/// Texts up to this many tokens leave their pass's buffers for the next
/// (a query is a handful): under 2 MB, kept while the model is.
const KEPT_BUFFERS_TOKENS: usize = 64;

/// The rows a pass without tensors works on, kept from pass to pass: the
/// allocator gives a freed buffer's pages back, and a pass on new buffers
/// faulted a few hundred pages in again for every query.
#[derive(Default)]
struct PassBuffers {
    x: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    context: Vec<f32>,
    attended: Vec<f32>,
    inner: Vec<f32>,
    out: Vec<f32>,
    scratch: Scratch,
}

/// What the pass without tensors needs besides the block layers: the
/// layer norms as plain floats.
struct Plain {
    norm: Norm,
    /// Each layer's attention and output norms.
    layers: Vec<(Norm, Norm)>,
}

impl Plain {
    fn of(bert: &Bert) -> candle_core::Result<Option<Plain>> {
        let blocks = |d: &Dense| matches!(d, Dense::Blocks(_));
        let mapped = |t: &Table| !matches!(t, Table::Loaded(_));
        if ![&bert.words, &bert.positions, &bert.token_types]
            .into_iter()
            .all(mapped)
            || !bert.layers.iter().all(|l| {
                [&l.query, &l.key, &l.value, &l.attention_out, &l.up, &l.down]
                    .into_iter()
                    .all(blocks)
            })
        {
            return Ok(None);
        }
        let norm = |n: &LayerNorm| -> candle_core::Result<Norm> {
            let weight = n.weight().to_vec1::<f32>()?;
            let bias = match n.bias() {
                Some(b) => b.to_vec1::<f32>()?,
                None => vec![0.0; weight.len()],
            };
            Ok(Norm {
                weight,
                bias,
                eps: n.eps() as f32,
            })
        };
        Ok(Some(Plain {
            norm: norm(&bert.norm)?,
            layers: bert
                .layers
                .iter()
                .map(|l| Ok((norm(&l.attention_norm)?, norm(&l.output_norm)?)))
                .collect::<candle_core::Result<_>>()?,
        }))
    }
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
        let mut bert = Bert {
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
            plain: None,
            buffers: Mutex::new(None),
        };
        bert.plain = Plain::of(&bert).map_err(|e| LoadError::Weights(e.to_string()))?;
        Ok(bert)
    }

    /// Lays every int8 block layer out for its kernel (see
    /// [`BlockLinear::pack`]).
    pub(crate) fn pack(&mut self) {
        for layer in &mut self.layers {
            for dense in [
                &mut layer.query,
                &mut layer.key,
                &mut layer.value,
                &mut layer.attention_out,
                &mut layer.up,
                &mut layer.down,
            ] {
                if let Dense::Blocks(blocks) = dense {
                    blocks.pack();
                }
            }
        }
    }

    /// Whether [`Bert::embed_one`] can run.
    pub(crate) fn has_plain_pass(&self) -> bool {
        self.plain.is_some()
    }

    /// The unit vector of one text's token ids, computed on plain rows of
    /// floats (see the `ops` module); what [`Bert::embed`] gives for a
    /// batch of that one text, up to float rounding. `None` when this
    /// model's weights are not all int8 blocks and mapped tables.
    /// `crew`, when given, shares the matrix products.
    pub(crate) fn embed_one(
        &self,
        ids: &[u32],
        crew: Option<&Crew>,
    ) -> Option<candle_core::Result<Vec<f32>>> {
        let plain = self.plain.as_ref()?;
        Some(self.embed_plain(plain, ids, crew))
    }

    fn embed_plain(
        &self,
        plain: &Plain,
        ids: &[u32],
        crew: Option<&Crew>,
    ) -> candle_core::Result<Vec<f32>> {
        let mut buffers = self
            .buffers
            .lock()
            .ok()
            .and_then(|mut slot| slot.take())
            .unwrap_or_default();
        let vector = self.pass(plain, ids, crew, &mut buffers);
        if ids.len() <= KEPT_BUFFERS_TOKENS
            && let Ok(mut slot) = self.buffers.lock()
        {
            *slot = Some(buffers);
        }
        vector
    }

    /// Whether a pass left its buffers for the next.
    #[cfg(test)]
    pub(crate) fn buffers_kept(&self) -> bool {
        self.buffers.lock().is_ok_and(|slot| slot.is_some())
    }

    fn pass(
        &self,
        plain: &Plain,
        ids: &[u32],
        crew: Option<&Crew>,
        b: &mut PassBuffers,
    ) -> candle_core::Result<Vec<f32>> {
        let h = self.hidden;
        let t = ids.len();
        if t == 0 {
            return Ok(vec![0.0; h]);
        }
        b.x.clear();
        b.x.resize(t * h, 0.0);
        for (i, (&id, row)) in ids.iter().zip(b.x.chunks_exact_mut(h)).enumerate() {
            self.words.add_row(id, row)?;
            self.positions.add_row(i as u32, row)?;
            self.token_types.add_row(0, row)?;
        }
        plain.norm.apply(&mut b.x);
        b.context.clear();
        b.context.resize(t * h, 0.0);
        for (layer, (attention_norm, output_norm)) in self.layers.iter().zip(&plain.layers) {
            // The query, key and value layers read the same rows: cut once.
            let query = block(&layer.query)?;
            query.cut(&b.x, &mut b.scratch.rows);
            let (rows, sums) = (&b.scratch.rows, &mut b.scratch.sums);
            query.apply_blocks_into(rows, crew, sums, &mut b.q);
            block(&layer.key)?.apply_blocks_into(rows, crew, sums, &mut b.k);
            block(&layer.value)?.apply_blocks_into(rows, crew, sums, &mut b.v);
            ops::attention(&b.q, &b.k, &b.v, t, self.heads, &mut b.context);
            let attention_out = block(&layer.attention_out)?;
            attention_out.apply_into(&b.context, crew, &mut b.scratch, &mut b.attended);
            ops::add(&mut b.attended, &b.x);
            attention_norm.apply(&mut b.attended);
            std::mem::swap(&mut b.x, &mut b.attended);
            block(&layer.up)?.apply_into(&b.x, crew, &mut b.scratch, &mut b.inner);
            ops::gelu(&mut b.inner);
            block(&layer.down)?.apply_into(&b.inner, crew, &mut b.scratch, &mut b.out);
            ops::add(&mut b.out, &b.x);
            output_norm.apply(&mut b.out);
            std::mem::swap(&mut b.x, &mut b.out);
        }
        let x = &b.x;
        let mut mean = vec![0f32; h];
        for row in x.chunks_exact(h) {
            ops::add(&mut mean, row);
        }
        for m in mean.iter_mut() {
            *m /= t as f32;
        }
        Ok(unit(mean))
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

/// The int8 block layer of `d` (the plain pass runs only on those).
fn block(d: &Dense) -> candle_core::Result<&BlockLinear> {
    match d {
        Dense::Blocks(layer) => Ok(layer),
        Dense::Float(_) => candle_core::bail!("the plain pass needs int8 block layers"),
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
