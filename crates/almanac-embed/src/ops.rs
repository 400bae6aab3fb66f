//! The steps of a forward pass over plain rows of floats: layer norm,
//! self-attention, GELU. A query is a handful of tokens; at that size the
//! set-up of tensor operations (shapes, allocations, the product routines'
//! thread and cache checks) costs as much as their arithmetic, so a
//! single text's pass runs on slices instead.
//!
//! Invariants:
//! * Each step computes what the tensor pass computes for one unpadded
//!   text, in f32, up to the order of float additions.
//! * Rows are `width` values one after another; a partial last row is
//!   left alone.

use crate::wide::{dot, sum_by, wide_fn};

/// A layer norm's weights as plain floats.
pub(crate) struct Norm {
    pub(crate) weight: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) eps: f32,
}

impl Norm {
    /// Each row of `x` (rows of the weight's width) normalised to mean 0
    /// and variance 1, then scaled and shifted.
    pub(crate) fn apply(&self, x: &mut [f32]) {
        norm_rows(&self.weight, &self.bias, self.eps, x);
    }
}

wide_fn! {
    /// [`Norm::apply`]'s arithmetic.
    fn norm_rows(weight: &[f32], bias: &[f32], eps: f32, x: &mut [f32]) {
        let width = weight.len();
        if width == 0 {
            return;
        }
        for row in x.chunks_exact_mut(width) {
            let mean = sum_by(row, |v| v) / width as f32;
            let variance = sum_by(row, |v| (v - mean) * (v - mean)) / width as f32;
            let inverse = 1.0 / (variance + eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(weight).zip(bias) {
                *v = (*v - mean) * inverse * w + b;
            }
        }
    }
}

wide_fn! {
    /// Scaled dot-product self-attention of one text of `tokens` rows:
    /// `q`, `k` and `v` hold `heads` heads side by side in each row; each
    /// head's context goes to the same place in `out`.
    pub(crate) fn attention(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        tokens: usize,
        heads: usize,
        out: &mut [f32],
    ) {
        let width = q.len() / tokens.max(1);
        if heads == 0 || width == 0 || !width.is_multiple_of(heads) {
            return;
        }
        let head = width / heads;
        let scale = 1.0 / (head as f32).sqrt();
        let mut weights = vec![0f32; tokens];
        for h in 0..heads {
            let part = |rows: &[f32], i: usize| -> std::ops::Range<usize> {
                let start = i * width + h * head;
                debug_assert!(start + head <= rows.len());
                start..start + head
            };
            for i in 0..tokens {
                let qi = &q[part(q, i)];
                let mut largest = f32::NEG_INFINITY;
                for (j, w) in weights.iter_mut().enumerate() {
                    let kj = &k[part(k, j)];
                    *w = dot(qi, kj) * scale;
                    largest = largest.max(*w);
                }
                let mut total = 0.0;
                for w in weights.iter_mut() {
                    *w = (*w - largest).exp();
                    total += *w;
                }
                let range = part(out, i);
                let oi = &mut out[range];
                oi.fill(0.0);
                for (j, w) in weights.iter().enumerate() {
                    let share = w / total;
                    for (o, x) in oi.iter_mut().zip(&v[part(v, j)]) {
                        *o += share * x;
                    }
                }
            }
        }
    }
}

wide_fn! {
    /// GELU with the exact (erf) form, `x·(1 + erf(x/√2))/2`, in place.
    pub(crate) fn gelu(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2)) / 2.0;
        }
    }
}

/// The error function to within 5e-7 (1e-7 in exact arithmetic; f32
/// rounding adds the rest near ±4): an odd rational function of `x`
/// clamped to ±4 (beyond which erf is ±1 in f32). Plain arithmetic that
/// vectorises, where the library's erf branches value by value (and
/// `mul_add` would be a library call on baseline x86-64).
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    // A NaN stays NaN.
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = -2.726_142_3e-10_f32;
    let p = p * x2 + 2.770_681_4e-8;
    let p = p * x2 - 2.101_024e-6;
    let p = p * x2 - 5.692_506_4e-5;
    let p = p * x2 - 7.349_906_3e-4;
    let p = p * x2 - 2.954_6e-3;
    let p = p * x2 - 1.609_603_3e-2;
    let q = -1.456_607_2e-5_f32;
    let q = q * x2 - 2.133_740_6e-4;
    let q = q * x2 - 1.682_827e-3;
    let q = q * x2 - 7.373_329e-3;
    let q = q * x2 - 1.426_474e-2;
    x * p / q
}

wide_fn! {
    /// `into += from`, element by element.
    pub(crate) fn add(into: &mut [f32], from: &[f32]) {
        for (a, b) in into.iter_mut().zip(from) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    /// Values in [-4, 4]: GELU's and erf's interesting range.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        crate::blocks::tests::values(n, seed)
            .into_iter()
            .map(|v| v * 4.0)
            .collect()
    }

    fn close(got: &[f32], want: &[f32], tolerance: f32) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= tolerance, "at {i}: {g} vs {w}");
        }
    }

    #[test]
    fn both_compilations_give_the_same_bits() {
        let (tokens, heads, head) = (9, 12, 32);
        let width = heads * head;
        let (q, k, v) = (
            values(tokens * width, 1),
            values(tokens * width, 2),
            values(tokens * width, 3),
        );
        let norm = Norm {
            weight: values(width, 7),
            bias: values(width, 9),
            eps: 1e-12,
        };
        let run = || {
            let mut out = vec![0f32; tokens * width];
            attention(&q, &k, &v, tokens, heads, &mut out);
            norm.apply(&mut out);
            add(&mut out, &q);
            gelu(&mut out);
            out.iter().map(|x| x.to_bits()).collect::<Vec<u32>>()
        };
        assert_eq!(run(), crate::wide::portable(run));
    }

    #[test]
    fn erf_matches_the_library_to_float_precision() {
        let table = [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-1.0, -0.842_700_8),
            (2.0, 0.995_322_3),
            (3.5, 0.999_999_3),
            (4.0, 0.999_999_98),
            (9.0, 1.0),
            (-30.0, -1.0),
        ];
        for (x, want) in table {
            assert!((erf(x) - want).abs() < 2e-7, "erf({x}) = {}", erf(x));
        }
        assert!(erf(f32::NAN).is_nan());
        // Against candle's erf over a fine grid.
        let xs: Vec<f32> = (-6000..=6000).map(|i| i as f32 / 1000.0).collect();
        let want = Tensor::new(xs.as_slice(), &Device::Cpu)
            .unwrap()
            .erf()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let got: Vec<f32> = xs.iter().map(|x| erf(*x)).collect();
        close(&got, &want, 5e-7);
    }

    #[test]
    fn gelu_matches_the_tensor_form() {
        let x = values(4096, 3);
        let want = Tensor::new(x.as_slice(), &Device::Cpu)
            .unwrap()
            .gelu_erf()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let mut got = x.clone();
        gelu(&mut got);
        close(&got, &want, 2e-6);
    }

    #[test]
    fn layer_norm_matches_the_tensor_form() {
        let (rows, width) = (5, 48);
        let x = values(rows * width, 5);
        let weight = values(width, 7);
        let bias = values(width, 9);
        let tensor =
            |v: &[f32], shape: &[usize]| Tensor::from_vec(v.to_vec(), shape, &Device::Cpu).unwrap();
        let norm =
            candle_nn::LayerNorm::new(tensor(&weight, &[width]), tensor(&bias, &[width]), 1e-12);
        let want = candle_core::Module::forward(&norm, &tensor(&x, &[rows, width]))
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let mut got = x.clone();
        Norm {
            weight,
            bias,
            eps: 1e-12,
        }
        .apply(&mut got);
        close(&got, &want, 1e-4);
    }

    #[test]
    fn attention_matches_the_tensor_form() {
        for (tokens, heads, head) in [(1, 1, 4), (7, 3, 8), (12, 12, 32)] {
            let width = heads * head;
            let (q, k, v) = (
                values(tokens * width, 1),
                values(tokens * width, 2),
                values(tokens * width, 3),
            );
            let split = |x: &[f32]| {
                Tensor::from_vec(x.to_vec(), (1, tokens, heads, head), &Device::Cpu)
                    .unwrap()
                    .transpose(1, 2)
                    .unwrap()
                    .contiguous()
                    .unwrap()
            };
            let (tq, tk, tv) = (split(&q), split(&k), split(&v));
            let scores =
                (tq.matmul(&tk.t().unwrap()).unwrap() * (1.0 / (head as f64).sqrt())).unwrap();
            let weights = candle_nn::ops::softmax_last_dim(&scores).unwrap();
            let want = weights
                .matmul(&tv)
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let mut got = vec![f32::NAN; tokens * width];
            attention(&q, &k, &v, tokens, heads, &mut got);
            close(&got, &want, 1e-4);
        }
    }
}
