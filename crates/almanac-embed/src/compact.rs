//! The compact copy of a model's weights (`model.q8_0.gguf`), made once
//! from `model.safetensors` and read by processes that start cold.
//!
//! A GGUF file (the format candle reads and writes): the matrices of the
//! transformer layers as Q8_0 (blocks of 32 int8 values with one f16
//! scale, about a quarter of the f32 bytes), the word table as f16 rows,
//! the small tensors (biases, layer norms, position and token type tables)
//! as f32. Nothing large is read or widened at load: the dense layers
//! multiply the ~11 MB of Q8_0 blocks where they lie in the mapping (see
//! the `blocks` module), and a query reads only the word-table rows of its
//! own tokens.
//!
//! The file records the format and the length of the `model.safetensors`
//! it was made from; a file that does not match is not used.

use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_nn::{LayerNorm, Linear};

use crate::LoadError;
use crate::bert::{Dense, MappedRows, Source, Table};
use crate::blocks::BlockLinear;

/// The compact file's name in a model folder.
pub const COMPACT_FILE: &str = "model.q8_0.gguf";

const FORMAT_KEY: &str = "almanac.compact.format";
const FORMAT: u32 = 1;
const SOURCE_BYTES_KEY: &str = "almanac.compact.source_bytes";
const WORDS: &str = "embeddings.word_embeddings.weight";

fn compact_error(e: impl std::fmt::Display) -> LoadError {
    LoadError::Compact(e.to_string())
}

/// The compact file's bytes for the f32 weights in `weights`
/// (`model.safetensors`).
pub(crate) fn build(weights: &Path) -> Result<Vec<u8>, LoadError> {
    let source_bytes = std::fs::metadata(weights)
        .map_err(|e| LoadError::Weights(e.to_string()))?
        .len();
    // SAFETY: mapped read-only, as for loading (see `bert::Safetensors`).
    let file = unsafe { candle_core::safetensors::MmapedSafetensors::new(weights) }
        .map_err(|e| LoadError::Weights(e.to_string()))?;
    let mut names: Vec<String> = file.tensors().into_iter().map(|(n, _)| n).collect();
    names.sort();
    let mut tensors = Vec::new();
    for name in names {
        let key = name.strip_prefix("bert.").unwrap_or(&name);
        // The pooler and any task head are not part of a sentence vector.
        if !key.starts_with("embeddings.") && !key.starts_with("encoder.") {
            continue;
        }
        let tensor = file
            .load(&name, &Device::Cpu)
            .and_then(|t| t.to_dtype(DType::F32))
            .map_err(|e| LoadError::Weights(e.to_string()))?;
        let dims = tensor.dims().to_vec();
        let dtype = if key == WORDS {
            GgmlDType::F16
        } else if key.starts_with("encoder.")
            && key.ends_with(".weight")
            && dims.len() == 2
            && dims[1] % GgmlDType::Q8_0.block_size() == 0
        {
            GgmlDType::Q8_0
        } else {
            GgmlDType::F32
        };
        let quantized = QTensor::quantize(&tensor, dtype).map_err(compact_error)?;
        tensors.push((key.to_string(), quantized));
    }
    if !tensors.iter().any(|(name, _)| name == WORDS) {
        return Err(LoadError::Weights(format!("{WORDS} is missing")));
    }
    let format = Value::U32(FORMAT);
    let source = Value::U64(source_bytes);
    let metadata = [(FORMAT_KEY, &format), (SOURCE_BYTES_KEY, &source)];
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &tensors).map_err(compact_error)?;
    Ok(out.into_inner())
}

/// An opened compact file.
pub(crate) struct Compact {
    map: Arc<memmap2::Mmap>,
    content: Content,
}

impl Compact {
    /// Opens `path`, made from a `model.safetensors` of `source_bytes`.
    pub(crate) fn open(path: &Path, source_bytes: u64) -> Result<Compact, LoadError> {
        let file = std::fs::File::open(path).map_err(compact_error)?;
        // SAFETY: mapped read-only; the file is written only by `memory
        // model install`, by atomic replace (a new inode), so a mapping
        // never sees it change.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(compact_error)?;
        let content = Content::read(&mut Cursor::new(&map[..])).map_err(compact_error)?;
        let number = |key: &str| content.metadata.get(key).and_then(|v| v.to_u64().ok());
        let format = content
            .metadata
            .get(FORMAT_KEY)
            .and_then(|v| v.to_u32().ok());
        if format != Some(FORMAT) {
            return Err(compact_error(format!("format {format:?} is not {FORMAT}")));
        }
        if number(SOURCE_BYTES_KEY) != Some(source_bytes) {
            return Err(compact_error("it was made from another model.safetensors"));
        }
        // Every tensor's bytes must be in the file: a file cut short is
        // found here, not half-way through a load.
        for (name, info) in &content.tensor_infos {
            let elements = info.shape.elem_count();
            let block = info.ggml_dtype.block_size();
            let bytes = elements.div_ceil(block) * info.ggml_dtype.type_size();
            let end = content
                .tensor_data_offset
                .saturating_add(info.offset)
                .saturating_add(bytes as u64);
            if end > map.len() as u64 {
                return Err(compact_error(format!(
                    "{name} runs past the end of the file"
                )));
            }
        }
        Ok(Compact {
            map: Arc::new(map),
            content,
        })
    }

    fn qtensor(&self, name: &str, shape: &[usize]) -> Result<QTensor, LoadError> {
        let info = self
            .content
            .tensor_infos
            .get(name)
            .ok_or_else(|| compact_error(format!("{name} is missing")))?;
        if info.shape.dims() != shape {
            return Err(compact_error(format!(
                "{name} has shape {:?}, expected {shape:?}",
                info.shape.dims()
            )));
        }
        self.content
            .tensor(&mut Cursor::new(&self.map[..]), name, &Device::Cpu)
            .map_err(|e| compact_error(format!("{name}: {e}")))
    }

    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, LoadError> {
        self.qtensor(name, shape)?
            .dequantize(&Device::Cpu)
            .map_err(compact_error)
    }
}

impl Source for Compact {
    fn dense(&self, name: &str, inputs: usize, outputs: usize) -> Result<Dense, LoadError> {
        let weight = format!("{name}.weight");
        let bias = self.tensor(&format!("{name}.bias"), &[outputs])?;
        let info = self
            .content
            .tensor_infos
            .get(&weight)
            .ok_or_else(|| compact_error(format!("{weight} is missing")))?;
        if info.ggml_dtype == GgmlDType::Q8_0 && info.shape.dims() == [outputs, inputs] {
            // Multiplied in place as int8 blocks: candle's own Q8_0
            // kernels are chosen at compile time (a baseline x86-64 build
            // gets their scalar code), the block kernels at run time.
            let start = usize::try_from(self.content.tensor_data_offset + info.offset)
                .map_err(compact_error)?;
            let bias = bias.to_vec1::<f32>().map_err(compact_error)?;
            return BlockLinear::new(Arc::clone(&self.map), start, outputs, inputs, bias)
                .map(Dense::Blocks)
                .ok_or_else(|| compact_error(format!("{weight} runs past the end of the file")));
        }
        let weight = self.tensor(&weight, &[outputs, inputs])?;
        Ok(Dense::Float(Linear::new(weight, Some(bias))))
    }

    fn norm(&self, name: &str, size: usize, eps: f64) -> Result<LayerNorm, LoadError> {
        Ok(LayerNorm::new(
            self.tensor(&format!("{name}.weight"), &[size])?,
            self.tensor(&format!("{name}.bias"), &[size])?,
            eps,
        ))
    }

    fn table(&self, name: &str, rows: usize, dims: usize) -> Result<Table, LoadError> {
        let name = format!("{name}.weight");
        let info = self
            .content
            .tensor_infos
            .get(&name)
            .ok_or_else(|| compact_error(format!("{name} is missing")))?;
        if info.ggml_dtype != GgmlDType::F16 {
            let values = self
                .tensor(&name, &[rows, dims])?
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(compact_error)?;
            return Ok(Table::Rows { values, dims });
        }
        if info.shape.dims() != [rows, dims] {
            return Err(compact_error(format!(
                "{name} has shape {:?}, expected {:?}",
                info.shape.dims(),
                [rows, dims]
            )));
        }
        let start = usize::try_from(self.content.tensor_data_offset + info.offset)
            .map_err(compact_error)?;
        if start.saturating_add(rows * dims * 2) > self.map.len() {
            return Err(compact_error(format!(
                "{name} runs past the end of the file"
            )));
        }
        Ok(Table::Mapped(MappedRows {
            map: Arc::clone(&self.map),
            start,
            rows,
            dims,
        }))
    }
}
