//! SIMD abstraction for the CPU kernels: one `Simd` trait with an AVX-512, an AVX2+FMA and a
//! portable one-lane implementation, the element types (`f32`, `f16`, `bf16`) that load into
//! f32 lanes and store back rounded to nearest even, and run-time feature detection.
//!
//! Rationale: kernels are written once, generic over `S: Simd` and `T: Elem`, as
//! `#[inline(always)]` bodies; `multiversion!` instantiates each body inside a
//! `#[target_feature]` wrapper per level, so the intrinsics inline into code compiled for that
//! level (the always-inliner runs before the ordinary inliner), and picks one at run time.
//! Tails (fewer than `S::LANES` elements) run the same body with `Scalar`.

use std::sync::atomic::{AtomicU8, Ordering};

use half::{bf16, f16};

/// The instruction-set level the kernels run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Portable code (one lane at a time; LLVM may still vectorise it with SSE2).
    Scalar = 1,
    /// AVX2 + FMA + F16C, 8 f32 lanes.
    Avx2 = 2,
    /// AVX-512 F/BW/VL/DQ, 16 f32 lanes.
    Avx512 = 3,
    /// AVX-512 as above plus AVX512_BF16: bf16 stores round in hardware (`vcvtneps2bf16`),
    /// except blocks that hold a subnormal value.
    Avx512Bf16 = 4,
}

static LEVEL: AtomicU8 = AtomicU8::new(0);

fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        let forced = std::env::var("ANYFFI_SIMD").ok();
        let avx512 = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c");
        let avx2 = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c");
        let best = if avx512 && is_x86_feature_detected!("avx512bf16") {
            Level::Avx512Bf16
        } else if avx512 {
            Level::Avx512
        } else if avx2 {
            Level::Avx2
        } else {
            Level::Scalar
        };
        match forced.as_deref() {
            Some("scalar") => Level::Scalar,
            Some("avx2") if avx2 => Level::Avx2,
            Some("avx512") if avx512 => Level::Avx512,
            _ => best,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Level::Scalar
    }
}

/// The level in use: the best the CPU supports, lowered by `ANYFFI_SIMD=avx512|avx2|scalar`.
#[inline]
pub fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        1 => Level::Scalar,
        2 => Level::Avx2,
        3 => Level::Avx512,
        4 => Level::Avx512Bf16,
        _ => {
            let l = detect();
            LEVEL.store(l as u8, Ordering::Relaxed);
            l
        }
    }
}

/// `Simd::LANES` of the level in use.
pub fn lanes() -> usize {
    match level() {
        Level::Scalar => 1,
        Level::Avx2 => 8,
        _ => 16,
    }
}

/// Forces a level (tests use it to run every path); a level the CPU lacks falls back to the best
/// one it has. Returns the level now in use.
pub fn force_level(want: Level) -> Level {
    // (no reset to 0 first: a kernel call on another thread would see 0, detect the best level
    // and store it after this store, undoing the forced level under a test holding `level_lock`)
    let best = detect();
    let l = if want <= best { want } else { best };
    LEVEL.store(l as u8, Ordering::Relaxed);
    l
}

/// Serialises the tests that switch levels with `force_level` or compare the bits of results
/// computed at the level in use: the level is one global, and `cargo test` runs tests on
/// several threads (one test switching levels made another's bit-exact comparison fail).
pub fn level_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `T` is `bf16` (the element type the pair-space paths serve).
#[inline(always)]
pub fn is_bf16<T: 'static>() -> bool {
    std::any::TypeId::of::<T>() == std::any::TypeId::of::<bf16>()
}

/// Copies `x` into `out` in the order `load_bf16_pairs` produces for `lanes`-wide vectors:
/// each block of `2 * lanes` becomes its even elements, then its odd ones. A tail shorter than
/// a block is copied unchanged.
pub fn pair_order(x: &[f32], out: &mut [f32], lanes: usize) {
    let block = 2 * lanes;
    let full = x.len() / block * block;
    for (src, dst) in x[..full]
        .chunks_exact(block)
        .zip(out[..full].chunks_exact_mut(block))
    {
        for j in 0..lanes {
            dst[j] = src[2 * j];
            dst[lanes + j] = src[2 * j + 1];
        }
    }
    out[full..x.len()].copy_from_slice(&x[full..]);
}

/// The inverse of `pair_order`.
pub fn pair_unorder(x: &[f32], out: &mut [f32], lanes: usize) {
    let block = 2 * lanes;
    let full = x.len() / block * block;
    for (src, dst) in x[..full]
        .chunks_exact(block)
        .zip(out[..full].chunks_exact_mut(block))
    {
        for j in 0..lanes {
            dst[2 * j] = src[j];
            dst[2 * j + 1] = src[lanes + j];
        }
    }
    out[full..x.len()].copy_from_slice(&x[full..]);
}

/// Coefficients of e^r = 1 + r + C2 r^2 + C3 r^3 + C4 r^4 + C5 r^5 on |r| <= ln(2) / 2, fitted
/// for the least maximum relative error (1.05e-7; 1.6e-7 with f32 arithmetic). A degree-7
/// polynomial (Cephes `expf`) was 1 ulp closer and cost two more FMAs per vector, which made
/// swiglu slower by 6-8% (performance log).
const EXP_C2: f32 = 4.999_923e-1;
const EXP_C3: f32 = 1.666_711_6e-1;
const EXP_C4: f32 = 4.189_033e-2;
const EXP_C5: f32 = 8.312_501e-3;

/// A vector of f32 lanes and the operations the kernels need.
///
/// # Safety
/// Implementations may only be instantiated (a value of the type created) once the CPU is known
/// to support their instructions, so the arithmetic methods are safe; the loads and stores are
/// `unsafe` because they access raw pointers.
pub unsafe trait Simd: Copy + Send + Sync + 'static {
    const LANES: usize;
    /// Vector registers the level has (register tiles are sized to fit without spilling).
    const REGISTERS: usize;
    type V: Copy;

    fn splat(self, x: f32) -> Self::V;
    /// # Safety
    /// `p` is readable for `LANES` floats.
    unsafe fn load(self, p: *const f32) -> Self::V;
    /// # Safety
    /// `p` is writable for `LANES` floats.
    unsafe fn store(self, p: *mut f32, v: Self::V);
    /// # Safety
    /// `p` is readable for `LANES` values.
    unsafe fn load_bf16(self, p: *const u16) -> Self::V;
    /// `2 * LANES` bf16 values as f32: `(p[0], p[2], ...)` and `(p[1], p[3], ...)`. Each
    /// 32-bit word holds one pair, so one shift and one mask widen twice the elements of
    /// `load_bf16` (for dot products whose other operand is stored in the same order, see
    /// `pair_order`).
    ///
    /// # Safety
    /// `p` is readable for `2 * LANES` values.
    unsafe fn load_bf16_pairs(self, p: *const u16) -> (Self::V, Self::V);
    /// Stores `2 * LANES` bf16 values given as `(even, odd)` lanes (the inverse of
    /// `load_bf16_pairs`), each rounded once to nearest even (NaN stays a quiet NaN).
    ///
    /// # Safety
    /// `p` is writable for `2 * LANES` values.
    unsafe fn store_bf16_pairs(self, p: *mut u16, even: Self::V, odd: Self::V);
    /// # Safety
    /// `p` is writable for `LANES` values.
    unsafe fn store_bf16(self, p: *mut u16, v: Self::V);
    /// # Safety
    /// `p` is readable for `LANES` values.
    unsafe fn load_f16(self, p: *const u16) -> Self::V;
    /// # Safety
    /// `p` is writable for `LANES` values.
    unsafe fn store_f16(self, p: *mut u16, v: Self::V);
    /// As `store`, with a non-temporal hint (the line bypasses the caches, so no
    /// read-for-ownership) when `p` is aligned to the vector size; misaligned, a plain store.
    /// Worth it only for outputs much larger than the caches; `fence` must run before the
    /// data is handed to another thread.
    ///
    /// # Safety
    /// As the matching store.
    #[inline(always)]
    unsafe fn stream(self, p: *mut f32, v: Self::V) {
        // SAFETY: forwarded contract.
        unsafe { self.store(p, v) }
    }
    /// `store_bf16` with the hint of `stream`.
    ///
    /// # Safety
    /// As the matching store.
    #[inline(always)]
    unsafe fn stream_bf16(self, p: *mut u16, v: Self::V) {
        // SAFETY: forwarded contract.
        unsafe { self.store_bf16(p, v) }
    }
    /// `store_f16` with the hint of `stream`.
    ///
    /// # Safety
    /// As the matching store.
    #[inline(always)]
    unsafe fn stream_f16(self, p: *mut u16, v: Self::V) {
        // SAFETY: forwarded contract.
        unsafe { self.store_f16(p, v) }
    }
    /// Orders earlier non-temporal stores before later stores (`sfence`).
    #[inline(always)]
    fn fence(self) {}
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c` (fused where the level has FMA).
    fn fma(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    /// Round to nearest, ties to even.
    fn round(self, a: Self::V) -> Self::V;
    fn floor(self, a: Self::V) -> Self::V;
    /// Each lane's bits shifted left by 23 (as u32): turns `1.5 * 2^23 + 127 + n`, an f32
    /// holding the integer n in [-126, 127] in its low mantissa bits, into `2^n`.
    fn shl23(self, t: Self::V) -> Self::V;
    fn reduce_sum(self, v: Self::V) -> f32;
    fn reduce_max(self, v: Self::V) -> f32;

    /// Whether `square_bf16_pairs` runs in one `vdpbf16ps` (AVX512_BF16).
    const DPBF16: bool = false;
    /// `acc` plus, per lane, the squares of the bf16 pair at `p` (`2 * LANES` values, read as
    /// `vdpbf16ps` reads them: a subnormal input counts as zero, and a sum below the smallest
    /// normal f32 becomes zero). Without `DPBF16`, two widening FMAs (which keep subnormals).
    ///
    /// # Safety
    /// `p` is readable for `2 * LANES` values.
    #[inline(always)]
    unsafe fn square_bf16_pairs(self, acc: Self::V, p: *const u16) -> Self::V {
        // SAFETY: forwarded contract.
        unsafe { square_bf16_pairs_widening(self, acc, p) }
    }

    /// Lane `t` of the result is the sum of the lanes of `v[t]` (`v.len() == LANES`).
    #[inline(always)]
    fn reduce_lanes(self, v: &[Self::V]) -> Self::V {
        let mut sums = [0f32; 16];
        for (t, x) in v.iter().enumerate().take(Self::LANES) {
            sums[t] = self.reduce_sum(*x);
        }
        // SAFETY: at least LANES readable floats.
        unsafe { self.load(sums.as_ptr()) }
    }

    /// e^x, relative error below 2.5e-7, about 2 ulp (polynomial `EXP_C2`..`EXP_C5`); the input
    /// is clamped to [-87, 89], so e^-inf gives about 1.6e-38 instead of 0, and e^x overflows
    /// to +inf from x = 88.38 here (2^128; the true overflow is at 88.72), as `silu` wants:
    /// x / (1 + e^-x) is then -0 for very negative x instead of a small non-zero quotient. NaN
    /// stays NaN. The AVX-512 version (`vscalefps`) and the scalar one (`exp_poly`, the
    /// vector bodies' tails) overflow exactly where e^x does; making this one do so costs an
    /// FMA-pipe operation (swiglu f32 1.05x the time on AVX2), for a window of x where only an
    /// astronomically large `up` makes swiglu's result differ.
    ///
    /// n = round(x log2 e) comes from one FMA with the "magic" constant 1.5 * 2^23 + 127: the
    /// sum is rounded to an integer by the FMA itself, and its low mantissa bits hold n + 127,
    /// which `shl23` moves into the exponent field to make 2^n (no round or convert
    /// instructions).
    #[inline(always)]
    fn exp(self, x: Self::V) -> Self::V {
        exp_poly(self, x, false)
    }

    /// `exp(-x)`, the same bits (levels may fold the negation into the range reduction).
    #[inline(always)]
    fn exp_neg(self, x: Self::V) -> Self::V {
        self.exp(self.sub(self.splat(0.0), x))
    }

    /// (sin x, cos x) for f32 `x` with |x| up to about 1e6: Cody-Waite reduction by pi/2 in two
    /// FMA steps (absolute error about 1e-7), Cephes `sinf`/`cosf` polynomials, quadrant by
    /// arithmetic selection (no masks, so every level shares this code).
    #[inline(always)]
    fn sin_cos(self, x: Self::V) -> (Self::V, Self::V) {
        let k = self.round(self.mul(x, self.splat(std::f32::consts::FRAC_2_PI)));
        let r = self.fma(k, self.splat(-1.570_796_4), x);
        let r = self.fma(k, self.splat(4.371_139e-8), r);
        let z = self.mul(r, r);
        let mut ps = self.splat(-1.951_529_6e-4);
        ps = self.fma(ps, z, self.splat(8.332_161e-3));
        ps = self.fma(ps, z, self.splat(-1.666_665_5e-1));
        let s = self.fma(self.mul(ps, z), r, r);
        let mut pc = self.splat(2.443_315_7e-5);
        pc = self.fma(pc, z, self.splat(-1.388_731_6e-3));
        pc = self.fma(pc, z, self.splat(4.166_664_6e-2));
        let c = self.add(
            self.fma(self.mul(pc, z), z, self.mul(z, self.splat(-0.5))),
            self.splat(1.0),
        );
        // quadrant q = k mod 4 = 2*hi + odd
        let q = self.sub(
            k,
            self.mul(self.floor(self.mul(k, self.splat(0.25))), self.splat(4.0)),
        );
        let hi = self.floor(self.mul(q, self.splat(0.5)));
        let odd = self.sub(q, self.add(hi, hi));
        let even = self.sub(self.splat(1.0), odd);
        let sign = self.sub(self.splat(1.0), self.add(hi, hi));
        let sin = self.mul(self.fma(s, even, self.mul(c, odd)), sign);
        let cos = self.mul(self.sub(self.mul(c, even), self.mul(s, odd)), sign);
        (sin, cos)
    }
}

/// `Simd::square_bf16_pairs` without `vdpbf16ps`: both halves widened, two FMAs.
///
/// # Safety
/// `p` is readable for `2 * LANES` values.
#[inline(always)]
unsafe fn square_bf16_pairs_widening<S: Simd>(s: S, acc: S::V, p: *const u16) -> S::V {
    // SAFETY: forwarded contract.
    let (e, o) = unsafe { s.load_bf16_pairs(p) };
    s.fma(o, o, s.fma(e, e, acc))
}

/// One lane at a time, portable.
#[derive(Clone, Copy, Debug)]
pub struct Scalar;

/// The polynomial e^x behind `Simd::exp` (`exact_overflow` false) and the scalar level's exp
/// (true), which overflows exactly where e^x does (x > 88.72), as the AVX-512 version: 2^n is
/// then built as 2^(n-1) (magic constant 1.5 * 2^23 + 126) against a polynomial with doubled
/// coefficients, since 2^(n-1) is finite up to n = 128, where 2^n is not, and the input is
/// clamped to [-86.95, 89] (-87 would round to n = -126, whose 2^(n-1) is not a normal
/// number). The scalar level serves the vector bodies' tails, which so agree with the AVX-512
/// bodies. `exact_overflow` is a literal at both calls: the choice folds away.
#[inline(always)]
fn exp_poly<S: Simd>(s: S, x: S::V, exact_overflow: bool) -> S::V {
    let (lo, bias, k) = if exact_overflow {
        (-86.95, 126.0, 2.0)
    } else {
        (-87.0, 127.0, 1.0)
    };
    let magic: f32 = 12_582_912.0 + bias;
    // x second in max/min: x86 max/min return their second operand when one is NaN
    let x = s.min(s.splat(89.0), s.max(s.splat(lo), x));
    let t = s.fma(x, s.splat(std::f32::consts::LOG2_E), s.splat(magic));
    let n = s.sub(t, s.splat(magic));
    let r = s.fma(n, s.splat(-0.693_359_4), x);
    let r = s.fma(n, s.splat(2.121_944_4e-4), r);
    // Estrin's scheme: the degree-5 polynomial in 3 dependent steps instead of 5.
    let r2 = s.mul(r, r);
    let r4 = s.mul(r2, r2);
    let p01 = s.fma(r, s.splat(k), s.splat(k));
    let p23 = s.fma(r, s.splat(k * EXP_C3), s.splat(k * EXP_C2));
    let p45 = s.fma(r, s.splat(k * EXP_C5), s.splat(k * EXP_C4));
    let p = s.fma(r4, p45, s.fma(r2, p23, p01));
    s.mul(p, s.shl23(t))
}

// SAFETY: plain Rust arithmetic; only the pointer accesses need the caller's guarantees.
unsafe impl Simd for Scalar {
    const LANES: usize = 1;
    const REGISTERS: usize = 16;
    type V = f32;

    #[inline(always)]
    fn exp(self, x: f32) -> f32 {
        exp_poly(self, x, true)
    }

    #[inline(always)]
    fn splat(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> f32 {
        // SAFETY: the caller passes a readable pointer.
        unsafe { p.read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: f32) {
        // SAFETY: the caller passes a writable pointer.
        unsafe { p.write_unaligned(v) }
    }
    #[inline(always)]
    unsafe fn load_bf16(self, p: *const u16) -> f32 {
        // SAFETY: as above.
        bf16::from_bits(unsafe { p.read_unaligned() }).to_f32()
    }
    #[inline(always)]
    unsafe fn load_bf16_pairs(self, p: *const u16) -> (f32, f32) {
        // SAFETY: two readable u16 (caller).
        unsafe { (self.load_bf16(p), self.load_bf16(p.add(1))) }
    }
    #[inline(always)]
    unsafe fn store_bf16_pairs(self, p: *mut u16, even: f32, odd: f32) {
        // SAFETY: two writable u16 (caller).
        unsafe {
            self.store_bf16(p, even);
            self.store_bf16(p.add(1), odd);
        }
    }
    #[inline(always)]
    unsafe fn store_bf16(self, p: *mut u16, v: f32) {
        // SAFETY: as above.
        unsafe { p.write_unaligned(bf16::from_f32(v).to_bits()) }
    }
    #[inline(always)]
    unsafe fn load_f16(self, p: *const u16) -> f32 {
        // SAFETY: as above.
        f16::from_bits(unsafe { p.read_unaligned() }).to_f32()
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut u16, v: f32) {
        // SAFETY: as above.
        unsafe { p.write_unaligned(f16::from_f32(v).to_bits()) }
    }
    #[inline(always)]
    fn add(self, a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    fn div(self, a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    fn fma(self, a: f32, b: f32, c: f32) -> f32 {
        // Not fused: `mul_add` without hardware FMA is a slow libm call.
        a * b + c
    }
    #[inline(always)]
    fn max(self, a: f32, b: f32) -> f32 {
        if a > b {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn min(self, a: f32, b: f32) -> f32 {
        if a < b {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn round(self, a: f32) -> f32 {
        a.round_ties_even()
    }
    #[inline(always)]
    fn floor(self, a: f32) -> f32 {
        a.floor()
    }
    #[inline(always)]
    fn shl23(self, t: f32) -> f32 {
        f32::from_bits(t.to_bits() << 23)
    }
    #[inline(always)]
    fn reduce_sum(self, v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn reduce_max(self, v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn sin_cos(self, x: f32) -> (f32, f32) {
        // Without FMA the two-step reduction loses accuracy: do it in f64 (the argument is the
        // f32 angle, exactly representable).
        let (s, c) = (x as f64).sin_cos();
        (s as f32, c as f32)
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Simd;
    use std::arch::x86_64::*;

    /// AVX2 + FMA + F16C: 8 lanes.
    #[derive(Clone, Copy, Debug)]
    pub struct Avx2(());

    impl Avx2 {
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        pub unsafe fn new_unchecked() -> Self {
            Avx2(())
        }

        /// 8 lanes rounded to bf16 (nearest even; NaN becomes the quiet NaN 0x7fc0) in the
        /// upper half of each 32-bit lane.
        #[inline(always)]
        fn round_bf16_hi(self, v: __m256) -> __m256i {
            // SAFETY: AVX2 present (type invariant).
            unsafe {
                let b = _mm256_castps_si256(v);
                let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(b), _mm256_set1_epi32(1));
                let r = _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7fff)), lsb);
                let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000), nan)
            }
        }

        /// 8 lanes rounded to bf16 (nearest even; NaN becomes the quiet NaN 0x7fc0).
        #[inline(always)]
        fn pack_bf16(self, v: __m256) -> __m128i {
            // SAFETY: AVX2 present (type invariant).
            unsafe {
                let r = _mm256_srli_epi32::<16>(self.round_bf16_hi(v));
                _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r))
            }
        }
    }

    /// AVX-512 F/BW/VL/DQ + FMA + F16C: 16 lanes. With `BF16 = true` (the CPU also has
    /// AVX512_BF16), bf16 stores round with `vcvtneps2bf16` / `vcvtne2ps2bf16`: round to
    /// nearest even like the software path. The instructions flush values below the smallest
    /// normal (|x| < 1.2e-38) to zero, so a block holding one goes the software way.
    #[derive(Clone, Copy, Debug)]
    pub struct Avx512<const BF16: bool = false>(());

    impl<const BF16: bool> Avx512<BF16> {
        /// # Safety
        /// The CPU must support AVX-512 F/BW/VL/DQ, FMA and F16C (and AVX512_BF16 when `BF16`).
        pub unsafe fn new_unchecked() -> Self {
            Avx512(())
        }

        /// 16 lanes rounded to bf16 (nearest even; NaN stays a quiet NaN; subnormals kept).
        #[inline(always)]
        fn pack_bf16(self, v: __m512) -> __m256i {
            // In hardware unless a lane is subnormal, which the instruction would flush to zero.
            // SAFETY: AVX-512DQ (and AVX512_BF16 when BF16) present (type invariant).
            if BF16 && unsafe { _mm512_fpclass_ps_mask::<SUBNORMAL>(v) } == 0 {
                // SAFETY: as above.
                return unsafe { std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(v)) };
            }
            // SAFETY: AVX-512F/BW present (type invariant).
            unsafe { _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(self.round_bf16_hi(v))) }
        }

        /// 16 lanes rounded to bf16 in software (nearest even; NaN becomes the quiet NaN
        /// 0x7fc0) in the upper half of each 32-bit lane.
        #[inline(always)]
        fn round_bf16_hi(self, v: __m512) -> __m512i {
            // SAFETY: AVX-512F present (type invariant).
            unsafe {
                let b = _mm512_castps_si512(v);
                let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(b), _mm512_set1_epi32(1));
                let r = _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb);
                let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                _mm512_mask_blend_epi32(nan, r, _mm512_set1_epi32(0x7fc00000))
            }
        }
    }

    /// Whether no 16-bit word of `w` is zero apart from its sign bit (`vptestnmw`). In
    /// assembly: written with intrinsics, LLVM knew the words were bf16 conversions and
    /// "simplified" the test into a spill, two widenings and two float compares.
    ///
    /// # Safety
    /// The CPU must have AVX-512BW.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn no_zero_words(w: __m512i) -> bool {
        let zeros: u32;
        // SAFETY: AVX-512BW present (caller); registers only.
        unsafe {
            std::arch::asm!(
                "vptestnmw {k}, {w}, {m}",
                "kmovd {z:e}, {k}",
                k = out(kreg) _,
                w = in(zmm_reg) w,
                m = in(zmm_reg) _mm512_set1_epi16(0x7fff),
                z = out(reg) zeros,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        zeros == 0
    }

    /// The end of the AVX-512 `exp` and `exp_neg`: `r = x - n * c1` (the first step of the
    /// range reduction) to the second step, the polynomial, and `2^n` by `vscalefps`.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[inline(always)]
    unsafe fn exp512_finish(n: __m512, r: __m512) -> __m512 {
        // SAFETY: AVX-512F present (caller).
        unsafe {
            let r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.121_944_4e-4), r);
            let mut p = _mm512_set1_ps(super::EXP_C5);
            for c in [super::EXP_C4, super::EXP_C3, super::EXP_C2, 1.0, 1.0] {
                p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
            }
            _mm512_scalef_ps(p, n)
        }
    }

    const RNE: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    /// `vfpclassps` category: subnormal (denormal) values, which the bf16 conversions flush.
    const SUBNORMAL: i32 = 0x20;

    // SAFETY: a value exists only after detection (see `new_unchecked`); each method is one or a
    // few intrinsics of those features on unaligned pointers the caller vouches for.
    unsafe impl Simd for Avx2 {
        const LANES: usize = 8;
        const REGISTERS: usize = 16;
        type V = __m256;

        #[inline(always)]
        fn splat(self, x: f32) -> __m256 {
            // SAFETY: AVX is present (type invariant).
            unsafe { _mm256_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn load(self, p: *const f32) -> __m256 {
            // SAFETY: 8 readable floats (caller).
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32, v: __m256) {
            // SAFETY: 8 writable floats (caller).
            unsafe { _mm256_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn load_bf16(self, p: *const u16) -> __m256 {
            // SAFETY: 8 readable u16 (caller); AVX2 present.
            unsafe {
                let h = _mm_loadu_si128(p as *const __m128i);
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
            }
        }
        #[inline(always)]
        unsafe fn store_bf16_pairs(self, p: *mut u16, even: __m256, odd: __m256) {
            // SAFETY: 16 writable u16 (caller); AVX2 present.
            unsafe {
                let (e, o) = (self.round_bf16_hi(even), self.round_bf16_hi(odd));
                let w = _mm256_or_si256(
                    _mm256_srli_epi32::<16>(e),
                    _mm256_and_si256(o, _mm256_set1_epi32(0xffff0000u32 as i32)),
                );
                _mm256_storeu_si256(p as *mut __m256i, w)
            }
        }
        #[inline(always)]
        unsafe fn load_bf16_pairs(self, p: *const u16) -> (__m256, __m256) {
            // SAFETY: 16 readable u16 (caller); AVX2 present.
            unsafe {
                let w = _mm256_loadu_si256(p as *const __m256i);
                let odd = _mm256_and_si256(w, _mm256_set1_epi32(0xffff0000u32 as i32));
                (
                    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(w)),
                    _mm256_castsi256_ps(odd),
                )
            }
        }
        #[inline(always)]
        unsafe fn store_bf16(self, p: *mut u16, v: __m256) {
            // SAFETY: 8 writable u16 (caller); AVX2 present.
            unsafe { _mm_storeu_si128(p as *mut __m128i, self.pack_bf16(v)) }
        }
        // No `stream_bf16`/`stream_f16` override: 16-byte non-temporal stores of half-width
        // outputs ran 4-6x slower than plain stores on the EPYC VM (rope bf16 (512,4,4096)
        // 11.9 against 2.1 ms; performance log), so half types use the default plain store.
        #[inline(always)]
        unsafe fn load_f16(self, p: *const u16) -> __m256 {
            // SAFETY: 8 readable u16 (caller); F16C present.
            unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)) }
        }
        #[inline(always)]
        unsafe fn store_f16(self, p: *mut u16, v: __m256) {
            // SAFETY: 8 writable u16 (caller); F16C present.
            unsafe {
                _mm_storeu_si128(
                    p as *mut __m128i,
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v),
                )
            }
        }
        #[inline(always)]
        unsafe fn stream(self, p: *mut f32, v: __m256) {
            // SAFETY: 8 writable floats (caller), 32-byte aligned for the streaming store.
            unsafe {
                if (p as usize) % 32 == 0 {
                    _mm256_stream_ps(p, v)
                } else {
                    _mm256_storeu_ps(p, v)
                }
            }
        }
        #[inline(always)]
        fn fence(self) {
            // SAFETY: SSE is baseline on x86_64.
            unsafe { _mm_sfence() }
        }
        #[inline(always)]
        fn add(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_add_ps(a, b) }
        }
        #[inline(always)]
        fn sub(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_sub_ps(a, b) }
        }
        #[inline(always)]
        fn mul(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_mul_ps(a, b) }
        }
        #[inline(always)]
        fn div(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_div_ps(a, b) }
        }
        #[inline(always)]
        fn fma(self, a: __m256, b: __m256, c: __m256) -> __m256 {
            // SAFETY: FMA present.
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        fn max(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_max_ps(a, b) }
        }
        #[inline(always)]
        fn min(self, a: __m256, b: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_min_ps(a, b) }
        }
        #[inline(always)]
        fn round(self, a: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_round_ps::<RNE>(a) }
        }
        #[inline(always)]
        fn floor(self, a: __m256) -> __m256 {
            // SAFETY: AVX present.
            unsafe { _mm256_floor_ps(a) }
        }
        #[inline(always)]
        fn shl23(self, t: __m256) -> __m256 {
            // SAFETY: AVX2 present.
            unsafe { _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_castps_si256(t))) }
        }
        #[inline(always)]
        fn reduce_lanes(self, v: &[__m256]) -> __m256 {
            let v: &[__m256; 8] = v.try_into().expect("8 vectors");
            // SAFETY: AVX present (type invariant).
            unsafe {
                // Pairwise sums within each 128-bit half, then the two halves added: lane t
                // of the result sums the 8 lanes of v[t].
                let t0 = _mm256_hadd_ps(v[0], v[1]);
                let t1 = _mm256_hadd_ps(v[2], v[3]);
                let t2 = _mm256_hadd_ps(v[4], v[5]);
                let t3 = _mm256_hadd_ps(v[6], v[7]);
                let u0 = _mm256_hadd_ps(t0, t1);
                let u1 = _mm256_hadd_ps(t2, t3);
                _mm256_add_ps(
                    _mm256_permute2f128_ps::<0x20>(u0, u1),
                    _mm256_permute2f128_ps::<0x31>(u0, u1),
                )
            }
        }
        #[inline(always)]
        fn reduce_sum(self, v: __m256) -> f32 {
            // SAFETY: AVX present.
            unsafe {
                let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                let s = _mm_add_ss(s, _mm_movehdup_ps(s));
                _mm_cvtss_f32(s)
            }
        }
        #[inline(always)]
        fn reduce_max(self, v: __m256) -> f32 {
            // SAFETY: AVX present.
            unsafe {
                let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
                let s = _mm_max_ss(s, _mm_movehdup_ps(s));
                _mm_cvtss_f32(s)
            }
        }
    }

    // SAFETY: as for Avx2, with the AVX-512 features.
    unsafe impl<const BF16: bool> Simd for Avx512<BF16> {
        const LANES: usize = 16;
        const REGISTERS: usize = 32;
        type V = __m512;

        #[inline(always)]
        fn splat(self, x: f32) -> __m512 {
            // SAFETY: AVX-512F present (type invariant).
            unsafe { _mm512_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn load(self, p: *const f32) -> __m512 {
            // SAFETY: 16 readable floats (caller).
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32, v: __m512) {
            // SAFETY: 16 writable floats (caller).
            unsafe { _mm512_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn load_bf16(self, p: *const u16) -> __m512 {
            // SAFETY: 16 readable u16 (caller).
            unsafe {
                let h = _mm256_loadu_si256(p as *const __m256i);
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
            }
        }
        #[inline(always)]
        unsafe fn store_bf16_pairs(self, p: *mut u16, even: __m512, odd: __m512) {
            // SAFETY: 32 writable u16 (caller); AVX-512F/BW/DQ (and AVX512_BF16 when BF16)
            // present.
            unsafe {
                // In hardware unless a lane is subnormal (the instruction would flush it, and
                // pair stores keep subnormals): two conversions and one word permutation in
                // place of ~15 integer instructions (performance log). The instruction gives
                // a zero (either sign) exactly for zeros and subnormals (a normal f32 rounds
                // to at least the smallest normal bf16), so a result without zero words needs
                // no other check (one test instead of two classifications: swiglu, rope and
                // rms_norm 0.93-0.95x the time); one with zeros checks the inputs.
                if BF16 {
                    let w =
                        std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(odd, even));
                    if no_zero_words(w)
                        || _mm512_fpclass_ps_mask::<SUBNORMAL>(even)
                            | _mm512_fpclass_ps_mask::<SUBNORMAL>(odd)
                            == 0
                    {
                        // words 0..16 = even, 16..32 = odd; word 2i <- i, word 2i + 1 <- 16 + i
                        let idx = _mm512_set_epi16(
                            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                            22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0,
                        );
                        _mm512_storeu_si512(p as *mut _, _mm512_permutexvar_epi16(idx, w));
                        return;
                    }
                }
                let (e, o) = (self.round_bf16_hi(even), self.round_bf16_hi(odd));
                let w = _mm512_or_si512(
                    _mm512_srli_epi32::<16>(e),
                    _mm512_and_si512(o, _mm512_set1_epi32(0xffff0000u32 as i32)),
                );
                _mm512_storeu_si512(p as *mut _, w)
            }
        }
        #[inline(always)]
        unsafe fn load_bf16_pairs(self, p: *const u16) -> (__m512, __m512) {
            // SAFETY: 32 readable u16 (caller); AVX-512F present.
            unsafe {
                let w = _mm512_loadu_si512(p as *const _);
                let odd = _mm512_and_si512(w, _mm512_set1_epi32(0xffff0000u32 as i32));
                (
                    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(w)),
                    _mm512_castsi512_ps(odd),
                )
            }
        }
        #[inline(always)]
        unsafe fn store_bf16(self, p: *mut u16, v: __m512) {
            // SAFETY: 16 writable u16 (caller).
            unsafe { _mm256_storeu_si256(p as *mut __m256i, self.pack_bf16(v)) }
        }
        #[inline(always)]
        unsafe fn stream_bf16(self, p: *mut u16, v: __m512) {
            // SAFETY: 16 writable u16 (caller), 32-byte aligned for the streaming store.
            unsafe {
                if (p as usize) % 32 == 0 {
                    _mm256_stream_si256(p as *mut __m256i, self.pack_bf16(v))
                } else {
                    _mm256_storeu_si256(p as *mut __m256i, self.pack_bf16(v))
                }
            }
        }
        #[inline(always)]
        unsafe fn load_f16(self, p: *const u16) -> __m512 {
            // SAFETY: 16 readable u16 (caller).
            unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i)) }
        }
        #[inline(always)]
        unsafe fn store_f16(self, p: *mut u16, v: __m512) {
            // SAFETY: 16 writable u16 (caller).
            unsafe { _mm256_storeu_si256(p as *mut __m256i, _mm512_cvtps_ph::<RNE>(v)) }
        }
        #[inline(always)]
        unsafe fn stream_f16(self, p: *mut u16, v: __m512) {
            // SAFETY: 16 writable u16 (caller), 32-byte aligned for the streaming store.
            unsafe {
                let h = _mm512_cvtps_ph::<RNE>(v);
                if (p as usize) % 32 == 0 {
                    _mm256_stream_si256(p as *mut __m256i, h)
                } else {
                    _mm256_storeu_si256(p as *mut __m256i, h)
                }
            }
        }
        #[inline(always)]
        unsafe fn stream(self, p: *mut f32, v: __m512) {
            // SAFETY: 16 writable floats (caller), 64-byte aligned for the streaming store.
            unsafe {
                if (p as usize) % 64 == 0 {
                    _mm512_stream_ps(p, v)
                } else {
                    _mm512_storeu_ps(p, v)
                }
            }
        }
        #[inline(always)]
        fn fence(self) {
            // SAFETY: SSE is baseline on x86_64.
            unsafe { _mm_sfence() }
        }
        #[inline(always)]
        fn add(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_add_ps(a, b) }
        }
        #[inline(always)]
        fn sub(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_sub_ps(a, b) }
        }
        #[inline(always)]
        fn mul(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        fn div(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_div_ps(a, b) }
        }
        #[inline(always)]
        fn fma(self, a: __m512, b: __m512, c: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        fn max(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_max_ps(a, b) }
        }
        #[inline(always)]
        fn min(self, a: __m512, b: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_min_ps(a, b) }
        }
        #[inline(always)]
        fn round(self, a: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_roundscale_ps::<RNE>(a) }
        }
        #[inline(always)]
        fn floor(self, a: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(a) }
        }
        #[inline(always)]
        fn shl23(self, t: __m512) -> __m512 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_castps_si512(t))) }
        }
        const DPBF16: bool = BF16;
        #[inline(always)]
        unsafe fn square_bf16_pairs(self, acc: __m512, p: *const u16) -> __m512 {
            if !BF16 {
                // SAFETY: forwarded contract.
                return unsafe { super::square_bf16_pairs_widening(self, acc, p) };
            }
            // SAFETY: 32 readable u16 (caller); AVX512_BF16 present (BF16, type invariant).
            unsafe {
                let w = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p as *const _));
                _mm512_dpbf16_ps(acc, w, w)
            }
        }
        #[inline(always)]
        fn reduce_sum(self, v: __m512) -> f32 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_reduce_add_ps(v) }
        }
        #[inline(always)]
        fn reduce_max(self, v: __m512) -> f32 {
            // SAFETY: AVX-512F present.
            unsafe { _mm512_reduce_max_ps(v) }
        }
        /// As the generic `exp` (same clamp), with `vscalefps` applying 2^n in one instruction,
        /// which also overflows exactly where e^x does (x > 88.72). (`vrangeps` would clamp
        /// |x| in one instruction instead of two, but turns NaN into the bound.)
        #[inline(always)]
        fn exp(self, x: __m512) -> __m512 {
            const MAGIC: f32 = 12_582_912.0;
            // SAFETY: AVX-512F/DQ present.
            unsafe {
                // x second: max/min return the second operand when one is NaN
                let x = _mm512_min_ps(
                    _mm512_set1_ps(89.0),
                    _mm512_max_ps(_mm512_set1_ps(-87.0), x),
                );
                let t = _mm512_fmadd_ps(
                    x,
                    _mm512_set1_ps(std::f32::consts::LOG2_E),
                    _mm512_set1_ps(MAGIC),
                );
                let n = _mm512_sub_ps(t, _mm512_set1_ps(MAGIC));
                let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693_359_4), x);
                exp512_finish(n, r)
            }
        }
        /// `exp(-x)` with the negation folded: the clamp of -x to [-87, 89] is -(x clamped
        /// to [-89, 87]), and the two FMAs that take -x take x with negated factors, which
        /// round the same exact values: the same bits as `exp(0 - x)`.
        #[inline(always)]
        fn exp_neg(self, x: __m512) -> __m512 {
            const MAGIC: f32 = 12_582_912.0;
            // SAFETY: AVX-512F/DQ present.
            unsafe {
                // x second: max/min return the second operand when one is NaN
                let xc = _mm512_max_ps(
                    _mm512_set1_ps(-89.0),
                    _mm512_min_ps(_mm512_set1_ps(87.0), x),
                );
                let t = _mm512_fmadd_ps(
                    xc,
                    _mm512_set1_ps(-std::f32::consts::LOG2_E),
                    _mm512_set1_ps(MAGIC),
                );
                let n = _mm512_sub_ps(t, _mm512_set1_ps(MAGIC));
                // -xc - n * c1 (fnmsub); `exp512_finish` adds n * c2
                let r = _mm512_fnmsub_ps(n, _mm512_set1_ps(0.693_359_4), xc);
                exp512_finish(n, r)
            }
        }
        #[inline(always)]
        fn reduce_lanes(self, v: &[__m512]) -> __m512 {
            let v: &[__m512; 16] = v.try_into().expect("16 vectors");
            // SAFETY: AVX-512F present (type invariant).
            unsafe { crate::kernels::cpu::sgemm_nt::reduce16(v) }
        }
    }
}

/// A tensor element that computes in f32: loaded widened, stored rounded to nearest even.
pub trait Elem: Copy + Send + Sync + 'static {
    /// Loads `S::LANES` elements as f32.
    ///
    /// # Safety
    /// `p` must be readable for `S::LANES` elements.
    unsafe fn load<S: Simd>(s: S, p: *const Self) -> S::V;
    /// Stores `S::LANES` elements, rounding once.
    ///
    /// # Safety
    /// `p` must be writable for `S::LANES` elements.
    unsafe fn store<S: Simd>(s: S, p: *mut Self, v: S::V);
    /// `store` with a non-temporal hint (see `Simd::stream`).
    ///
    /// # Safety
    /// As `store`.
    unsafe fn stream<S: Simd>(s: S, p: *mut Self, v: S::V);
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

impl Elem for f32 {
    #[inline(always)]
    unsafe fn load<S: Simd>(s: S, p: *const f32) -> S::V {
        // SAFETY: forwarded contract.
        unsafe { s.load(p) }
    }
    #[inline(always)]
    unsafe fn stream<S: Simd>(s: S, p: *mut f32, v: S::V) {
        // SAFETY: forwarded contract.
        unsafe { s.stream(p, v) }
    }
    #[inline(always)]
    unsafe fn store<S: Simd>(s: S, p: *mut f32, v: S::V) {
        // SAFETY: forwarded contract.
        unsafe { s.store(p, v) }
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f32 {
        x
    }
}

impl Elem for bf16 {
    #[inline(always)]
    unsafe fn load<S: Simd>(s: S, p: *const bf16) -> S::V {
        // SAFETY: forwarded contract; bf16 is a transparent u16.
        unsafe { s.load_bf16(p as *const u16) }
    }
    #[inline(always)]
    unsafe fn stream<S: Simd>(s: S, p: *mut bf16, v: S::V) {
        // SAFETY: forwarded contract.
        unsafe { s.stream_bf16(p as *mut u16, v) }
    }
    #[inline(always)]
    unsafe fn store<S: Simd>(s: S, p: *mut bf16, v: S::V) {
        // SAFETY: as above.
        unsafe { s.store_bf16(p as *mut u16, v) }
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
}

impl Elem for f16 {
    #[inline(always)]
    unsafe fn load<S: Simd>(s: S, p: *const f16) -> S::V {
        // SAFETY: forwarded contract; f16 is a transparent u16.
        unsafe { s.load_f16(p as *const u16) }
    }
    #[inline(always)]
    unsafe fn stream<S: Simd>(s: S, p: *mut f16, v: S::V) {
        // SAFETY: forwarded contract.
        unsafe { s.stream_f16(p as *mut u16, v) }
    }
    #[inline(always)]
    unsafe fn store<S: Simd>(s: S, p: *mut f16, v: S::V) {
        // SAFETY: as above.
        unsafe { s.store_f16(p as *mut u16, v) }
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f16 {
        f16::from_f32(x)
    }
}

/// `T::stream` when `nt`, else `T::store` (`nt` is loop-invariant, so the branch is free).
///
/// # Safety
/// As `Elem::store`.
#[inline(always)]
pub unsafe fn put<S: Simd, T: Elem>(s: S, nt: bool, p: *mut T, v: S::V) {
    // SAFETY: forwarded contract.
    unsafe {
        if nt {
            T::stream(s, p, v)
        } else {
            T::store(s, p, v)
        }
    }
}

/// Runs `$body::<S, generics...>(s, args...)` at the level in use: the body is instantiated
/// inside a `#[target_feature]` function per level so its intrinsics inline.
///
/// Usage: `multiversion!(body, [T, W], (a: *const T, n: usize), (a, n))` expands to an
/// expression (unsafe: the caller upholds the body's contract).
macro_rules! multiversion {
    ($body:ident, [$($g:ident : $bound:path),*], ($($arg:ident : $ty:ty),*)) => {
        $crate::kernels::cpu::simd::multiversion!($body, [$($g: $bound),*], ($($arg: $ty),*) -> ())
    };
    ($body:ident, [$($g:ident : $bound:path),*], ($($arg:ident : $ty:ty),*) -> $ret:ty) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn v5<$($g: $bound),*>($($arg: $ty),*) -> $ret {
            // SAFETY: this function only runs after AVX-512 and AVX512_BF16 were detected.
            unsafe { $body::<$crate::kernels::cpu::simd::Avx512<true> $(, $g)*>(
                $crate::kernels::cpu::simd::Avx512::<true>::new_unchecked() $(, $arg)*) }
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn v4<$($g: $bound),*>($($arg: $ty),*) -> $ret {
            // SAFETY: this function only runs after AVX-512 was detected.
            unsafe { $body::<$crate::kernels::cpu::simd::Avx512 $(, $g)*>(
                $crate::kernels::cpu::simd::Avx512::<false>::new_unchecked() $(, $arg)*) }
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma,f16c")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn v3<$($g: $bound),*>($($arg: $ty),*) -> $ret {
            // SAFETY: this function only runs after AVX2/FMA/F16C were detected.
            unsafe { $body::<$crate::kernels::cpu::simd::Avx2 $(, $g)*>(
                $crate::kernels::cpu::simd::Avx2::new_unchecked() $(, $arg)*) }
        }
        match $crate::kernels::cpu::simd::level() {
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::cpu::simd::Level::Avx512Bf16 => v5::<$($g),*>($($arg),*),
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::cpu::simd::Level::Avx512 => v4::<$($g),*>($($arg),*),
            #[cfg(target_arch = "x86_64")]
            $crate::kernels::cpu::simd::Level::Avx2 => v3::<$($g),*>($($arg),*),
            _ => $body::<$crate::kernels::cpu::simd::Scalar $(, $g)*>(
                $crate::kernels::cpu::simd::Scalar $(, $arg)*),
        }
    }};
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

    /// `out[t]` = the sum of vector t (lanes `t * 100 + lane`, lane 3 set to -0.5), through
    /// `reduce_lanes`; returns LANES.
    #[inline(always)]
    unsafe fn reduce_lanes_body<S: Simd>(s: S, out: *mut f32, lanes: *mut usize) {
        let l = S::LANES;
        let mut vs = Vec::new();
        let mut buf = [0f32; 16];
        for t in 0..l {
            for (j, b) in buf.iter_mut().enumerate().take(l) {
                *b = if j == 3 { -0.5 } else { (t * 100 + j) as f32 };
            }
            // SAFETY: 16 floats.
            vs.push(unsafe { s.load(buf.as_ptr()) });
        }
        // SAFETY: the caller passes 16 writable floats and one usize.
        unsafe {
            s.store(out, s.reduce_lanes(&vs));
            *lanes = l;
        }
    }

    #[test]
    fn reduce_lanes_sums_each_vector_at_every_level() {
        let _level = super::level_lock();
        for want in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let lv = force_level(want);
            let mut out = [0f32; 16];
            let mut l = 0usize;
            let (o, lp) = (out.as_mut_ptr(), &mut l as *mut usize);
            // SAFETY: 16 floats and one usize.
            unsafe { multiversion!(reduce_lanes_body, [], (o: *mut f32, lp: *mut usize)) };
            for (t, &got) in out.iter().enumerate().take(l) {
                let want: f32 = (0..l)
                    .map(|j| if j == 3 { -0.5 } else { (t * 100 + j) as f32 })
                    .sum();
                assert_eq!(got, want, "{lv:?} lane {t}");
            }
        }
        force_level(Level::Avx512Bf16);
    }

    #[test]
    fn exp_and_sincos_are_accurate_at_every_level() {
        let _level = super::level_lock();
        for want in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let l = force_level(want);
            // a fine grid over the whole unclamped range, and the neighbourhood of 0
            let xs: Vec<f32> = (0..350_000)
                .map(|i| -86.95 + i as f32 * 5e-4)
                .chain((-20_000..20_000).map(|i| i as f32 * 1e-5))
                .collect();
            let mut e = vec![0f32; xs.len()];
            let mut s = vec![0f32; xs.len()];
            let mut c = vec![0f32; xs.len()];
            // SAFETY: equal lengths.
            unsafe { super::super::math_for_tests(&xs, &mut e, &mut s, &mut c) };
            for i in 0..xs.len() {
                let x = xs[i] as f64;
                let want_e = x.exp();
                let rel = ((e[i] as f64 - want_e) / want_e).abs();
                // measured: 1.73e-7 (scalar, AVX-512), 2.46e-7 (AVX2)
                assert!(rel < 3e-7, "{l:?} exp({x}) = {} want {want_e}", e[i]);
                let ang = (xs[i] * 25.0) as f64;
                assert!((s[i] as f64 - ang.sin()).abs() < 3e-7, "{l:?} sin({ang})");
                assert!((c[i] as f64 - ang.cos()).abs() < 3e-7, "{l:?} cos({ang})");
            }
        }
        force_level(Level::Avx512Bf16);
    }

    #[test]
    fn exp_neg_is_exp_of_the_negation_at_every_level() {
        #[inline(always)]
        unsafe fn body<S: Simd>(s: S, x: *const f32, a: *mut f32, b: *mut f32, n: usize) {
            let mut i = 0;
            // SAFETY: n elements each, n a multiple of 16.
            unsafe {
                while i + S::LANES <= n {
                    let v = s.load(x.add(i));
                    s.store(a.add(i), s.exp(s.sub(s.splat(0.0), v)));
                    s.store(b.add(i), s.exp_neg(v));
                    i += S::LANES;
                }
            }
        }
        let _level = super::level_lock();
        let mut xs: Vec<f32> = vec![
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            87.0,
            -87.0,
            89.0,
            -89.0,
            88.38,
            -88.38,
            88.72,
            -88.72,
            86.95,
            1e-45,
            -1e-45,
            f32::MAX,
            f32::MIN,
        ];
        xs.extend((0..4000).map(|i| (i as f32 - 2000.0) * 0.047_3));
        xs.extend((0..2000).map(|i| f32::from_bits(0x3000_0000 + i * 0x0005_3f31)));
        xs.resize(xs.len().next_multiple_of(16), 1.0);
        for want in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let l = force_level(want);
            let (mut a, mut b) = (vec![0f32; xs.len()], vec![0f32; xs.len()]);
            let (xp, ap, bp, n) = (xs.as_ptr(), a.as_mut_ptr(), b.as_mut_ptr(), xs.len());
            // SAFETY: n elements each.
            unsafe {
                multiversion!(body, [], (xp: *const f32, ap: *mut f32, bp: *mut f32, n: usize))
            };
            for (i, &x) in xs.iter().enumerate() {
                assert!(
                    a[i].to_bits() == b[i].to_bits() || a[i].is_nan() && b[i].is_nan(),
                    "{l:?} x {x}: exp(-x) {} exp_neg {}",
                    a[i],
                    b[i]
                );
            }
        }
        force_level(Level::Avx512Bf16);
    }

    #[test]
    fn exp_edges_agree_at_every_level() {
        let _level = super::level_lock();
        let xs = [
            f32::NEG_INFINITY,
            -1e30,
            -100.0,
            -88.5,
            88.38,
            88.5,
            88.7,
            100.0,
            f32::INFINITY,
            f32::NAN,
        ];
        for want in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let l = force_level(want);
            let mut xs16 = [0f32; 16];
            xs16[..xs.len()].copy_from_slice(&xs);
            let mut e = [0f32; 16];
            let (mut s, mut c) = ([0f32; 16], [0f32; 16]);
            // SAFETY: equal lengths.
            unsafe { super::super::math_for_tests(&xs16, &mut e, &mut s, &mut c) };
            for (i, &x) in xs.iter().enumerate() {
                if x.is_nan() {
                    assert!(e[i].is_nan(), "{l:?} exp(NaN) = {}", e[i]);
                } else if x < 0.0 {
                    assert!((0.0..1e-37).contains(&e[i]), "{l:?} exp({x}) = {}", e[i]);
                } else if x < 88.72 {
                    // e^88.5 = 2.7e38: finite at the scalar and AVX-512 levels; AVX2 builds 2^n
                    // from exponent bits and overflows from 88.38 (see `Simd::exp`)
                    let want = (x as f64).exp();
                    let exact = ((e[i] as f64 - want) / want).abs() < 1e-6;
                    assert!(
                        exact || (l == Level::Avx2 && x > 88.37 && e[i] == f32::INFINITY),
                        "{l:?} exp({x}) = {}",
                        e[i]
                    );
                } else {
                    assert_eq!(e[i], f32::INFINITY, "{l:?} exp({x})");
                }
            }
        }
        force_level(Level::Avx512Bf16);
    }

    /// The AVX512_BF16 store rounds exactly as the software one (nearest even, NaN stays a
    /// quiet NaN, subnormals kept: about one block in sixteen here holds one and takes the
    /// software path).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn hardware_bf16_store_matches_software_rounding() {
        let _level = super::level_lock();
        if !(is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512bf16"))
        {
            eprintln!("skipped: this CPU has no AVX512_BF16");
            return;
        }
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")]
        unsafe fn both(x: &[f32; 16]) -> ([u16; 16], [u16; 16]) {
            let (mut sw, mut hw) = ([0u16; 16], [0u16; 16]);
            // SAFETY: the features were detected; 16 readable and writable elements.
            unsafe {
                let v = Avx512::<false>::new_unchecked().load(x.as_ptr());
                Avx512::<false>::new_unchecked().store_bf16(sw.as_mut_ptr(), v);
                Avx512::<true>::new_unchecked().store_bf16(hw.as_mut_ptr(), v);
            }
            (sw, hw)
        }
        let mut bits: u32 = 0x1234_5677;
        let mut checked = 0;
        for round in 0..40_000u32 {
            let mut x = [0f32; 16];
            for (k, v) in x.iter_mut().enumerate() {
                bits = bits.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                // every 4th lane an exact tie (low 16 bits 0x8000) to test round-half-even
                let b = if k % 4 == 0 {
                    (bits & 0xffff_0000) | 0x8000
                } else {
                    bits
                };
                *v = f32::from_bits(if round == 0 && k < 4 {
                    [0x7f80_0000, 0xff80_0000, 0x7fc0_0001, 0x7f7f_ffff][k]
                } else {
                    b
                });
            }
            // SAFETY: detected above.
            let (sw, hw) = unsafe { both(&x) };
            for k in 0..16 {
                if x[k].is_nan() {
                    assert!(
                        half::bf16::from_bits(hw[k]).is_nan(),
                        "NaN {:#x}",
                        x[k].to_bits()
                    );
                } else {
                    assert_eq!(sw[k], hw[k], "x = {:e} ({:#x})", x[k], x[k].to_bits());
                    assert_eq!(sw[k], half::bf16::from_f32(x[k]).to_bits());
                    checked += 1;
                }
            }
        }
        assert!(checked > 500_000);
    }
}

#[cfg(test)]
mod pair_tests {
    use super::*;

    #[test]
    fn pair_order_round_trips_and_matches_the_pair_loads() {
        let x: Vec<f32> = (0..37).map(|i| i as f32).collect();
        for lanes in [1, 8, 16] {
            let mut p = vec![0f32; x.len()];
            pair_order(&x, &mut p, lanes);
            let mut back = vec![0f32; x.len()];
            pair_unorder(&p, &mut back, lanes);
            assert_eq!(back, x, "lanes {lanes}");
            if lanes == 8 {
                assert_eq!(
                    &p[..16],
                    &[0., 2., 4., 6., 8., 10., 12., 14., 1., 3., 5., 7., 9., 11., 13., 15.]
                );
                assert_eq!(&p[32..], &x[32..], "tail unchanged");
            }
        }
    }

    #[inline(always)]
    unsafe fn pairs_body<S: Simd>(s: S, src: *const u16, out: *mut f32, lanes: *mut usize) {
        // SAFETY: 32 readable u16 and 32 writable floats (caller).
        unsafe {
            let (e, o) = s.load_bf16_pairs(src);
            s.store(out, e);
            s.store(out.add(S::LANES), o);
            *lanes = S::LANES;
        }
    }

    #[inline(always)]
    unsafe fn store_pairs_body<S: Simd>(s: S, src: *const f32, out: *mut u16, lanes: *mut usize) {
        // SAFETY: 32 readable floats (already in pair order) and 32 writable u16 (caller).
        unsafe {
            s.store_bf16_pairs(out, s.load(src), s.load(src.add(S::LANES)));
            *lanes = S::LANES;
        }
    }

    /// Pair stores round like `bf16::from_f32` (nearest even, ties, infinities, NaN quiet,
    /// subnormals kept) and put every value back in its natural place.
    #[test]
    fn bf16_pair_stores_round_once_at_every_level() {
        let _level = super::level_lock();
        let mut vals: Vec<f32> = vec![
            1.0,
            -2.5,
            f32::from_bits(0x3f80_8000), // tie, even below: 1.0
            f32::from_bits(0x3f81_8000), // tie, odd below: rounds up
            f32::from_bits(0x3f80_8001),
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0x7f80_0001), // signalling NaN with low payload only
            f32::from_bits(0x0000_1234), // subnormal
            f32::MAX,
            -0.0,
        ];
        vals.extend((0..20).map(|i| (i as f32 - 9.3) * 1.0371));
        // the same without the subnormal (AVX512_BF16 converts such blocks in hardware)
        let normal: Vec<f32> = vals
            .iter()
            .map(|&v| if v.is_subnormal() { 1.5e-30 } else { v })
            .collect();
        vals.extend(normal);
        let want: Vec<u16> = vals.iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
        for lv in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let lv = force_level(lv);
            let mut l = 0usize;
            let mut probe = [0u16; 32];
            let (pp, lp) = (probe.as_mut_ptr(), &mut l as *mut usize);
            let zeros = [0f32; 32];
            let z = zeros.as_ptr();
            // SAFETY: 32 values each way.
            unsafe {
                multiversion!(store_pairs_body, [], (z: *const f32, pp: *mut u16, lp: *mut usize))
            };
            for chunk in 0..vals.len() / (2 * l) {
                let nat = &vals[chunk * 2 * l..][..2 * l];
                let mut ordered = vec![0f32; 2 * l];
                pair_order(nat, &mut ordered, l);
                let mut out = [0u16; 32];
                let (src, o, lp) = (ordered.as_ptr(), out.as_mut_ptr(), &mut l as *mut usize);
                // SAFETY: 2 * LANES values each way.
                unsafe {
                    multiversion!(store_pairs_body, [], (src: *const f32, o: *mut u16, lp: *mut usize))
                };
                for j in 0..2 * l {
                    let (got, w) = (out[j], want[chunk * 2 * l + j]);
                    let both_nan = bf16::from_bits(got).is_nan() && bf16::from_bits(w).is_nan();
                    assert!(
                        got == w || both_nan,
                        "{lv:?} value {}: {got:#x} want {w:#x}",
                        nat[j]
                    );
                }
            }
        }
        force_level(Level::Avx512Bf16);
    }

    #[test]
    fn bf16_pair_loads_split_even_and_odd_at_every_level() {
        let _level = super::level_lock();
        let vals: Vec<f32> = (0..32).map(|i| (i as f32 - 10.5) * 0.75).collect();
        let bits: Vec<u16> = vals.iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
        for want in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let lv = force_level(want);
            let mut out = [0f32; 32];
            let mut l = 0usize;
            let (src, o, lp) = (bits.as_ptr(), out.as_mut_ptr(), &mut l as *mut usize);
            // SAFETY: 32 values each way.
            unsafe {
                multiversion!(pairs_body, [], (src: *const u16, o: *mut f32, lp: *mut usize))
            };
            let mut natural = vec![0f32; 2 * l];
            pair_unorder(&out[..2 * l], &mut natural, l);
            assert_eq!(natural, vals[..2 * l].to_vec(), "{lv:?}");
        }
        force_level(Level::Avx512Bf16);
    }
}
