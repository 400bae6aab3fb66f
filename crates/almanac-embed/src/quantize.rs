//! Int8 vectors: a quarter of the bytes of f32, and dot products that
//! vectorise well, at about 1% error on unit vectors.

use crate::blocks::BLOCK;

/// A vector as int8 parts and one scale: `part × scale ≈ value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized {
    pub scale: f32,
    pub parts: Vec<i8>,
}

impl Quantized {
    /// Symmetric quantization: the largest magnitude maps to 127.
    pub fn new(v: &[f32]) -> Quantized {
        let mut parts = Vec::with_capacity(v.len());
        let scale = quantize_into(v, &mut parts);
        Quantized { scale, parts }
    }

    /// The stored form: the scale (f32, little-endian), then the parts.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.parts.len());
        out.extend_from_slice(&self.scale.to_le_bytes());
        out.extend(self.parts.iter().map(|p| *p as u8));
        out
    }

    /// Reads [`Quantized::to_bytes`]; `None` for anything else.
    pub fn from_bytes(bytes: &[u8]) -> Option<Quantized> {
        let (scale, parts) = bytes.split_first_chunk::<4>()?;
        let scale = f32::from_le_bytes(*scale);
        if !scale.is_finite() {
            return None;
        }
        Some(Quantized {
            scale,
            parts: parts.iter().map(|b| *b as i8).collect(),
        })
    }

    /// The dot product with `other` (same length) as a float.
    pub fn dot(&self, other: &Quantized) -> f32 {
        dot_i8(&self.parts, &other.parts) as f32 * self.scale * other.scale
    }
}

/// `values` as int8 parts appended to `parts`, and the scale that maps
/// the largest finite magnitude to 127 (`part × scale ≈ value`; 0 when
/// there is none). Non-finite values count as 0.
pub(crate) fn quantize_into(values: &[f32], parts: &mut Vec<i8>) -> f32 {
    let start = parts.len();
    parts.resize(start + values.len(), 0);
    quantize_slice(values, &mut parts[start..])
}

/// `values` cut into blocks of [`BLOCK`], each as [`quantize_into`]
/// makes it: the parts appended to `parts`, the scales to `scales` (a
/// partial last block is left out). What a query's pass does to every
/// activation of every layer, on the thread that posts the products: with
/// AVX2 in explicit vector code (the plain loops do not vectorise: the
/// checks for non-finite values and the rounding stay scalar), with the
/// same bits.
pub(crate) fn quantize_blocks(values: &[f32], parts: &mut Vec<i8>, scales: &mut Vec<f32>) {
    let whole = values.len() / BLOCK * BLOCK;
    let start = parts.len();
    parts.resize(start + whole, 0);
    let (values, parts) = (&values[..whole], &mut parts[start..]);
    #[cfg(target_arch = "x86_64")]
    if crate::wide::avx2_here() {
        // SAFETY: the CPU has AVX2, checked just above; both slices hold
        // whole blocks, the same number.
        unsafe { avx2::quantize_blocks(values, parts, scales) };
        return;
    }
    for (block, out) in values
        .chunks_exact(BLOCK)
        .zip(parts.chunks_exact_mut(BLOCK))
    {
        scales.push(quantize_slice(block, out));
    }
}

/// [`quantize_into`] into `parts` (as long as `values`): each part set.
#[inline(always)]
fn quantize_slice(values: &[f32], parts: &mut [i8]) -> f32 {
    // Written without early exits or library calls so that both loops
    // vectorise.
    // Eight running maxima, one per lane, then the largest of them.
    let mut lanes = [0f32; 8];
    let mut chunks = values.chunks_exact(8);
    for chunk in chunks.by_ref() {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            *lane = larger_finite(*lane, *x);
        }
    }
    let largest = chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(0f32, |m, x| larger_finite(m, *x));
    if largest == 0.0 {
        parts.fill(0);
        return 0.0;
    }
    let scale = largest / 127.0;
    for (part, x) in parts.iter_mut().zip(values) {
        let scaled = if x.is_finite() {
            (x / scale).clamp(-127.0, 127.0)
        } else {
            0.0
        };
        *part = round_half_away(scaled);
    }
    scale
}

/// The larger of `largest` and `x`'s magnitude, when that is finite.
#[inline(always)]
fn larger_finite(largest: f32, x: f32) -> f32 {
    let magnitude = x.abs();
    // NaN fails both comparisons.
    if magnitude > largest && magnitude < f32::INFINITY {
        magnitude
    } else {
        largest
    }
}

/// `x` (within ±127) rounded half away from zero, as `f32::round` does.
/// By hand because `round` is a library call on baseline x86-64.
#[inline(always)]
fn round_half_away(x: f32) -> i8 {
    let whole = x as i32;
    // Exact: `x` and its whole part are within 2²³ of each other.
    let rest = x - whole as f32;
    let step = i32::from(rest >= 0.5) - i32::from(rest <= -0.5);
    (whole + step) as i8
}

/// The integer dot product of two int8 slices (the shorter length).
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let n = a.len().min(b.len());
    (dot_kernel())(&a[..n], &b[..n])
}

/// The dot product of `query` with each row of `rows` (rows of
/// `query.len()` parts one after another; a last partial row is left
/// out), appended to `out` in order: [`dot_i8`] for many rows at once.
pub fn dots_i8(query: &[i8], rows: &[i8], out: &mut Vec<i32>) {
    if query.is_empty() {
        return;
    }
    let dot = dot_kernel();
    out.extend(rows.chunks_exact(query.len()).map(|row| dot(query, row)));
}

/// Two int8 slices of the same length to their integer dot product.
type DotKernel = fn(&[i8], &[i8]) -> i32;

/// The fastest kernel this CPU runs (checked at run time: a build for the
/// baseline x86-64 still uses AVX2 where there is one).
fn dot_kernel() -> DotKernel {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            return avx2::dot;
        }
    }
    dot_portable
}

fn dot_portable(a: &[i8], b: &[i8]) -> i32 {
    // Blocks of 16 into i16 pairs keep the inner loop in lanes the
    // compiler vectorises; 16 × 127² fits an i32 with room to spare.
    let mut total = 0i32;
    let mut a_blocks = a.chunks_exact(16);
    let mut b_blocks = b.chunks_exact(16);
    for (x, y) in (&mut a_blocks).zip(&mut b_blocks) {
        let mut block = 0i32;
        for i in 0..16 {
            block += i32::from(x[i]) * i32::from(y[i]);
        }
        total += block;
    }
    for (x, y) in a_blocks.remainder().iter().zip(b_blocks.remainder()) {
        total += i32::from(*x) * i32::from(*y);
    }
    total
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// [`super::DotKernel`] with AVX2; handed out only when the CPU has it.
    pub(super) fn dot(a: &[i8], b: &[i8]) -> i32 {
        // SAFETY: `dot_kernel()` checked the CPU; lengths are handled
        // inside.
        unsafe { dot_avx2(a, b) }
    }

    /// [`super::quantize_blocks`]'s blocks, eight values to a register:
    /// the same operations as [`super::quantize_slice`] on each value (a
    /// division, a clamp, rounding half away from zero), so the same bits.
    ///
    /// # Safety
    /// The CPU has AVX2; `values` and `parts` hold the same whole number
    /// of blocks.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_blocks(values: &[f32], parts: &mut [i8], scales: &mut Vec<f32>) {
        const _: () = assert!(super::BLOCK == 32);
        let magnitude = _mm256_set1_ps(f32::from_bits(0x7fff_ffff));
        let infinity = _mm256_set1_ps(f32::INFINITY);
        for (block, out) in values.chunks_exact(32).zip(parts.chunks_exact_mut(32)) {
            // SAFETY: a block is 32 values: four loads of eight.
            let x: [__m256; 4] =
                std::array::from_fn(|k| unsafe { _mm256_loadu_ps(block.as_ptr().add(8 * k)) });
            // Per lane the largest finite magnitude, as the scalar lanes
            // keep it; NaN fails both comparisons.
            let mut lanes = _mm256_setzero_ps();
            for v in x {
                let m = _mm256_and_ps(v, magnitude);
                let larger = _mm256_and_ps(
                    _mm256_cmp_ps::<_CMP_GT_OQ>(m, lanes),
                    _mm256_cmp_ps::<_CMP_LT_OQ>(m, infinity),
                );
                lanes = _mm256_blendv_ps(lanes, m, larger);
            }
            // Finite and not negative: the largest lane whatever the order.
            let half = _mm_max_ps(
                _mm256_castps256_ps128(lanes),
                _mm256_extractf128_ps(lanes, 1),
            );
            let quarter = _mm_max_ps(half, _mm_movehl_ps(half, half));
            let largest = _mm_cvtss_f32(_mm_max_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1)));
            if largest == 0.0 {
                out.fill(0);
                scales.push(0.0);
                continue;
            }
            let scale = largest / 127.0;
            let whole = x.map(|v| rounded(v, scale, magnitude, infinity));
            let pairs = [
                _mm256_packs_epi32(whole[0], whole[1]),
                _mm256_packs_epi32(whole[2], whole[3]),
            ];
            // The packs interleave the halves of the registers: put the
            // groups of four parts back in order.
            let bytes = _mm256_permutevar8x32_epi32(
                _mm256_packs_epi16(pairs[0], pairs[1]),
                _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7),
            );
            // SAFETY: `out` is 32 bytes.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), bytes) };
            scales.push(scale);
        }
    }

    /// Eight values over `scale`, clamped to ±127 and rounded half away
    /// from zero; a non-finite value (or a NaN quotient) gives 0.
    #[target_feature(enable = "avx2")]
    fn rounded(v: __m256, scale: f32, magnitude: __m256, infinity: __m256) -> __m256i {
        let finite = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(v, magnitude), infinity);
        let q = _mm256_div_ps(v, _mm256_set1_ps(scale));
        let clamped = _mm256_min_ps(
            _mm256_max_ps(q, _mm256_set1_ps(-127.0)),
            _mm256_set1_ps(127.0),
        );
        let kept = _mm256_and_ps(finite, _mm256_cmp_ps::<_CMP_ORD_Q>(q, q));
        let scaled = _mm256_and_ps(clamped, kept);
        let whole = _mm256_cvttps_epi32(scaled);
        let rest = _mm256_sub_ps(scaled, _mm256_cvtepi32_ps(whole));
        // The masks are -1 where true: up is minus the first, down plus
        // the second.
        let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(rest, _mm256_set1_ps(0.5)));
        let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(rest, _mm256_set1_ps(-0.5)));
        _mm256_add_epi32(_mm256_sub_epi32(whole, up), down)
    }

    #[target_feature(enable = "avx2")]
    unsafe fn dot_avx2(a: &[i8], b: &[i8]) -> i32 {
        let n = a.len().min(b.len());
        let whole = n - n % 16;
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        while i < whole {
            // SAFETY: 16 bytes from `i` are within both slices.
            let (x, y) = unsafe {
                (
                    _mm_loadu_si128(a.as_ptr().add(i).cast()),
                    _mm_loadu_si128(b.as_ptr().add(i).cast()),
                )
            };
            // Widened to i16, multiplied and summed in pairs to i32: exact.
            let products = _mm256_madd_epi16(_mm256_cvtepi8_epi16(x), _mm256_cvtepi8_epi16(y));
            acc = _mm256_add_epi32(acc, products);
            i += 16;
        }
        let halves = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256(acc, 1),
        );
        let pairs = _mm_add_epi32(halves, _mm_shuffle_epi32(halves, 0b01_00_11_10));
        let one = _mm_add_epi32(pairs, _mm_shuffle_epi32(pairs, 0b10_11_00_01));
        let mut total = _mm_cvtsi128_si32(one);
        for k in whole..n {
            total += i32::from(a[k]) * i32::from(b[k]);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    #[test]
    fn quantized_dot_products_are_within_a_percent_of_the_float_ones() {
        // Deterministic pseudo-random unit vectors of 384 parts.
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2001) as f32 / 1000.0 - 1.0
        };
        for _ in 0..50 {
            let a = unit((0..384).map(|_| next()).collect());
            let b = unit((0..384).map(|_| next() + 0.3 * a[0]).collect());
            let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let approx = Quantized::new(&a).dot(&Quantized::new(&b));
            assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        }
    }

    #[test]
    fn the_stored_form_round_trips_and_bad_bytes_are_refused() {
        let q = Quantized::new(&[0.5, -1.0, 0.25, 0.0]);
        assert_eq!(q.parts, vec![64, -127, 32, 0]);
        assert_eq!(Quantized::from_bytes(&q.to_bytes()), Some(q));
        assert_eq!(Quantized::from_bytes(&[1, 2]), None);
        assert_eq!(Quantized::from_bytes(&f32::NAN.to_le_bytes()), None);
        let zero = Quantized::new(&[0.0, 0.0]);
        assert_eq!(zero.dot(&zero), 0.0);
    }

    #[test]
    fn blocks_are_cut_as_each_block_alone_in_both_compilations() {
        let values: Vec<f32> = crate::blocks::tests::values(32 * 12 + 5, 4)
            .into_iter()
            .enumerate()
            .map(|(i, v)| match i {
                40 => f32::NAN,
                41 => f32::INFINITY,
                _ if (64..96).contains(&i) => 0.0,
                _ => v * 3.0,
            })
            .collect();
        let mut want = (Vec::new(), Vec::new());
        for block in values.chunks_exact(BLOCK) {
            want.1.push(quantize_into(block, &mut want.0));
        }
        let cut = || {
            let mut got = (vec![7i8], vec![7f32]);
            quantize_blocks(&values, &mut got.0, &mut got.1);
            got
        };
        let (wide, portable) = (cut(), crate::wide::portable(cut));
        assert_eq!(wide, portable);
        assert_eq!(wide.0[1..], want.0[..]);
        assert_eq!(wide.1[1..], want.1[..]);
        assert_eq!(wide.1.len(), 1 + 12, "the partial block is left out");
        assert_eq!(wide.1[3], 0.0, "an all-zero block");
    }

    #[test]
    fn the_vector_cut_gives_the_scalar_bits_on_edge_values() {
        // Blocks whose quotients land on and beside halves, a block whose
        // largest magnitude is so small its scale is 0 (quotients of ±inf
        // and NaN), negative zeros, infinities and NaN beside the largest.
        let mut values = Vec::new();
        for k in 0..BLOCK {
            values.push(127.0 - k as f32 * 0.5);
        }
        for k in 0..BLOCK {
            let half = (k as f32 - 16.0) + 0.5;
            values.push(if k % 3 == 0 { half } else { -half.next_down() });
        }
        values.extend([f32::from_bits(1), -f32::from_bits(1), 0.0, -0.0].repeat(BLOCK / 4));
        for k in 0..BLOCK {
            values.push(match k % 4 {
                0 => f32::NEG_INFINITY,
                1 => f32::NAN,
                2 => -0.0,
                _ => k as f32 * 1.0e-3,
            });
        }
        values.extend(
            crate::blocks::tests::values(BLOCK * 8, 9)
                .iter()
                .map(|v| v * 1.0e6),
        );
        let cut = || {
            let mut got = (Vec::new(), Vec::new());
            quantize_blocks(&values, &mut got.0, &mut got.1);
            got
        };
        let (wide, portable) = (cut(), crate::wide::portable(cut));
        assert_eq!(wide.0, portable.0);
        let bits = |scales: &[f32]| scales.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&wide.1), bits(&portable.1));
        assert_eq!(wide.1[2], 0.0, "a scale too small for f32");
        assert_eq!(wide.0[64..68], [127, -127, 0, 0]);
    }

    #[test]
    fn rounding_by_hand_is_rounding_half_away_from_zero() {
        let mut x = -127.0f32;
        while x <= 127.0 {
            assert_eq!(round_half_away(x), x.round() as i8, "{x}");
            x += 0.125;
        }
        for x in [0.49999997f32, -0.49999997, 0.5, -0.5, 126.5, -126.5, 127.0] {
            assert_eq!(round_half_away(x), x.round() as i8, "{x}");
        }
    }

    #[test]
    fn the_integer_dot_product_covers_every_part() {
        let a: Vec<i8> = (0..37).map(|i| (i % 11) as i8 - 5).collect();
        let b: Vec<i8> = (0..37).map(|i| ((i * 7) % 255 - 127) as i8).collect();
        let naive: i32 = a.iter().zip(&b).map(|(x, y)| *x as i32 * *y as i32).sum();
        assert_eq!(dot_i8(&a, &b), naive);
        assert_eq!(dot_portable(&a, &b), naive);
    }

    #[test]
    fn every_kernel_and_the_batched_form_give_the_exact_sums() {
        // The extremes: -128 and 127 everywhere give the largest sums.
        for len in [0, 1, 15, 16, 17, 384, 385] {
            let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 256) as u8 as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| ((i * 91 + 5) % 256) as u8 as i8).collect();
            let naive: i32 = a.iter().zip(&b).map(|(x, y)| *x as i32 * *y as i32).sum();
            assert_eq!(dot_i8(&a, &b), naive, "{len}");
            let lows = vec![-128i8; len];
            assert_eq!(dot_i8(&lows, &lows), 16_384 * len as i32, "{len}");
        }
        let query: Vec<i8> = (0..48).map(|i| (i * 5 % 255) as u8 as i8).collect();
        let rows: Vec<i8> = (0..48 * 3 + 7).map(|i| (i * 3 % 200) as i8).collect();
        let mut out = vec![99];
        dots_i8(&query, &rows, &mut out);
        let expected: Vec<i32> = std::iter::once(99)
            .chain(rows.chunks_exact(48).map(|r| dot_portable(&query, r)))
            .collect();
        assert_eq!(out, expected);
    }
}
