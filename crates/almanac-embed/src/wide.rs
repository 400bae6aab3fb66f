//! One body, two compilations: as built (baseline x86-64 keeps floats
//! four to a register) and for AVX2 (eight), the second run when the CPU
//! has it. A query's pass spends a good part of its time in steps that run
//! on one thread (layer norms, GELU, attention); in eight-wide registers
//! they take about half as long. Cutting activations into int8 blocks,
//! which the compiler does not vectorise, has explicit AVX2 code in
//! `quantize`, held to the same bits.
//!
//! Invariants:
//! * Both compilations run the same operations in the same order (no
//!   fused multiply-adds, no reordered sums): they give the same bits.
//! * The AVX2 one runs only after the CPU was checked for it.

/// `fn name(args) -> ret { body }`, its body compiled twice (see the
/// module). Free functions only; references with elided lifetimes are
/// fine.
macro_rules! wide_fn {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    body($($arg),*)
                }
                if $crate::wide::avx2_here() {
                    // SAFETY: the CPU has AVX2, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

pub(crate) use wide_fn;

/// Whether the AVX2 compilations run here (tests may ask for the other on
/// their thread: [`portable`]).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_here() -> bool {
    #[cfg(test)]
    if PORTABLE.get() {
        return false;
    }
    std::arch::is_x86_feature_detected!("avx2")
}

#[cfg(all(test, target_arch = "x86_64"))]
thread_local! {
    static PORTABLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` run with the compilations as built, on this thread.
#[cfg(test)]
pub(crate) fn portable<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    PORTABLE.set(true);
    let result = f();
    #[cfg(target_arch = "x86_64")]
    PORTABLE.set(false);
    result
}

/// Lanes of the sums below: a whole AVX2 register of f32.
const LANES: usize = 8;

/// `Σ f(x)` over `xs`, added in [`LANES`] running sums (which vectorise,
/// where one running sum is a chain of dependent additions), then those
/// in a fixed order, then the remainder.
#[inline(always)]
pub(crate) fn sum_by(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in chunks.by_ref() {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            *lane += f(*x);
        }
    }
    let mut total = folded(lanes);
    for x in chunks.remainder() {
        total += f(*x);
    }
    total
}

/// `Σ a·b` over two slices (the shorter length), as [`sum_by`] adds.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut lanes = [0f32; LANES];
    let mut pairs = a.chunks_exact(LANES).zip(b.chunks_exact(LANES));
    for (x, y) in pairs.by_ref() {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    let whole = n - n % LANES;
    let mut total = folded(lanes);
    for (x, y) in a[whole..].iter().zip(&b[whole..]) {
        total += x * y;
    }
    total
}

/// The lanes added pairwise: (0+4, 1+5, 2+6, 3+7), then halves again.
#[inline(always)]
fn folded(lanes: [f32; LANES]) -> f32 {
    let quarter: [f32; 4] = std::array::from_fn(|i| lanes[i] + lanes[i + 4]);
    (quarter[0] + quarter[2]) + (quarter[1] + quarter[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    wide_fn! {
        fn doubled_sum(xs: &[f32]) -> f32 {
            sum_by(xs, |x| 2.0 * x)
        }
    }

    #[test]
    fn sums_cover_every_value_in_either_compilation() {
        for n in [0, 1, 7, 8, 9, 31, 384] {
            let xs: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
            let want: f32 = xs.iter().map(|x| 2.0 * x).sum();
            assert_eq!(doubled_sum(&xs), want, "{n}");
            assert_eq!(portable(|| doubled_sum(&xs)), want, "{n}");
            assert_eq!(sum_by(&xs, |x| 2.0 * x), want, "{n}");
            let ones = vec![1.0; n];
            assert_eq!(dot(&xs, &ones), xs.iter().sum::<f32>(), "{n}");
            assert_eq!(dot(&xs, &ones[..n / 2]), xs[..n / 2].iter().sum::<f32>());
        }
    }
}
