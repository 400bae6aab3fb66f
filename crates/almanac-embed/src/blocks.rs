//! Dense layers multiplied in int8 blocks, straight from the compact
//! file's Q8_0 bytes: what a query's forward pass runs on.
//!
//! A query is a handful of tokens, so its matrix products are a few rows
//! against each weight matrix. A general f32 product spends most of that
//! time re-packing the 40 MB of weights for every call and waking the
//! thread pool for work too small to share. Here each weight row (Q8_0:
//! blocks of 32 int8 values with one f16 scale, read in place from the
//! memory-mapped file) is dotted with the few activation rows, themselves
//! cut into int8 blocks of 32 with one f32 scale: a quarter of the bytes
//! to read, no packing, one thread.
//!
//! Invariants:
//! * The result is the same sum, block by block, whichever kernel runs
//!   (AVX2 when the CPU has it, checked at run time, else portable code);
//!   only the float rounding of the final additions may differ.
//! * Nothing here reads outside the mapped tensor: its extent is checked
//!   once, when the layer is made.

use std::sync::Arc;

use candle_core::{Device, Tensor};

/// Values per block, as in Q8_0.
const BLOCK: usize = 32;
/// Bytes of one Q8_0 block: an f16 scale, then 32 int8 values.
const BLOCK_BYTES: usize = 2 + BLOCK;

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
    /// Each block's scale as f32, row after row: widened once here rather
    /// than for every product.
    scales: Vec<f32>,
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
        let scales = bytes
            .chunks_exact(BLOCK_BYTES)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
        Some(BlockLinear {
            map,
            start,
            outputs,
            inputs,
            scales,
            bias,
        })
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
        let out = self.apply(&values);
        let mut shape = lead.to_vec();
        shape.push(self.outputs);
        Tensor::from_vec(out, shape, &Device::Cpu)
    }

    /// The layer over `values`, rows of `inputs` one after another.
    pub(crate) fn apply(&self, values: &[f32]) -> Vec<f32> {
        self.apply_blocks(&Blocks::of(values, self.inputs))
    }

    /// The layer over activation rows already cut into blocks (layers
    /// fed the same rows cut them once).
    pub(crate) fn apply_blocks(&self, activations: &Blocks) -> Vec<f32> {
        let rows = activations.rows(self.inputs);
        let per_row = self.inputs / BLOCK;
        let x: Vec<Row<'_>> = (0..rows)
            .map(|r| {
                (
                    &activations.values[r * self.inputs..(r + 1) * self.inputs],
                    &activations.scales[r * per_row..(r + 1) * per_row],
                )
            })
            .collect();
        let weights = self.weights();
        let kernel = kernel_for_this_cpu();
        let mut out = vec![0f32; rows * self.outputs];
        let mut sums = vec![0f32; rows];
        for o in 0..self.outputs {
            let w = &weights[o * per_row * BLOCK_BYTES..(o + 1) * per_row * BLOCK_BYTES];
            let w_scales = &self.scales[o * per_row..(o + 1) * per_row];
            kernel(w, w_scales, &x, &mut sums);
            for (r, sum) in sums.iter().enumerate() {
                out[r * self.outputs + o] = sum + self.bias[o];
            }
        }
        out
    }
}

/// Activation rows cut into int8 blocks of [`BLOCK`] with one scale each
/// (as [`crate::Quantized`] does a whole vector).
pub(crate) struct Blocks {
    values: Vec<i8>,
    scales: Vec<f32>,
}

impl Blocks {
    /// Whole rows of `inputs` values held (a partial last row is not).
    fn rows(&self, inputs: usize) -> usize {
        (self.values.len() / inputs).min(self.scales.len() / (inputs / BLOCK))
    }

    /// `values`, rows of `inputs` (a multiple of [`BLOCK`]), cut into
    /// blocks; a partial last row is left out.
    pub(crate) fn of(values: &[f32], inputs: usize) -> Blocks {
        let rows = values.len() / inputs;
        let mut out = Blocks {
            values: Vec::with_capacity(rows * inputs),
            scales: Vec::with_capacity(rows * inputs / BLOCK),
        };
        for block in values[..rows * inputs].chunks_exact(BLOCK) {
            let scale = crate::quantize::quantize_into(block, &mut out.values);
            out.scales.push(scale);
        }
        out
    }
}

/// One activation row for a kernel: its int8 values and its block scales.
type Row<'a> = (&'a [i8], &'a [f32]);

/// For each activation row, Σ over blocks of `w_scale · x_scale · Σ w·x`
/// into `sums` (one per row): `w` is Q8_0 bytes ([`BLOCK_BYTES`] per
/// block, its f16 scales ignored in favour of `w_scales`). Rows go through
/// in groups of four (then two, then one), each weight block loaded once
/// for its group, which keeps several sums in flight.
type Kernel = fn(w: &[u8], w_scales: &[f32], rows: &[Row<'_>], sums: &mut [f32]);

/// The kernel this CPU runs best.
fn kernel_for_this_cpu() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return avx2::dot_rows;
        }
    }
    dot_rows_portable
}

fn dot_rows_portable(w: &[u8], w_scales: &[f32], rows: &[Row<'_>], sums: &mut [f32]) {
    for ((x, x_scales), total) in rows.iter().zip(sums.iter_mut()) {
        *total = 0.0;
        for (((wb, ws), xb), xs) in w
            .chunks_exact(BLOCK_BYTES)
            .zip(w_scales)
            .zip(x.chunks_exact(BLOCK))
            .zip(*x_scales)
        {
            let sum: i32 = wb[2..]
                .iter()
                .zip(xb)
                .map(|(a, b)| i32::from(*a as i8) * i32::from(*b))
                .sum();
            *total += ws * xs * sum as f32;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BLOCK, BLOCK_BYTES, Row};
    use std::arch::x86_64::*;

    /// [`super::Kernel`] with AVX2; only handed out when the CPU has AVX2
    /// and FMA.
    pub(super) fn dot_rows(w: &[u8], w_scales: &[f32], rows: &[Row<'_>], sums: &mut [f32]) {
        let blocks = rows.iter().fold(
            (w.len() / BLOCK_BYTES).min(w_scales.len()),
            |n, (x, scales)| n.min(x.len() / BLOCK).min(scales.len()),
        );
        // SAFETY: `kernel_for_this_cpu` hands this out only after checking
        // the CPU, and `blocks` is within every slice.
        unsafe { dot_rows_avx2(w, w_scales, rows, blocks, sums) }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_rows_avx2(
        w: &[u8],
        w_scales: &[f32],
        rows: &[Row<'_>],
        blocks: usize,
        sums: &mut [f32],
    ) {
        let rows = &rows[..rows.len().min(sums.len())];
        let mut first = 0;
        while first < rows.len() {
            let left = rows.len() - first;
            // SAFETY (all three): as for `dot_rows`.
            first += unsafe {
                if left >= 4 {
                    group::<4>(w, w_scales, rows, first, blocks, sums)
                } else if left >= 2 {
                    group::<2>(w, w_scales, rows, first, blocks, sums)
                } else {
                    group::<1>(w, w_scales, rows, first, blocks, sums)
                }
            };
        }
    }

    /// The `N` rows from `first` into their sums; returns `N`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn group<const N: usize>(
        w: &[u8],
        w_scales: &[f32],
        rows: &[Row<'_>],
        first: usize,
        blocks: usize,
        sums: &mut [f32],
    ) -> usize {
        // SAFETY: as for `dot_rows`; the caller has `N` rows from `first`.
        let got = unsafe {
            dot_blocks_avx2::<N>(
                w,
                w_scales,
                std::array::from_fn(|k| rows[first + k]),
                blocks,
            )
        };
        sums[first..first + N].copy_from_slice(&got);
        N
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_blocks_avx2<const N: usize>(
        w: &[u8],
        w_scales: &[f32],
        rows: [Row<'_>; N],
        blocks: usize,
    ) -> [f32; N] {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); N];
        for b in 0..blocks {
            // SAFETY: block `b` of `w` spans BLOCK_BYTES from b·BLOCK_BYTES
            // and of each row BLOCK from b·BLOCK, within their lengths.
            let wv = unsafe { _mm256_loadu_si256(w.as_ptr().add(b * BLOCK_BYTES + 2).cast()) };
            // maddubs multiplies unsigned by signed bytes: |w| by x with
            // w's sign; pairs are summed to i16 (at most 2·127², no
            // saturation), then to i32.
            let magnitudes = _mm256_sign_epi8(wv, wv);
            let w_scale = w_scales[b];
            for (k, (x, x_scales)) in rows.iter().enumerate() {
                // SAFETY: as above.
                let xv = unsafe { _mm256_loadu_si256(x.as_ptr().add(b * BLOCK).cast()) };
                let pairs = _mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(xv, wv));
                let sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                let scale = _mm256_set1_ps(w_scale * x_scales[b]);
                acc[k] = _mm256_fmadd_ps(scale, sums, acc[k]);
            }
        }
        acc.map(|v| {
            let halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
            _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)))
        })
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
            let got = layer.apply(&x);
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

    #[test]
    fn every_kernel_gives_the_same_sums() {
        let inputs = 1536;
        let w = q8_0(&values(inputs, 3), inputs);
        let w_scales: Vec<f32> = w
            .chunks_exact(BLOCK_BYTES)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
        // Extremes included: ±127 in both operands is the largest pair sum.
        let mut x = Blocks::of(&values(inputs, 5), inputs);
        x.values[..BLOCK].fill(127);
        x.values[BLOCK..2 * BLOCK].fill(-127);
        let other = Blocks::of(&values(inputs, 6), inputs);
        let rows: Vec<Row<'_>> = (0..7)
            .map(|k| {
                if k % 2 == 0 {
                    (&x.values[..], &x.scales[..])
                } else {
                    (&other.values[..], &other.scales[..])
                }
            })
            .collect();
        let close = |p: &[f32], c: &[f32]| {
            for (p, c) in p.iter().zip(c) {
                assert!((p - c).abs() <= 1e-4 * p.abs().max(1.0), "{p} vs {c}");
            }
        };
        let mut portable = vec![0f32; 7];
        dot_rows_portable(&w, &w_scales, &rows, &mut portable);
        assert_ne!(portable[0], portable[1], "the rows differ");
        assert!(portable.iter().step_by(2).all(|s| *s == portable[0]));
        // Groups of four, two and one: every count of rows up to seven.
        for n in 1..=7 {
            let mut chosen = vec![f32::NAN; n];
            kernel_for_this_cpu()(&w, &w_scales, &rows[..n], &mut chosen);
            close(&portable[..n], &chosen);
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
        assert_eq!(layer.apply(&vec![0.0; inputs]), vec![0.5]);
        let mut x = vec![0.0; inputs];
        x[3] = f32::NAN;
        x[4] = f32::INFINITY;
        assert_eq!(layer.apply(&x), vec![0.5]);
    }
}
