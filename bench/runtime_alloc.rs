//! bench/runtime_alloc: allocation + release of 4 KiB … 64 MiB blocks through the runtime's CPU
//! caching allocator versus the system allocator (libc malloc/free), touching the first byte of
//! each block, as a tensor's first write would. Prints the median time per alloc+free pair of
//! repeated runs and the ratio ours/system (below 1 means ours is faster); then 4 KiB pairs again
//! with 1,000 and 100,000 other blocks live, which the allocator's live map must not slow down.
//!
//! Run: `cargo bench -p anyffi-runtime --bench runtime_alloc` (add `-- --quick` for fewer runs).

use std::hint::black_box;
use std::time::Instant;

use tvm_ffi::device::caching::CPU_ALLOCATOR;

const SIZES: &[(usize, &str)] = &[
    (4 << 10, "4 KiB"),
    (16 << 10, "16 KiB"),
    (64 << 10, "64 KiB"),
    (256 << 10, "256 KiB"),
    (1 << 20, "1 MiB"),
    (4 << 20, "4 MiB"),
    (16 << 20, "16 MiB"),
    (64 << 20, "64 MiB"),
];

/// Nanoseconds per iteration of `op`, run `iters` times.
fn time_per_op(iters: usize, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        op();
    }
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn ours(size: usize) {
    let p = CPU_ALLOCATOR.alloc(size).expect("allocation");
    // SAFETY: a fresh block of at least `size` >= 1 bytes.
    unsafe { std::ptr::write_volatile(p, 1u8) };
    // SAFETY: the block just allocated, unused.
    unsafe { CPU_ALLOCATOR.free(black_box(p)) }.expect("free");
}

fn system(size: usize) {
    // SAFETY: plain malloc; checked for NULL before the write.
    let p = unsafe { libc::malloc(size) } as *mut u8;
    assert!(!p.is_null(), "malloc({size}) failed");
    // SAFETY: a fresh block of at least `size` >= 1 bytes.
    unsafe { std::ptr::write_volatile(p, 1u8) };
    // SAFETY: the block from malloc above, freed once.
    unsafe { libc::free(black_box(p) as *mut libc::c_void) };
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 9 };
    println!("bench/runtime_alloc: alloc + touch first byte + free, median of {runs} runs");
    println!(
        "{:>8}  {:>12}  {:>12}  {:>10}",
        "size", "ours ns/op", "libc ns/op", "ours/libc"
    );
    for &(size, label) in SIZES {
        // Roughly constant time per run: many pairs for small blocks, fewer for large ones.
        let iters = ((64 << 20) / size).clamp(200, 20_000);
        // Warm both allocators (the cache fills, glibc adapts its mmap threshold).
        time_per_op(iters, || ours(size));
        time_per_op(iters, || system(size));
        let mut a = Vec::with_capacity(runs);
        let mut b = Vec::with_capacity(runs);
        for _ in 0..runs {
            a.push(time_per_op(iters, || ours(size)));
            b.push(time_per_op(iters, || system(size)));
        }
        let (a, b) = (median(a), median(b));
        println!("{label:>8}  {a:>12.1}  {b:>12.1}  {:>10.2}", a / b);
    }
    // The live-block map with many blocks live (a model's weights): 4 KiB pairs again.
    for live in [1_000usize, 100_000] {
        let kept: Vec<*mut u8> = (0..live)
            .map(|_| CPU_ALLOCATOR.alloc(64).expect("allocation"))
            .collect();
        let held: Vec<*mut u8> = (0..live)
            // SAFETY: plain malloc, freed below.
            .map(|_| unsafe { libc::malloc(64) } as *mut u8)
            .collect();
        time_per_op(20_000, || ours(4 << 10));
        let mut a = Vec::with_capacity(runs);
        let mut b = Vec::with_capacity(runs);
        for _ in 0..runs {
            a.push(time_per_op(20_000, || ours(4 << 10)));
            b.push(time_per_op(20_000, || system(4 << 10)));
        }
        let (a, b) = (median(a), median(b));
        let label = format!("{live} live");
        println!("{label:>12}  {a:>8.1}  {b:>12.1}  {:>10.2}", a / b);
        for p in kept {
            // SAFETY: blocks allocated above, freed once.
            unsafe { CPU_ALLOCATOR.free(p) }.expect("free");
        }
        for p in held {
            // SAFETY: blocks from malloc above, freed once.
            unsafe { libc::free(p as *mut libc::c_void) };
        }
    }
    let s = CPU_ALLOCATOR.stats();
    println!(
        "cache: {} hits, {} system allocations, {} bytes cached at exit",
        s.hits, s.system_allocs, s.cached_bytes
    );
}
