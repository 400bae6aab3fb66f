//! Dense layers multiplied in int8 blocks, straight from the compact
//! file's Q8_0 bytes: what a query's forward pass runs on.
//!
//! A query is a handful of tokens, so its matrix products are a few rows
//! against each weight matrix. A general f32 product spends most of that
//! time re-packing the 40 MB of weights for every call and waking the
//! thread pool for work too small to share. Here the weight rows (Q8_0:
//! blocks of 32 int8 values with one f16 scale, read in place from the
//! memory-mapped file) are dotted with the few activation rows, themselves
//! cut into int8 blocks of 32 with one f32 scale: a quarter of the bytes
//! to read, no re-packing per call. The outputs go in chunks to the
//! asking thread and, when given, a [`Crew`]'s helper; a process that
//! embeds many queries may copy the weights once into the kernel's own
//! layout ([`BlockLinear::pack`]).
//!
//! Invariants:
//! * The result is the same sum, block by block, whichever kernel runs
//!   (see the `kernels` module), whoever runs each chunk and whatever the
//!   layout; only the float rounding of the additions may differ.
//! * Nothing here reads outside the mapped tensor: its extent is checked
//!   once, when the layer is made.

use std::sync::{Arc, Mutex, OnceLock};

use candle_core::{Device, Tensor};

use crate::crew::Crew;
use crate::kernels::{Kernel, Packed, Row};

/// Values per block, as in Q8_0.
pub(crate) const BLOCK: usize = 32;
/// Bytes of one Q8_0 block: an f16 scale, then 32 int8 values.
pub(crate) const BLOCK_BYTES: usize = 2 + BLOCK;

/// A dense layer (`y = x·Wᵀ + b`) whose weights are Q8_0 rows in a
/// mapped file.
pub(crate) struct BlockLinear {
    map: Arc<memmap2::Mmap>,
    /// Where row 0's first block starts in `map`.
    start: usize,
    /// Output features (rows of W).
    outputs: usize,
    /// Input features (columns of W), a multiple of [`BLOCK`].
    inputs: usize,
    /// The kernel its products run on, chosen for this CPU.
    kernel: Kernel,
    /// Each block's scale as f32, widened once here rather than for every
    /// product: row after row, or for a kernel that makes several outputs
    /// at once, block after block within each group of those outputs.
    scales: Vec<f32>,
    /// The weights laid out for the kernel, when it has a layout of its
    /// own and [`BlockLinear::pack`] was asked for: read in one stream
    /// instead of several rows at once.
    packed: Option<Packed>,
    bias: Vec<f32>,
}

impl BlockLinear {
    /// The layer whose `outputs × inputs` Q8_0 weights start at `start`
    /// in `map`; `None` when they do not fit in it or `inputs` is not a
    /// whole number of blocks, or `bias` is not `outputs` long.
    pub(crate) fn new(
        map: Arc<memmap2::Mmap>,
        start: usize,
        outputs: usize,
        inputs: usize,
        bias: Vec<f32>,
    ) -> Option<BlockLinear> {
        if inputs == 0 || !inputs.is_multiple_of(BLOCK) || bias.len() != outputs {
            return None;
        }
        let blocks = outputs.checked_mul(inputs / BLOCK)?;
        let end = start.checked_add(blocks.checked_mul(BLOCK_BYTES)?)?;
        let bytes = map.get(start..end)?;
        let kernel = Kernel::for_this_cpu(outputs);
        let scales = block_scales(bytes, inputs / BLOCK, kernel.outputs_at_once());
        Some(BlockLinear {
            packed: None,
            map,
            start,
            outputs,
            inputs,
            kernel,
            scales,
            bias,
        })
    }

    /// Copies the weights into the kernel's own layout, when it has one:
    /// faster products for the weights' size in memory (they are otherwise
    /// read in place from the mapped file).
    pub(crate) fn pack(&mut self) {
        if self.packed.is_none() {
            self.packed = self.kernel.pack(self.weights(), self.inputs / BLOCK);
        }
    }

    fn weights(&self) -> &[u8] {
        let blocks = self.outputs * (self.inputs / BLOCK);
        &self.map[self.start..self.start + blocks * BLOCK_BYTES]
    }

    /// `x` (`(…, inputs)`, f32) through the layer: `(…, outputs)`.
    pub(crate) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dims = x.dims().to_vec();
        let Some((&last, lead)) = dims.split_last() else {
            candle_core::bail!("a dense layer needs at least one dimension");
        };
        if last != self.inputs {
            candle_core::bail!("a dense layer of {} inputs got {last}", self.inputs);
        }
        let values = x.flatten_all()?.to_vec1::<f32>()?;
        let out = self.apply(&values, None);
        let mut shape = lead.to_vec();
        shape.push(self.outputs);
        Tensor::from_vec(out, shape, &Device::Cpu)
    }

    /// The layer over `values`, rows of `inputs` one after another.
    pub(crate) fn apply(&self, values: &[f32], crew: Option<&Crew>) -> Vec<f32> {
        let mut out = Vec::new();
        self.apply_into(values, crew, &mut Scratch::default(), &mut out);
        out
    }

    /// [`BlockLinear::apply`] into `out`, on buffers kept from call to
    /// call: a pass reusing them never faults fresh pages in.
    pub(crate) fn apply_into(
        &self,
        values: &[f32],
        crew: Option<&Crew>,
        scratch: &mut Scratch,
        out: &mut Vec<f32>,
    ) {
        self.cut(values, &mut scratch.rows);
        self.apply_blocks_into(&scratch.rows, crew, &mut scratch.sums, out);
    }

    /// `values` cut into `rows` as this layer's kernel reads them (layers
    /// fed the same rows cut them once).
    pub(crate) fn cut(&self, values: &[f32], rows: &mut Blocks) {
        rows.refill(values, self.inputs, self.kernel.shifts_rows());
    }

    /// The layer over activation rows already cut into blocks.
    #[cfg(test)]
    pub(crate) fn apply_blocks(&self, activations: &Blocks, crew: Option<&Crew>) -> Vec<f32> {
        let mut out = Vec::new();
        self.apply_blocks_into(activations, crew, &mut Vec::new(), &mut out);
        out
    }

    /// The layer over activation rows already cut into blocks, into
    /// `out`; `sums` holds the chunks' sums on the way.
    pub(crate) fn apply_blocks_into(
        &self,
        activations: &Blocks,
        crew: Option<&Crew>,
        sums: &mut Vec<f32>,
        out: &mut Vec<f32>,
    ) {
        let rows = activations.rows(self.inputs);
        let per_row = self.inputs / BLOCK;
        let values = activations.values_for(self.kernel);
        let x: Vec<Row<'_>> = (0..rows)
            .map(|r| {
                (
                    &values[r * self.inputs..(r + 1) * self.inputs],
                    &activations.scales[r * per_row..(r + 1) * per_row],
                )
            })
            .collect();
        let (weights, row_bytes) = match &self.packed {
            Some(packed) => (&packed.bytes[..], per_row * BLOCK),
            None => (self.weights(), per_row * BLOCK_BYTES),
        };
        // Output features in chunks, each a task for this thread or the
        // crew's helper; a chunk's sums land row after row within it.
        sums.clear();
        sums.resize(rows * self.outputs, 0.0);
        if rows > 0 {
            let chunks: Vec<Mutex<&mut [f32]>> = sums
                .chunks_mut(OUTPUTS_PER_TASK * rows)
                .map(Mutex::new)
                .collect();
            let task = |chunk: usize| {
                let mut out = chunks[chunk].lock().unwrap_or_else(|p| p.into_inner());
                let first = chunk * OUTPUTS_PER_TASK;
                let last = first + out.len() / rows;
                self.kernel.outputs(
                    &weights[first * row_bytes..last * row_bytes],
                    &self.scales[first * per_row..last * per_row],
                    per_row,
                    &x,
                    &mut out,
                    self.packed
                        .as_ref()
                        .map(|packed| &packed.starts[first * per_row..last * per_row]),
                );
            };
            match crew {
                Some(crew) => crew.for_each(chunks.len(), &task),
                None => (0..chunks.len()).for_each(task),
            }
        }
        out.clear();
        out.resize(rows * self.outputs, 0.0);
        for (chunk, sums) in sums.chunks(OUTPUTS_PER_TASK * rows.max(1)).enumerate() {
            let first = chunk * OUTPUTS_PER_TASK;
            let count = sums.len() / rows.max(1);
            for (r, row) in sums.chunks_exact(count).enumerate() {
                let place = &mut out[r * self.outputs + first..r * self.outputs + first + count];
                for ((o, sum), bias) in place.iter_mut().zip(row).zip(&self.bias[first..]) {
                    *o = sum + bias;
                }
            }
        }
    }
}

/// What a layer's product needs on the way, kept by a caller that runs
/// many ([`BlockLinear::apply_into`]).
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) rows: Blocks,
    pub(crate) sums: Vec<f32>,
}

/// Each block's scale of Q8_0 `bytes` (rows of `per_row` blocks) as f32:
/// row after row when `together` is 1, else for each group of `together`
/// rows, block after block, the group's scales of that block.
fn block_scales(bytes: &[u8], per_row: usize, together: usize) -> Vec<f32> {
    let scale = |block: usize| {
        let at = block * BLOCK_BYTES;
        half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
    };
    let blocks = bytes.len() / BLOCK_BYTES;
    if together <= 1 {
        return (0..blocks).map(scale).collect();
    }
    let rows = blocks / per_row.max(1);
    let mut out = Vec::with_capacity(blocks);
    for group in (0..rows).step_by(together) {
        for b in 0..per_row {
            for row in group..(group + together).min(rows) {
                out.push(scale(row * per_row + b));
            }
        }
    }
    out
}

/// `v` + 128 as an unsigned byte (its top bit flipped), kept in an i8.
fn shift_byte(v: i8) -> i8 {
    (v as u8 ^ 0x80) as i8
}

/// Output features a task of [`BlockLinear::apply_blocks_into`] takes.
/// A multiple of every kernel's outputs made together.
const OUTPUTS_PER_TASK: usize = 32;

/// Activation rows cut into int8 blocks of [`BLOCK`] with one scale each
/// (as [`crate::Quantized`] does a whole vector).
#[derive(Default)]
pub(crate) struct Blocks {
    values: Vec<i8>,
    scales: Vec<f32>,
    /// `values` as x + 128, for a kernel that takes them so
    /// ([`Kernel::shifts_rows`]): made once for every layer fed these rows.
    shifted: OnceLock<Vec<i8>>,
}

impl Blocks {
    /// The values as `kernel` reads them.
    fn values_for(&self, kernel: Kernel) -> &[i8] {
        if !kernel.shifts_rows() {
            return &self.values;
        }
        self.shifted
            .get_or_init(|| self.values.iter().map(|v| shift_byte(*v)).collect())
    }

    /// Whole rows of `inputs` values held (a partial last row is not).
    fn rows(&self, inputs: usize) -> usize {
        (self.values.len() / inputs).min(self.scales.len() / (inputs / BLOCK))
    }

    /// `values`, rows of `inputs` (a multiple of [`BLOCK`]), cut into
    /// blocks; a partial last row is left out.
    #[cfg(test)]
    pub(crate) fn of(values: &[f32], inputs: usize) -> Blocks {
        let mut out = Blocks::default();
        out.refill(values, inputs, false);
        out
    }

    /// As `Blocks::of`, in place, keeping the buffers; `shift`: the
    /// shifted values too, now ([`Kernel::shifts_rows`]).
    pub(crate) fn refill(&mut self, values: &[f32], inputs: usize, shift: bool) {
        let rows = values.len() / inputs;
        self.values.clear();
        self.scales.clear();
        crate::quantize::quantize_blocks(
            &values[..rows * inputs],
            &mut self.values,
            &mut self.scales,
        );
        let mut shifted = self.shifted.take().unwrap_or_default();
        if shift {
            shifted.clear();
            shifted.extend(self.values.iter().map(|v| shift_byte(*v)));
            let _ = self.shifted.set(shifted);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A deterministic spread of values in [-1, 1], some large, some tiny.
    pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state % 20_001) as f32 / 10_000.0 - 1.0
            })
            .collect()
    }

    /// Q8_0 bytes of `rows × cols` values, as a GGUF file holds them.
    fn q8_0(w: &[f32], cols: usize) -> Vec<u8> {
        let blocks = Blocks::of(w, cols);
        let mut out = Vec::new();
        for (b, scale) in blocks.scales.iter().enumerate() {
            out.extend_from_slice(&half::f16::from_f32(*scale).to_le_bytes());
            out.extend(
                blocks.values[b * BLOCK..(b + 1) * BLOCK]
                    .iter()
                    .map(|v| *v as u8),
            );
        }
        out
    }

    fn mapped(bytes: &[u8]) -> Arc<memmap2::Mmap> {
        let mut map = memmap2::MmapMut::map_anon(bytes.len().max(1)).unwrap();
        map[..bytes.len()].copy_from_slice(bytes);
        Arc::new(map.make_read_only().unwrap())
    }

    #[test]
    fn the_layer_matches_the_float_product_within_quantization_error() {
        for (rows, outputs, inputs) in [(1, 8, 32), (7, 48, 384), (3, 384, 1536), (10, 64, 64)] {
            let w = values(outputs * inputs, 7);
            let bias = values(outputs, 11);
            let x = values(rows * inputs, 13);
            let mut bytes = vec![0xAA; 5];
            bytes.extend(q8_0(&w, inputs));
            let layer = BlockLinear::new(mapped(&bytes), 5, outputs, inputs, bias.clone()).unwrap();
            let got = layer.apply(&x, None);
            for r in 0..rows {
                for o in 0..outputs {
                    let exact: f32 = (0..inputs)
                        .map(|i| x[r * inputs + i] * w[o * inputs + i])
                        .sum::<f32>()
                        + bias[o];
                    // Two 8-bit roundings of uniform values in [-1, 1]:
                    // the error grows like √inputs · 1/127.
                    let bound = (inputs as f32).sqrt() * 0.02;
                    let g = got[r * outputs + o];
                    assert!(
                        (g - exact).abs() < bound,
                        "{rows}x{outputs}x{inputs}: {g} vs {exact}"
                    );
                }
            }
        }
    }

    /// `layer` with its products on `kernel`.
    pub(crate) fn on(layer: &BlockLinear, kernel: Kernel) -> BlockLinear {
        let per_row = layer.inputs / BLOCK;
        BlockLinear {
            map: layer.map.clone(),
            kernel,
            scales: block_scales(layer.weights(), per_row, kernel.outputs_at_once()),
            packed: None,
            bias: layer.bias.clone(),
            ..*layer
        }
    }

    #[test]
    fn every_kernel_gives_the_same_sums() {
        // Outputs past one task and not a whole number of them; up to
        // eleven rows: every group size of every kernel.
        let (outputs, inputs) = (72, 1536);
        let mut bytes = q8_0(&values(outputs * inputs, 3), inputs);
        // Extremes: ±127 weights against ±127 activations.
        bytes[2..2 + BLOCK].fill(127);
        bytes[BLOCK_BYTES + 2..BLOCK_BYTES + 2 + BLOCK].fill(-127i8 as u8);
        let layer =
            BlockLinear::new(mapped(&bytes), 0, outputs, inputs, values(outputs, 4)).unwrap();
        let close = |p: &[f32], c: &[f32], what: &str| {
            for (p, c) in p.iter().zip(c) {
                assert!(
                    (p - c).abs() <= 1e-4 * p.abs().max(1.0),
                    "{what}: {p} vs {c}"
                );
            }
        };
        let kernels = Kernel::all_here(outputs);
        let crew = Crew::new();
        for rows in 1..=11 {
            let mut x = Blocks::of(&values(rows * inputs, 5 + rows as u32), inputs);
            x.values[..BLOCK].fill(127);
            x.values[BLOCK..2 * BLOCK].fill(-127);
            let portable = on(&layer, Kernel::Portable).apply_blocks(&x, None);
            assert_eq!(portable.len(), rows * outputs);
            for kernel in &kernels {
                let mut on_kernel = on(&layer, *kernel);
                let got = on_kernel.apply_blocks(&x, None);
                close(&portable, &got, &format!("{kernel:?}, {rows} rows"));
                // Shared with a helper thread: the same sums.
                let shared = on_kernel.apply_blocks(&x, crew.as_ref());
                close(
                    &portable,
                    &shared,
                    &format!("{kernel:?}, {rows} rows, crew"),
                );
                // In the kernel's own layout (if it has one): the same.
                on_kernel.pack();
                let packed = on_kernel.apply_blocks(&x, crew.as_ref());
                close(
                    &portable,
                    &packed,
                    &format!("{kernel:?}, {rows} rows, packed"),
                );
            }
        }
    }

    #[test]
    fn weights_that_do_not_fit_the_file_are_refused() {
        let bytes = q8_0(&values(4 * 64, 1), 64);
        let map = mapped(&bytes);
        assert!(BlockLinear::new(map.clone(), 0, 4, 64, vec![0.0; 4]).is_some());
        assert!(BlockLinear::new(map.clone(), 1, 4, 64, vec![0.0; 4]).is_none());
        assert!(BlockLinear::new(map.clone(), 0, 5, 64, vec![0.0; 5]).is_none());
        assert!(BlockLinear::new(map.clone(), 0, 4, 48, vec![0.0; 4]).is_none());
        assert!(BlockLinear::new(map, 0, 4, 64, vec![0.0; 3]).is_none());
    }

    #[test]
    fn zero_and_non_finite_activations_count_as_nothing() {
        let inputs = 64;
        let w = values(inputs, 9);
        let layer = BlockLinear::new(mapped(&q8_0(&w, inputs)), 0, 1, inputs, vec![0.5]).unwrap();
        assert_eq!(layer.apply(&vec![0.0; inputs], None), vec![0.5]);
        let mut x = vec![0.0; inputs];
        x[3] = f32::NAN;
        x[4] = f32::INFINITY;
        assert_eq!(layer.apply(&x, None), vec![0.5]);
    }
}
