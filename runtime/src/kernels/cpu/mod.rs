//! CPU kernels: SIMD abstraction (`simd`), the work splitting shared by every kernel
//! (`par_for`/`par_ranges` on the fork-join team of `team.rs`, the rayon pool behind it), and
//! one file per operator family.
//!
//! Conventions: pointers are raw (outputs may alias inputs exactly, as in `add(a, a, b)`), f16
//! and bf16 are widened to f32 on load and rounded once on store, and work below about 64 KiB
//! runs on the calling thread (handing out chunks still costs more than such work).

pub mod attention;
pub mod elementwise;
pub mod gemm;
pub mod gemv;
pub mod misc;
pub mod norm;
pub mod rope;
pub mod sgemm_dot;
pub mod sgemm_nt;
pub mod simd;
mod team;

use std::ops::Range;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, Once};

use rayon::prelude::*;

/// A raw pointer that may cross to the worker threads: the kernels split the memory it
/// addresses into disjoint ranges (or only read it).
#[derive(Clone, Copy, Debug)]
pub struct SendPtr<T>(pub *mut T);

// SAFETY: see the type's doc; every user partitions writes between threads.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// Wraps a const pointer.
    #[inline(always)]
    pub fn from_const(p: *const T) -> Self {
        SendPtr(p as *mut T)
    }
    /// The pointer, for reading.
    #[inline(always)]
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// The smallest output ever written with non-temporal stores.
pub const STREAM_MIN_BYTES: usize = 4 << 20;

/// Outputs of at least this many bytes are written with non-temporal stores: half the last-level
/// cache (sysfs `index3`), at least `STREAM_MIN_BYTES`; `ANYFFI_STREAM_MIN_BYTES` overrides.
///
/// Rationale: an output that cannot stay in the cache pays a read-for-ownership per line and
/// a write-back later; streaming skips both (bandwidth-bound ops 20-25% faster on the
/// Sapphire Rapids VM, whose reads came from DRAM). An output that fits stays in the cache
/// for the next op, and there streaming sends it to DRAM: on the EPYC VM (32 MiB L3) the
/// 8 MiB outputs ran at 40-55% of an in-cache copy with streaming (performance log).
pub fn stream_min_bytes() -> usize {
    static MIN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| {
        if let Some(v) = std::env::var("ANYFFI_STREAM_MIN_BYTES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            return v;
        }
        let l3 = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
            .ok()
            .and_then(|s| parse_cache_size(&s))
            .unwrap_or(0);
        (l3 / 2).max(STREAM_MIN_BYTES)
    })
}

/// The level-1 data cache of CPU 0 in bytes (sysfs; 32 KiB when it cannot be read).
pub(crate) fn l1d_bytes() -> usize {
    static L1: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *L1.get_or_init(|| {
        (0..4)
            .find_map(|i| {
                let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
                let level = std::fs::read_to_string(format!("{dir}/level")).ok()?;
                let kind = std::fs::read_to_string(format!("{dir}/type")).ok()?;
                if level.trim() != "1" || kind.trim() != "Data" {
                    return None;
                }
                parse_cache_size(&std::fs::read_to_string(format!("{dir}/size")).ok()?)
            })
            .filter(|&b| b > 0)
            .unwrap_or(32 * 1024)
    })
}

/// `32768K` / `8M` / `1024` (sysfs cache sizes) in bytes.
fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mul) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok().map(|n| n * mul)
}

/// Whether an output of `bytes` is written with non-temporal stores.
#[inline]
pub fn stream_output(bytes: usize) -> bool {
    bytes >= stream_min_bytes()
}

/// Orders this thread's earlier non-temporal stores before its later stores (`sfence`); every
/// worker that streamed runs it before its range counts as done.
#[inline]
pub fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is baseline on x86_64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// The kernels' own thread pool (not rayon's global one, which belongs to the application):
/// `ANYFFI_NUM_THREADS` threads (default: the CPUs this process may run on), worker `i`
/// pinned to the `i`-th of those CPUs unless `ANYFFI_PIN_THREADS=0`. Built on first use; a
/// forked child starts over with a new pool (the parent's workers do not exist in the child,
/// and waiting for them would hang).
///
/// Rationale for pinning: workers sleep between calls, and the scheduler's wake-up placement
/// then often puts both of them on one core for tens of milliseconds; a memory-bound GEMV ran
/// at half speed for stretches of 10-20 calls (performance log). OpenBLAS avoids this by
/// spinning; pinned sleeping workers avoid it without burning a core.
static POOL: ForkLocal<rayon::ThreadPool> = ForkLocal::new();

/// The pool, built on first use (None if no thread could be started).
fn pool() -> Option<&'static rayon::ThreadPool> {
    POOL.get_or_build(forget_pool_in_child, || {
        build_pool().map(|p| &*Box::leak(Box::new(p)))
    })
}

/// `pthread_atfork` child handler: the parent's pool threads are gone in the child; drop the
/// reference (the pool object is leaked, never joined) so the next kernel builds a new pool.
extern "C" fn forget_pool_in_child() {
    POOL.forget();
}

/// A value built on first use and leaked (its threads hold it for the life of the process),
/// which a forked child forgets so that it builds its own: the parent's threads do not exist
/// in the child, and waiting for them would hang. The kernels' pool and the team.
pub(crate) struct ForkLocal<T: 'static> {
    ptr: AtomicPtr<T>,
    build: Mutex<()>,
    atfork: Once,
}

impl<T> ForkLocal<T> {
    pub(crate) const fn new() -> Self {
        ForkLocal {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            build: Mutex::new(()),
            atfork: Once::new(),
        }
    }

    /// The value, built by `build` on first use (one builder at a time; None keeps nothing, and
    /// the next call tries again). `forget_in_child`: the `pthread_atfork` child handler,
    /// which calls `forget` on this.
    pub(crate) fn get_or_build(
        &'static self,
        forget_in_child: extern "C" fn(),
        build: impl FnOnce() -> Option<&'static T>,
    ) -> Option<&'static T> {
        if let Some(v) = self.get() {
            return Some(v);
        }
        let _guard = self.build.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = self.get() {
            return Some(v);
        }
        self.atfork.call_once(|| {
            #[cfg(unix)]
            // SAFETY: registers a plain function with no captured state.
            unsafe {
                libc::pthread_atfork(None, None, Some(forget_in_child));
            }
            #[cfg(not(unix))]
            let _ = forget_in_child;
        });
        let v = build()?;
        self.ptr.store(v as *const T as *mut T, Ordering::Release);
        Some(v)
    }

    /// The value if it is built.
    pub(crate) fn get(&self) -> Option<&'static T> {
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: values are leaked, never freed, so the reference lives for the process.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Drops the reference (the value stays leaked): the next `get_or_build` builds anew.
    pub(crate) fn forget(&self) {
        self.ptr.store(std::ptr::null_mut(), Ordering::Release);
    }
}

fn build_pool() -> Option<rayon::ThreadPool> {
    let cpus = allowed_cpus();
    let n = std::env::var("ANYFFI_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(cpus.len().max(1), |n| n.get())
        });
    let pin = n <= cpus.len() && std::env::var("ANYFFI_PIN_THREADS").map_or(true, |v| v != "0");
    let mut b = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("anyffi-cpu-{i}"));
    if pin {
        b = b.start_handler(move |i| pin_to(cpus[i]));
    }
    // On failure (no threads can be spawned) the kernels fall back to rayon's global pool.
    b.build().ok()
}

/// How many CPUs this process may run on (at least 1), read once.
fn cpu_count() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| allowed_cpus().len().max(1))
}

/// The CPUs in this process's affinity mask, in order.
fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; the call writes at most its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                return (0..libc::CPU_SETSIZE as usize)
                    .filter(|&c| libc::CPU_ISSET(c, &set))
                    .collect();
            }
        }
    }
    Vec::new()
}

fn pin_to(_cpu: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: a valid one-CPU set for the calling thread; failure leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(_cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs `f` inside the kernels' pool, so the parallel loops in it use that pool.
#[inline]
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// `install` for a closure holding raw pointers (not `Send`).
///
/// # Safety
/// Whatever `f` touches through its pointers must be valid to use from another thread while
/// the caller waits (the caller blocks until `f` returns).
pub unsafe fn install_raw(f: impl FnOnce()) {
    struct AssertSend<F>(F);
    // SAFETY: the caller vouches for the pointers; the caller blocks until f has run.
    unsafe impl<F> Send for AssertSend<F> {}
    let job = AssertSend(f);
    install(move || {
        let job = job;
        (job.0)()
    })
}

/// Threads in the pool.
#[inline]
pub fn threads() -> usize {
    match pool() {
        Some(p) => p.current_num_threads(),
        None => rayon::current_num_threads(),
    }
}

/// Calls `f` on disjoint ranges covering `0..n`, in parallel when `n * cost` (bytes or a
/// comparable unit) is worth it; each range holds at least `min_items` items where possible.
pub fn par_ranges(n: usize, cost: usize, min_items: usize, f: impl Fn(Range<usize>) + Sync) {
    const SERIAL_BELOW: usize = 64 * 1024;
    let t = threads();
    if n == 0 {
        return;
    }
    if t <= 1 || n.saturating_mul(cost) < SERIAL_BELOW || n <= min_items.max(1) {
        f(0..n);
        return;
    }
    let chunks = n.div_ceil(min_items.max(1)).min(t * 4).max(1);
    if chunks == 1 {
        f(0..n);
        return;
    }
    let per = n.div_ceil(chunks);
    par_for(chunks, &|c| {
        let start = c * per;
        let end = ((c + 1) * per).min(n);
        if start < end {
            f(start..end);
        }
    });
}

/// Runs `f(c)` for every `c < count` on the kernels' threads (the calling thread among them)
/// and returns when all have run. The chunks are taken one at a time from a shared counter:
/// on this VM one vCPU often runs the same work at 1.4-2x the time of the other (performance
/// log), and a fixed split would leave the faster one idle. Through the team (`team.rs`);
/// when another thread's job holds it, through the rayon pool, one stealable job per chunk;
/// inside a job (a nested loop), on the calling thread alone.
pub fn par_for(count: usize, f: &(dyn Fn(usize) + Sync)) {
    let t = threads();
    if count <= 1 || t <= 1 || team::in_job() {
        (0..count).for_each(f);
        return;
    }
    // never more team threads than CPUs: a spinning helper would take a working thread's core
    if let Some(tm) = team::team(t.min(cpu_count()) - 1) {
        if tm.run(count, f) {
            return;
        }
    }
    install(|| (0..count).into_par_iter().with_max_len(1).for_each(f));
}

/// A collapsed strided layout of `K` tensors of one shape: size-1 dimensions dropped and
/// dimensions merged where every tensor's strides allow (strides in elements).
pub struct Strided<const K: usize> {
    pub shape: Vec<usize>,
    pub strides: [Vec<isize>; K],
}

impl<const K: usize> Strided<K> {
    /// Collapses `shape` with each tensor's `strides`.
    pub fn new(shape: &[i64], strides: [&[i64]; K]) -> Self {
        let mut dims: Vec<(usize, [isize; K])> = Vec::new();
        for (d, &n) in shape.iter().enumerate() {
            if n == 1 {
                continue;
            }
            let s: [isize; K] = std::array::from_fn(|k| strides[k][d] as isize);
            if let Some(last) = dims.last_mut() {
                // Merge the previous (outer) dim into this one if it steps by exactly n rows.
                if (0..K).all(|k| last.1[k] == s[k] * n as isize) {
                    last.0 *= n as usize;
                    last.1 = s;
                    continue;
                }
            }
            dims.push((n as usize, s));
        }
        if dims.is_empty() {
            dims.push((1, [1; K]));
        }
        Strided {
            shape: dims.iter().map(|d| d.0).collect(),
            strides: std::array::from_fn(|k| dims.iter().map(|d| d.1[k]).collect()),
        }
    }

    /// Number of rows (product of all but the innermost dimension).
    pub fn rows(&self) -> usize {
        self.shape[..self.shape.len() - 1].iter().product()
    }

    /// Innermost length.
    pub fn inner(&self) -> usize {
        *self.shape.last().unwrap()
    }

    /// Innermost stride of tensor `k`.
    pub fn inner_stride(&self, k: usize) -> isize {
        *self.strides[k].last().unwrap()
    }

    /// Element offsets of row `r` for every tensor.
    #[inline]
    pub fn row_offsets(&self, mut r: usize) -> [isize; K] {
        let mut off = [0isize; K];
        for d in (0..self.shape.len() - 1).rev() {
            let n = self.shape[d];
            let i = r % n;
            r /= n;
            for (k, o) in off.iter_mut().enumerate() {
                *o += i as isize * self.strides[k][d];
            }
        }
        off
    }
}

/// exp and sin/cos over slices at the level in use (unit tests of the SIMD math).
///
/// # Safety
/// All slices must have the same length.
#[cfg(test)]
pub(crate) unsafe fn math_for_tests(x: &[f32], e: &mut [f32], s: &mut [f32], c: &mut [f32]) {
    use simd::{multiversion, Scalar, Simd};
    #[inline(always)]
    unsafe fn body<S: Simd>(sm: S, x: *const f32, e: *mut f32, s: *mut f32, c: *mut f32, n: usize) {
        let mut i = 0;
        // SAFETY: in bounds (n elements each).
        unsafe {
            while i + S::LANES <= n {
                let v = sm.load(x.add(i));
                sm.store(e.add(i), sm.exp(v));
                let (sv, cv) = sm.sin_cos(sm.mul(v, sm.splat(25.0)));
                sm.store(s.add(i), sv);
                sm.store(c.add(i), cv);
                i += S::LANES;
            }
            while i < n {
                let v = Scalar.load(x.add(i));
                Scalar.store(e.add(i), Scalar.exp(v));
                let (sv, cv) = Scalar.sin_cos(v * 25.0);
                Scalar.store(s.add(i), sv);
                Scalar.store(c.add(i), cv);
                i += 1;
            }
        }
    }
    let (xp, ep, sp, cp, n) = (
        x.as_ptr(),
        e.as_mut_ptr(),
        s.as_mut_ptr(),
        c.as_mut_ptr(),
        x.len(),
    );
    // SAFETY: lengths per the caller.
    unsafe {
        multiversion!(
            body,
            [],
            (xp: *const f32, ep: *mut f32, sp: *mut f32, cp: *mut f32, n: usize)
        )
    }
}

#[cfg(test)]
mod pool_tests {
    use super::*;

    /// Parallel ranges run on the calling thread, the team's helpers, or (when another
    /// thread's job holds the team) the kernels' own pool, whose workers are pinned to one CPU
    /// of the process's mask each when the pool is no larger than the mask; never on rayon's
    /// global pool.
    #[test]
    fn ranges_run_on_the_kernel_threads() {
        use std::sync::Mutex;
        let me = std::thread::current().name().map(str::to_owned);
        let seen = Mutex::new(Vec::new());
        par_ranges(1 << 20, 1 << 10, 1, |r| {
            let name = std::thread::current().name().map(str::to_owned);
            seen.lock().unwrap().push((r.len(), name, allowed_cpus()));
        });
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.iter().map(|s| s.0).sum::<usize>(), 1 << 20);
        let cpus = allowed_cpus();
        let pinned =
            threads() <= cpus.len() && std::env::var("ANYFFI_PIN_THREADS").as_deref() != Ok("0");
        for (_, name, mask) in &seen {
            let n = name.as_deref().unwrap_or("");
            assert!(
                *name == me || n.starts_with("anyffi-team-") || n.starts_with("anyffi-cpu-"),
                "{name:?}"
            );
            if n.starts_with("anyffi-cpu-") && pinned && cfg!(target_os = "linux") {
                assert_eq!(mask.len(), 1, "worker {name:?} mask {mask:?}");
            }
        }
    }
}

#[cfg(test)]
mod stream_tests {
    #[test]
    fn cache_sizes_parse() {
        assert_eq!(super::parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(super::parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(super::parse_cache_size("512"), Some(512));
        assert_eq!(super::parse_cache_size("x"), None);
        assert!(super::stream_min_bytes() >= super::STREAM_MIN_BYTES);
        let l1 = super::l1d_bytes();
        assert!((4 << 10..=4 << 20).contains(&l1), "{l1}");
    }
}
