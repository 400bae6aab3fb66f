//! The int8 block products under [`crate::blocks::BlockLinear`], one
//! kernel per kind of CPU, chosen once at run time.
//!
//! Invariants:
//! * Every kernel gives the same sums block by block (exact integer dot
//!   products, each scaled by its two block scales); only the float
//!   rounding of the additions may differ.
//! * A kernel reads only within the slices it is given: the counts of
//!   blocks, rows and outputs it runs over are taken from their lengths.
//!   (A prefetch hint may name an address past them: a hint reads
//!   nothing and never faults.)

use crate::blocks::{BLOCK, BLOCK_BYTES};

/// One activation row for a kernel: its int8 values and its block scales.
pub(crate) type Row<'a> = (&'a [i8], &'a [f32]);

/// How the products are made on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Plain code, any CPU.
    Portable,
    /// AVX2 and FMA: one weight row at a time against every activation row.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 VNNI on 256-bit registers: eight weight rows at a time,
    /// their blocks turned so that each lane of a register is one output
    /// (see [`vnni`]). Takes rows shifted to unsigned bytes
    /// ([`Kernel::shifts_rows`]) and scales in groups of eight outputs
    /// ([`Kernel::outputs_at_once`]).
    #[cfg(target_arch = "x86_64")]
    Vnni,
}

impl Kernel {
    /// The kernel this CPU runs best for a layer of `outputs` features.
    pub(crate) fn for_this_cpu(outputs: usize) -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma");
            if avx2
                && has!("avx512f")
                && has!("avx512vl")
                && has!("avx512vnni")
                && outputs.is_multiple_of(vnni::OUTPUTS)
            {
                return Kernel::Vnni;
            }
            if avx2 {
                return Kernel::Avx2;
            }
        }
        let _ = outputs;
        Kernel::Portable
    }

    /// Every kernel this CPU can run for `outputs` features (for tests).
    #[cfg(test)]
    pub(crate) fn all_here(outputs: usize) -> Vec<Kernel> {
        let mut all = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                all.push(Kernel::Avx2);
            }
            if Kernel::for_this_cpu(outputs) == Kernel::Vnni {
                all.push(Kernel::Vnni);
            }
        }
        all
    }

    /// Whether rows come as x + 128, unsigned (each byte's top bit flipped).
    pub(crate) fn shifts_rows(self) -> bool {
        self.outputs_at_once() > 1
    }

    /// Outputs a call of [`Kernel::outputs`] makes together: its scales
    /// are laid out block after block in groups of this many outputs.
    pub(crate) fn outputs_at_once(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => vnni::OUTPUTS,
            _ => 1,
        }
    }

    /// Q8_0 rows of `per_row` blocks in this kernel's own layout, when it
    /// reads one ([`Kernel::outputs`] with `packed`).
    pub(crate) fn pack(self, bytes: &[u8], per_row: usize) -> Option<Packed> {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => Some(vnni::pack(bytes, per_row)),
            _ => {
                let _ = (bytes, per_row);
                None
            }
        }
    }

    /// The sums (no bias) of `count` outputs for every row, row after row
    /// (`count` per row) into `out`: `w` holds their Q8_0 rows, each
    /// `blocks` long, `scales` their block scales laid out as
    /// [`Kernel::outputs_at_once`] says, `rows` shifted when
    /// [`Kernel::shifts_rows`]. `packed`: `w` is in the layout
    /// [`Kernel::pack`] makes (32 bytes a block, no scales), and these
    /// are its [`Packed::starts`], laid out as `scales`.
    pub(crate) fn outputs(
        self,
        w: &[u8],
        scales: &[f32],
        blocks: usize,
        rows: &[Row<'_>],
        out: &mut [f32],
        packed: Option<&[i16]>,
    ) {
        let count = out.len() / rows.len().max(1);
        let row_bytes = blocks * if packed.is_some() { BLOCK } else { BLOCK_BYTES };
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => {
                for group in 0..count / vnni::OUTPUTS {
                    let first = group * vnni::OUTPUTS;
                    let span = first * row_bytes..(first + vnni::OUTPUTS) * row_bytes;
                    let scale_span = first * blocks..(first + vnni::OUTPUTS) * blocks;
                    let weights = vnni::Eight {
                        w: &w[span],
                        starts: packed.map(|starts| &starts[scale_span.clone()]),
                        row_bytes,
                        scales: &scales[scale_span],
                    };
                    vnni::eight(weights, rows, &mut out[first..], count);
                }
            }
            _ => {
                // One weight row at a time, from the file's layout: only
                // the eight-output kernel has a layout of its own.
                debug_assert!(packed.is_none(), "a row kernel got packed weights");
                let mut sums = vec![0f32; rows.len()];
                for o in 0..count {
                    let weights = &w[o * row_bytes..(o + 1) * row_bytes];
                    let w_scales = &scales[o * blocks..(o + 1) * blocks];
                    self.dot_rows(weights, w_scales, rows, &mut sums);
                    for (r, sum) in sums.iter().enumerate() {
                        out[r * count + o] = *sum;
                    }
                }
            }
        }
    }

    /// One weight row against every row: for each, Σ over blocks of
    /// `w_scale · x_scale · Σ w·x` into `sums`. `w` is Q8_0 bytes
    /// ([`BLOCK_BYTES`] per block, its f16 scales ignored in favour of
    /// `w_scales`).
    fn dot_rows(self, w: &[u8], w_scales: &[f32], rows: &[Row<'_>], sums: &mut [f32]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => avx2::dot_rows(w, w_scales, rows, sums),
            _ => dot_rows_portable(w, w_scales, rows, sums),
        }
    }
}

/// Weights in a kernel's own layout ([`Kernel::pack`]).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct Packed {
    /// The int8 values, turned as the kernel reads them.
    pub(crate) bytes: Vec<u8>,
    /// For each block of each output, −Σw: the kernel's sum for rows
    /// shifted by 128 starts from 128 times it. Laid out as the block
    /// scales are, made once here instead of for every product, and kept
    /// in 16 bits (|Σw| ≤ 32 · 127) so that a pass reads few more bytes.
    pub(crate) starts: Vec<i16>,
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

#[cfg(target_arch = "x86_64")]
mod vnni {
    //! Eight outputs at once. A block of eight weight rows (8 × 32 bytes)
    //! is loaded as eight registers and turned (an 8 × 8 transpose of
    //! 4-byte groups), so that register `t` holds bytes 4t..4t+4 of every
    //! row, one row per lane. Then for each activation row, eight
    //! `vpdpbusd` with bytes 4t..4t+4 of that row broadcast sum the block's
    //! eight dot products in the eight lanes: one conversion and one
    //! multiply-add per block for eight outputs, no horizontal sums.
    //!
    //! Packed weights ([`pack`]) are stored turned already, eight rows'
    //! block after block: the kernel then reads them in one stream and
    //! skips the transpose (the eight rows of the mapped file are eight
    //! streams through memory, which the memory system follows worse).
    //! Their blocks' starting sums (−128·Σw) are made once there too.
    //!
    //! `vpdpbusd` multiplies unsigned by signed bytes, so activation rows
    //! come as x + 128; each lane starts from −128·Σw of its block, which
    //! leaves exactly Σ x·w (at most 32·255·127 in magnitude: no overflow).

    use super::{BLOCK, BLOCK_BYTES, Packed, Row};
    use std::arch::x86_64::*;

    /// Outputs made together.
    pub(super) const OUTPUTS: usize = 8;

    /// How far ahead of the block being multiplied the packed kernel asks
    /// the memory system for weights, in bytes. A query's pass reads each
    /// of its 11 MB of weights once, mostly from memory (other work has
    /// pushed them out of the caches since the last query), and the
    /// memory system's own prefetch follows the stream too late: asked
    /// 2 KB ahead, a pass takes 12 to 20% less (1 to 4 KB measured alike,
    /// 512 bytes less well).
    const AHEAD: usize = 2048;

    /// Eight weight rows: Q8_0 rows of `row_bytes` each (or, with
    /// `starts`, their [`pack`] layout, `row_bytes` being 32 a block) and
    /// their block scales, block after block, eight per block.
    #[derive(Clone, Copy)]
    pub(super) struct Eight<'a> {
        pub(super) w: &'a [u8],
        /// The packed blocks' −Σw (see [`Packed::starts`]), laid out as
        /// `scales`.
        pub(super) starts: Option<&'a [i16]>,
        pub(super) row_bytes: usize,
        pub(super) scales: &'a [f32],
    }

    /// Rows × eight sums into `out` (row `r`'s at `r · stride`).
    pub(super) fn eight(weights: Eight<'_>, rows: &[Row<'_>], out: &mut [f32], stride: usize) {
        let Eight {
            w,
            starts,
            row_bytes,
            scales,
        } = weights;
        let whole = if w.len() >= OUTPUTS * row_bytes {
            row_bytes / if starts.is_some() { BLOCK } else { BLOCK_BYTES }
        } else {
            0
        };
        let known = starts.map_or(scales.len(), |starts| starts.len().min(scales.len()));
        let blocks = rows
            .iter()
            .fold(whole.min(known / OUTPUTS), |n, (x, x_scales)| {
                n.min(x.len() / BLOCK).min(x_scales.len())
            });
        let rows = &rows[..rows
            .len()
            .min((out.len() + stride).saturating_sub(OUTPUTS) / stride.max(1))];
        let mut first = 0;
        while first < rows.len() {
            let left = rows.len() - first;
            let place = &mut out[first * stride..];
            let rows = &rows[first..];
            // Up to eight rows in one pass over the weights: a query's
            // few rows read each weight once.
            // SAFETY: `Kernel::for_this_cpu` hands this kernel out only
            // after checking the CPU; `blocks` is within every row and
            // weight row, eight rows of `w` are within it (`blocks` counts
            // whole blocks of all eight), and each row's eight sums are
            // within `out`.
            first += unsafe {
                match left {
                    1 => group::<1>(weights, rows, blocks, place, stride),
                    2 => group::<2>(weights, rows, blocks, place, stride),
                    3 => group::<3>(weights, rows, blocks, place, stride),
                    4 => group::<4>(weights, rows, blocks, place, stride),
                    5 => group::<5>(weights, rows, blocks, place, stride),
                    6 => group::<6>(weights, rows, blocks, place, stride),
                    7 => group::<7>(weights, rows, blocks, place, stride),
                    _ => group::<8>(weights, rows, blocks, place, stride),
                }
            };
        }
    }

    /// The first `N` rows of `rows`; returns `N`.
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
    unsafe fn group<const N: usize>(
        weights: Eight<'_>,
        rows: &[Row<'_>],
        blocks: usize,
        out: &mut [f32],
        stride: usize,
    ) -> usize {
        let Eight {
            w,
            starts,
            row_bytes,
            scales,
        } = weights;
        let zero = _mm256_setzero_si256();
        let offset = _mm256_set1_epi8(-128);
        let mut acc = [_mm256_setzero_ps(); N];
        for b in 0..blocks {
            if let Some(starts) = starts {
                ahead(w, starts, scales, b);
            }
            // SAFETY (loads): block `b` of each of the eight weight rows,
            // its eight scales and bytes b·32.. b·32+32 of each row are
            // within their slices (see `eight`).
            let turned = if starts.is_some() {
                std::array::from_fn(|t| unsafe {
                    _mm256_loadu_si256(w.as_ptr().add((b * OUTPUTS + t) * BLOCK).cast())
                })
            } else {
                unsafe {
                    transpose(std::array::from_fn(|j| {
                        _mm256_loadu_si256(
                            w.as_ptr().add(j * row_bytes + b * BLOCK_BYTES + 2).cast(),
                        )
                    }))
                }
            };
            let start = match starts {
                // SAFETY: the block's eight starts are within `starts`.
                Some(starts) => unsafe {
                    let minus_sums = _mm_loadu_si128(starts.as_ptr().add(b * OUTPUTS).cast());
                    _mm256_slli_epi32::<7>(_mm256_cvtepi16_epi32(minus_sums))
                },
                None => {
                    let mut sum = zero;
                    for part in turned {
                        sum = _mm256_dpbusd_epi32(sum, offset, part);
                    }
                    _mm256_sub_epi32(zero, sum)
                }
            };
            let w_scales = unsafe { _mm256_loadu_ps(scales.as_ptr().add(b * OUTPUTS)) };
            for (k, (x, x_scales)) in rows[..N].iter().enumerate() {
                let mut dot = start;
                for (t, part) in turned.iter().enumerate() {
                    let four = unsafe {
                        x.as_ptr()
                            .add(b * BLOCK + 4 * t)
                            .cast::<i32>()
                            .read_unaligned()
                    };
                    dot = _mm256_dpbusd_epi32(dot, _mm256_set1_epi32(four), *part);
                }
                let scale = _mm256_mul_ps(w_scales, _mm256_set1_ps(x_scales[b]));
                acc[k] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[k]);
            }
        }
        for (k, sums) in acc.iter().enumerate() {
            // SAFETY: row k's eight sums are within `out` (see `eight`).
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(k * stride), *sums) };
        }
        N
    }

    /// Asks for the packed weights, starts and scales [`AHEAD`] bytes of
    /// weights past block `b`'s. Past the end of these slices they are
    /// the next eight outputs' (the packed layout keeps a layer's groups
    /// one after another), or nothing the pass reads.
    #[inline]
    fn ahead(w: &[u8], starts: &[i16], scales: &[f32], b: usize) {
        const LINE: usize = 64;
        // Starts and scales advance by eight of theirs for every block's
        // 256 bytes of weights.
        let later = AHEAD / (OUTPUTS * BLOCK) * OUTPUTS;
        let at = w.as_ptr().wrapping_add(b * OUTPUTS * BLOCK + AHEAD);
        // SAFETY: a prefetch hint reads nothing and never faults, whatever
        // the address; `wrapping_add` keeps the arithmetic defined.
        unsafe {
            for line in 0..OUTPUTS * BLOCK / LINE {
                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(line * LINE).cast());
            }
            _mm_prefetch::<_MM_HINT_T0>(
                starts
                    .as_ptr()
                    .wrapping_add((b + 1) * OUTPUTS + later)
                    .cast(),
            );
            _mm_prefetch::<_MM_HINT_T0>(
                scales
                    .as_ptr()
                    .wrapping_add((b + 1) * OUTPUTS + later)
                    .cast(),
            );
        }
    }

    /// Q8_0 rows (`per_row` blocks each, a multiple of eight rows) laid
    /// out as the packed kernel reads them: for each group of eight rows,
    /// block after block, the block's 4-byte groups turned (group `t` of
    /// all eight rows together), with each block's starting sum.
    pub(super) fn pack(bytes: &[u8], per_row: usize) -> Packed {
        // Whole groups only: the kernel runs on layers of eight outputs.
        let rows = bytes.len() / BLOCK_BYTES / per_row.max(1) / OUTPUTS * OUTPUTS;
        let mut out = Vec::with_capacity(rows * per_row * BLOCK);
        let mut starts = Vec::with_capacity(rows * per_row);
        for group in (0..rows).step_by(OUTPUTS) {
            for b in 0..per_row {
                for t in 0..BLOCK / 4 {
                    for j in 0..OUTPUTS {
                        let at = ((group + j) * per_row + b) * BLOCK_BYTES + 2 + 4 * t;
                        out.extend_from_slice(&bytes[at..at + 4]);
                    }
                }
                for j in 0..OUTPUTS {
                    let at = ((group + j) * per_row + b) * BLOCK_BYTES + 2;
                    let sum: i16 = bytes[at..at + BLOCK]
                        .iter()
                        .map(|w| i16::from(*w as i8))
                        .sum();
                    starts.push(-sum);
                }
            }
        }
        Packed { bytes: out, starts }
    }

    /// Eight registers of eight 4-byte groups turned: lane `j` of result
    /// `t` is group `t` of input `j`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transpose(r: [__m256i; 8]) -> [__m256i; 8] {
        let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
        let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
        let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
        let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
        let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
        let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
        let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
        let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
        let u0 = _mm256_unpacklo_epi64(t0, t2);
        let u1 = _mm256_unpackhi_epi64(t0, t2);
        let u2 = _mm256_unpacklo_epi64(t1, t3);
        let u3 = _mm256_unpackhi_epi64(t1, t3);
        let u4 = _mm256_unpacklo_epi64(t4, t6);
        let u5 = _mm256_unpackhi_epi64(t4, t6);
        let u6 = _mm256_unpacklo_epi64(t5, t7);
        let u7 = _mm256_unpackhi_epi64(t5, t7);
        [
            _mm256_permute2x128_si256(u0, u4, 0x20),
            _mm256_permute2x128_si256(u1, u5, 0x20),
            _mm256_permute2x128_si256(u2, u6, 0x20),
            _mm256_permute2x128_si256(u3, u7, 0x20),
            _mm256_permute2x128_si256(u0, u4, 0x31),
            _mm256_permute2x128_si256(u1, u5, 0x31),
            _mm256_permute2x128_si256(u2, u6, 0x31),
            _mm256_permute2x128_si256(u3, u7, 0x31),
        ]
    }
}
