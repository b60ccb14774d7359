//! The CPU caching allocator behind `malloc_device`/`malloc_host` of the CPU runtime and every CPU
//! tensor: size classes, per-class free lists, a bound on cached bytes, and a live-allocation map
//! that turns bad frees into ValueErrors.
//!
//! Policy (also in AGENTS.md):
//! - Every block is 64-byte aligned (one cache line; enough for AVX-512 loads).
//! - Requests up to [`MAX_CACHED_BLOCK`] (256 MiB) are rounded up to a size class: 64 B for
//!   anything up to 64 B, then four classes per power of two (80, 96, 112, 128, 160, ...), so a
//!   block wastes at most 25 %. Larger requests go straight to the system with their size rounded
//!   to 64 B and are returned to the system on free.
//! - A freed class block goes onto its class's free list (LIFO, so the most recently touched
//!   memory is reused first) while the cached total stays within the limit (default 512 MiB,
//!   `ANYFFI_CPU_CACHE_LIMIT=<bytes>` overrides it, 0 disables caching); otherwise it goes back to
//!   the system at once. Nothing is evicted on free: the policy is O(1) and predictable.
//! - When the system refuses a block, the whole cache is released and the request is retried once.
//!   [`CachingAllocator::trim`] (`runtime.empty_cache`) releases the cache on demand.
//! - Every block handed out is in a map keyed by address. Freeing an address that is not in the
//!   map (never allocated here, or already freed) is a ValueError; nothing is touched.
//!
//! Rationale: tensors of the same few shapes are created and dropped in every decoding step, and
//! the system allocator maps and unmaps large blocks each time (glibc does so above 32 MiB),
//! paying a page fault per page on every reuse; PyTorch's CPU and CUDA caching allocators exist
//! for the same reason.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use anyffi::flat_map::FlatMap;
use anyffi::{Error, Result};
use parking_lot::Mutex;

/// Alignment of every block.
pub const ALIGN: usize = 64;
/// The smallest block.
pub const MIN_CLASS: usize = 64;
/// Requests above this size bypass the cache.
pub const MAX_CACHED_BLOCK: usize = 256 << 20;
/// Default bound on the bytes kept in free lists.
pub const DEFAULT_CACHE_LIMIT: usize = 512 << 20;
/// Largest request accepted at all: its block (rounded up to 64 B, and 2 MiB-aligned when it is
/// huge) must still be a valid `Layout`, i.e. at most `isize::MAX - (HUGE_ALIGN - 1)` bytes.
pub const MAX_REQUEST: usize = isize::MAX as usize - HUGE_ALIGN;

/// Number of size classes: index 0 is 64 B, then four per power of two up to `MAX_CACHED_BLOCK`.
const NUM_CLASSES: usize = 1 + 4 * (MAX_CACHED_BLOCK.trailing_zeros() as usize - 6);

/// The class index and block size of a request of `n <= MAX_CACHED_BLOCK` bytes.
#[inline]
pub fn size_class(n: usize) -> (usize, usize) {
    if n <= MIN_CLASS {
        return (0, MIN_CLASS);
    }
    // k = floor(log2(n - 1)) >= 6, so the class lies in (2^k, 2^(k+1)] in steps of 2^(k-2).
    let k = (usize::BITS - 1 - (n - 1).leading_zeros()) as usize;
    let step = 1usize << (k - 2);
    let size = (n + step - 1) & !(step - 1);
    (1 + (k - 6) * 4 + (size / step - 5), size)
}

/// Hashes addresses: they are 64-byte aligned, so the low bits carry nothing; the product's high
/// bits, which `FlatMap` uses, mix all the others.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_usize(&mut self, addr: usize) {
        self.0 = ((addr >> 6) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Address -> (block size, whether it is a tensor's storage). A `FlatMap`, not a `HashMap`, so
/// that valgrind sees it as reachable at exit (a `HashMap` made "possibly lost" records in every
/// program that made a tensor).
type LiveMap = FlatMap<usize, (usize, bool), BuildHasherDefault<AddrHasher>>;

/// Counters, for tests and tuning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Blocks currently handed out.
    pub live_blocks: usize,
    /// Bytes currently handed out (block sizes, not request sizes).
    pub live_bytes: usize,
    /// Bytes sitting in free lists.
    pub cached_bytes: usize,
    /// Allocations served from a free list.
    pub hits: u64,
    /// Allocations that went to the system.
    pub system_allocs: u64,
    /// Blocks returned to the system.
    pub system_frees: u64,
}

struct Pool {
    /// Address -> block size of every block handed out.
    live: LiveMap,
    /// Per-class stacks of free block addresses.
    free: Vec<Vec<usize>>,
    limit: usize,
    stats: Stats,
}

/// A thread-safe caching allocator of 64-byte-aligned host blocks.
pub struct CachingAllocator {
    pool: Mutex<Pool>,
}

/// Blocks of at least this size are aligned to 2 MiB and marked for transparent huge pages.
pub const HUGE_MIN: usize = 4 << 20;
const HUGE_ALIGN: usize = 2 << 20;

#[inline]
fn layout(size: usize) -> Layout {
    let align = if size >= HUGE_MIN { HUGE_ALIGN } else { ALIGN };
    // Sizes are at most MAX_REQUEST rounded up to 64, which fits isize.
    Layout::from_size_align(size, align).expect("block size fits a Layout")
}

fn system_alloc(size: usize) -> *mut u8 {
    // SAFETY: `size` is non-zero (at least MIN_CLASS) and the layout is valid.
    let p = unsafe { System.alloc(layout(size)) };
    if !p.is_null() && size >= HUGE_MIN {
        // Large tensors are streamed by the kernels: with 4 KiB pages a 50 MB weight matrix
        // costs ~12k page walks per pass (numpy asks for huge pages the same way). Where THP
        // is "madvise" this makes the block eligible; elsewhere it is a harmless no-op.
        // SAFETY: the range lies inside the block just allocated (2 MiB-aligned start).
        unsafe {
            libc::madvise(
                p as *mut libc::c_void,
                size & !(HUGE_ALIGN - 1),
                libc::MADV_HUGEPAGE,
            )
        };
    }
    p
}

fn system_free(addr: usize, size: usize) {
    // SAFETY: `addr` came from `system_alloc(size)` and is released exactly once (it was
    // removed from the live map or a free list under the lock before we got here).
    unsafe { System.dealloc(addr as *mut u8, layout(size)) }
}

impl CachingAllocator {
    /// An allocator keeping at most `limit` bytes in its free lists.
    pub fn new(limit: usize) -> Self {
        CachingAllocator {
            pool: Mutex::new(Pool {
                live: LiveMap::default(),
                free: (0..NUM_CLASSES).map(|_| Vec::new()).collect(),
                limit,
                stats: Stats::default(),
            }),
        }
    }

    /// A 64-byte-aligned block of at least `nbytes` bytes (a zero-byte request gets a unique
    /// 64-byte block). ValueError for sizes no allocation can have, RuntimeError when the system
    /// is out of memory.
    pub fn alloc(&self, nbytes: usize) -> Result<*mut u8> {
        self.alloc_as(nbytes, false)
    }

    /// A block for a tensor's storage: as [`alloc`](Self::alloc), but [`free`](Self::free)
    /// refuses it; only [`free_tensor`](Self::free_tensor) releases it. The mark is set under
    /// the allocator's lock with the allocation itself, so that no stray free of a recycled
    /// address can slip between the two (a double free racing a new tensor freed its storage).
    pub fn alloc_tensor(&self, nbytes: usize) -> Result<*mut u8> {
        self.alloc_as(nbytes, true)
    }

    fn alloc_as(&self, nbytes: usize, tensor: bool) -> Result<*mut u8> {
        if nbytes > MAX_REQUEST {
            return Err(Error::value_error(format!(
                "cannot allocate {nbytes} bytes: the size exceeds the largest allocation ({MAX_REQUEST} bytes)"
            )));
        }
        let size = if nbytes > MAX_CACHED_BLOCK {
            (nbytes + ALIGN - 1) & !(ALIGN - 1)
        } else {
            let (class, size) = size_class(nbytes);
            let mut pool = self.pool.lock();
            if let Some(addr) = pool.free[class].pop() {
                pool.stats.cached_bytes -= size;
                pool.stats.hits += 1;
                pool.stats.live_blocks += 1;
                pool.stats.live_bytes += size;
                pool.live.insert(addr, (size, tensor));
                return Ok(addr as *mut u8);
            }
            size
        };
        // The system call happens outside the lock: large blocks can take a while to map.
        let mut p = system_alloc(size);
        if p.is_null() {
            self.trim();
            p = system_alloc(size);
            if p.is_null() {
                return Err(Error::runtime_error(format!(
                    "out of memory: cannot allocate {nbytes} bytes on cpu:0"
                )));
            }
        }
        let mut pool = self.pool.lock();
        pool.stats.system_allocs += 1;
        pool.stats.live_blocks += 1;
        pool.stats.live_bytes += size;
        pool.live.insert(p as usize, (size, tensor));
        Ok(p)
    }

    /// Releases a block from [`alloc`](Self::alloc); ValueError (and no effect) for an address
    /// that is not a live block of this allocator, or that is a tensor's storage.
    ///
    /// # Safety
    /// Nothing may use the block afterwards.
    pub unsafe fn free(&self, p: *mut u8) -> Result<()> {
        // SAFETY: per the caller.
        unsafe { self.free_as(p, false) }
    }

    /// Releases a tensor's storage from [`alloc_tensor`](Self::alloc_tensor).
    ///
    /// # Safety
    /// The tensor is gone: nothing may use the block afterwards.
    pub unsafe fn free_tensor(&self, p: *mut u8) -> Result<()> {
        // SAFETY: per the caller.
        unsafe { self.free_as(p, true) }
    }

    unsafe fn free_as(&self, p: *mut u8, tensor: bool) -> Result<()> {
        let addr = p as usize;
        let mut pool = self.pool.lock();
        let size = match pool.live.get(&addr) {
            Some(&(size, t)) if t == tensor => size,
            Some(_) if !tensor => {
                return Err(Error::value_error(format!(
                    "{p:p} is the storage of a live tensor on cpu:0; it is freed when the \
                     tensor is released"
                )))
            }
            _ => {
                return Err(Error::value_error(format!(
                    "cannot free {p:p}: it was not allocated by the CPU allocator or was already \
                     freed"
                )))
            }
        };
        pool.live.remove(&addr);
        pool.stats.live_blocks -= 1;
        pool.stats.live_bytes -= size;
        if size <= MAX_CACHED_BLOCK && pool.stats.cached_bytes + size <= pool.limit {
            let (class, _) = size_class(size);
            pool.free[class].push(addr);
            pool.stats.cached_bytes += size;
            return Ok(());
        }
        pool.stats.system_frees += 1;
        drop(pool);
        system_free(addr, size);
        Ok(())
    }

    /// The block size behind a live address, if it is one.
    pub fn block_size(&self, p: *const u8) -> Option<usize> {
        self.pool
            .lock()
            .live
            .get(&(p as usize))
            .map(|&(size, _)| size)
    }

    /// Returns every cached block to the system; the number of bytes released.
    pub fn trim(&self) -> usize {
        let mut blocks = Vec::new();
        {
            let mut pool = self.pool.lock();
            for (class, list) in pool.free.iter_mut().enumerate() {
                let size = class_size(class);
                blocks.extend(list.drain(..).map(|a| (a, size)));
            }
            pool.stats.cached_bytes = 0;
            pool.stats.system_frees += blocks.len() as u64;
        }
        let mut released = 0;
        for (addr, size) in blocks {
            system_free(addr, size);
            released += size;
        }
        released
    }

    /// Sets the bound on cached bytes (trimming if the cache is now over it).
    pub fn set_limit(&self, limit: usize) {
        let over = {
            let mut pool = self.pool.lock();
            pool.limit = limit;
            pool.stats.cached_bytes > limit
        };
        if over {
            self.trim();
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.pool.lock().stats
    }
}

/// The block size of class `class` (inverse of [`size_class`]).
fn class_size(class: usize) -> usize {
    if class == 0 {
        return MIN_CLASS;
    }
    let k = 6 + (class - 1) / 4;
    (5 + (class - 1) % 4) << (k - 2)
}

impl Drop for CachingAllocator {
    fn drop(&mut self) {
        // Live blocks belong to their holders; only the cache is ours to release.
        self.trim();
    }
}

/// The process-wide CPU allocator.
pub static CPU_ALLOCATOR: LazyLock<CachingAllocator> = LazyLock::new(|| {
    let limit = std::env::var("ANYFFI_CPU_CACHE_LIMIT")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(DEFAULT_CACHE_LIMIT);
    CachingAllocator::new(limit)
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_monotone_and_tight() {
        assert_eq!(size_class(0), (0, 64));
        assert_eq!(size_class(64), (0, 64));
        assert_eq!(size_class(65), (1, 80));
        assert_eq!(size_class(128), (4, 128));
        assert_eq!(size_class(129), (5, 160));
        assert_eq!(size_class(4096).1, 4096);
        assert_eq!(size_class(4097).1, 5120);
        assert_eq!(
            size_class(MAX_CACHED_BLOCK),
            (NUM_CLASSES - 1, MAX_CACHED_BLOCK)
        );
        let mut last = (0, 0);
        for n in (1..70_000).chain([1 << 20, (1 << 20) + 1, 100 << 20]) {
            let (c, s) = size_class(n);
            assert!(
                s >= n && s % 16 == 0 && (s - n) * 4 <= s.max(256),
                "n={n} s={s}"
            );
            assert!(c >= last.0 && s >= last.1);
            assert_eq!(class_size(c), s);
            last = (c, s);
        }
    }

    #[test]
    fn reuse_alignment_and_bad_frees() {
        let a = CachingAllocator::new(1 << 20);
        let p = a.alloc(1000).unwrap();
        assert_eq!(p as usize % ALIGN, 0);
        assert_eq!(a.block_size(p), Some(1024));
        unsafe { a.free(p) }.unwrap();
        assert_eq!(
            unsafe { a.free(p) }.unwrap_err().kind(),
            "ValueError",
            "double free is detected"
        );
        let q = a.alloc(900).unwrap();
        assert_eq!(q, p, "same class reuses the cached block");
        let mut local = 0u64;
        let e = unsafe { a.free(&mut local as *mut u64 as *mut u8) }.unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(
            e.message().contains("not allocated by the CPU allocator"),
            "{}",
            e.message()
        );
        unsafe { a.free(q) }.unwrap();
        let s = a.stats();
        assert_eq!(
            (s.live_blocks, s.cached_bytes, s.hits, s.system_allocs),
            (0, 1024, 1, 1)
        );
        assert_eq!(a.trim(), 1024);
    }

    #[test]
    fn cache_limit_and_large_blocks() {
        let a = CachingAllocator::new(4096);
        let x = a.alloc(4096).unwrap();
        let y = a.alloc(4096).unwrap();
        unsafe { a.free(x) }.unwrap();
        unsafe { a.free(y) }.unwrap();
        let s = a.stats();
        assert_eq!(
            (s.cached_bytes, s.system_frees),
            (4096, 1),
            "the second block exceeds the bound"
        );
        let big = a.alloc(MAX_CACHED_BLOCK + 1).unwrap();
        assert_eq!(a.block_size(big), Some(MAX_CACHED_BLOCK + 64));
        unsafe { a.free(big) }.unwrap();
        assert_eq!(a.stats().system_frees, 2, "large blocks are never cached");
        assert_eq!(a.alloc(usize::MAX).unwrap_err().kind(), "ValueError");
        // Just below isize::MAX: a ValueError, not a panic in `layout` (2 MiB alignment).
        for n in [isize::MAX as usize - ALIGN, MAX_REQUEST + 1] {
            assert_eq!(a.alloc(n).unwrap_err().kind(), "ValueError", "{n}");
        }
        assert_eq!(a.alloc(MAX_REQUEST).unwrap_err().kind(), "RuntimeError");
    }

    #[test]
    fn zero_limit_disables_caching() {
        let a = CachingAllocator::new(0);
        let p = a.alloc(10).unwrap();
        unsafe { a.free(p) }.unwrap();
        assert_eq!(a.stats().cached_bytes, 0);
    }
}
