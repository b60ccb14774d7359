//! Plan/run descriptor cache, as InfiniCore's (spec §5.3): a per-thread LRU per op, keyed by
//! every tensor's dtype, shape and strides, the device, and the scalars (never the data
//! pointers). A hit skips validation and planning (kernel choice, strides, workspace size);
//! the per-call checks that depend on addresses (NULL data, overlap) still run.
//!
//! Differences from InfiniCore: keys are compared in full (no bare-hash collisions), and
//! capacity 0 disables caching (every call plans) rather than meaning "unbounded", so the
//! saving can be measured with `ops.plan_cache_capacity(0)`. Workspaces are not kept per plan
//! (a cached plan for a large bf16 GEMM would pin tens of MB): each thread reuses one scratch
//! buffer that grows to the largest workspace it has needed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyffi::Result;

use super::TensorArg;

static CAPACITY: AtomicUsize = AtomicUsize::new(100);

/// Sets the capacity of every thread's caches (0 disables caching); returns the old one.
/// Caches shrink lazily, at their next insertion.
pub fn set_capacity(cap: usize) -> usize {
    CAPACITY.swap(cap, Ordering::Relaxed)
}

/// The capacity in force.
pub fn capacity() -> usize {
    CAPACITY.load(Ordering::Relaxed)
}

/// Layout key: up to 80 words (tensor dtypes, shapes, strides, scalars' bits).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    len: u8,
    words: [i64; 80],
}

impl Key {
    pub fn new() -> Key {
        Key {
            len: 0,
            words: [0; 80],
        }
    }

    #[inline]
    pub fn push(&mut self, w: i64) {
        // Callers stay below 80 words (4 tensors x (2 + 2 x 8) + scalars); past that the last
        // slot mixes the rest in, which could only make two keys collide, never crash.
        let i = (self.len as usize).min(79);
        self.words[i] = if (self.len as usize) < 80 {
            w
        } else {
            self.words[79].rotate_left(5) ^ w
        };
        self.len = self.len.saturating_add(1);
    }

    /// Adds a tensor's dtype, device, shape and strides.
    pub fn tensor(&mut self, t: &TensorArg<'_>) {
        let code = match t.dtype {
            super::DType::F32 => 1,
            super::DType::F16 => 2,
            super::DType::BF16 => 3,
            super::DType::I64 => 4,
            super::DType::I32 => 5,
            super::DType::Other(..) => 6,
        };
        self.push(code | (t.ndim() as i64) << 32);
        if let super::DType::Other(c, b, l) = t.dtype {
            self.push((l as i64) << 16 | (c as i64) << 8 | b as i64);
        }
        self.push((t.device.0 as i64) << 32 | t.device.1 as i64);
        for &n in t.shape {
            self.push(n);
        }
        for &s in t.strides() {
            self.push(s);
        }
    }

    /// Marks an absent optional tensor.
    pub fn none(&mut self) {
        self.push(-1);
    }

    /// Adds a scalar by its bits.
    pub fn scalar(&mut self, x: f64) {
        self.push(x.to_bits() as i64);
    }
}

/// FxHash-style hasher: keys are short runs of integers; SipHash would dominate a hit.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_i64(&mut self, w: i64) {
        self.write_u64(w as u64);
    }
    #[inline]
    fn write_u8(&mut self, w: u8) {
        self.write_u64(w as u64);
    }
    #[inline]
    fn write_usize(&mut self, w: usize) {
        self.write_u64(w as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A least-recently-used map from layout keys to plans.
pub(crate) struct Lru<V> {
    map: HashMap<Key, (V, u64), BuildHasherDefault<FxHasher>>,
    tick: u64,
}

impl<V> Default for Lru<V> {
    fn default() -> Self {
        Lru {
            map: HashMap::default(),
            tick: 0,
        }
    }
}

impl<V: Clone> Lru<V> {
    /// The plan for `key`, made by `plan` on a miss (and cached unless the capacity is 0).
    pub fn get_or_plan(&mut self, key: &Key, plan: impl FnOnce() -> Result<V>) -> Result<V> {
        self.tick += 1;
        if let Some(e) = self.map.get_mut(key) {
            e.1 = self.tick;
            return Ok(e.0.clone());
        }
        let v = plan()?;
        let cap = capacity();
        if cap == 0 {
            self.map.clear();
            return Ok(v);
        }
        while self.map.len() >= cap {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, e)| e.1)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.map.remove(&k);
                }
                None => break,
            }
        }
        self.map.insert(key.clone(), (v.clone(), self.tick));
        Ok(v)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's f32 scratch buffer of at least `n` elements (contents
/// unspecified). Re-entrant calls get a fresh buffer.
/// A workspace that cannot be allocated (or whose size overflows) is an error naming `op`,
/// never an abort: broadcast (zero-stride) operands make huge workspaces from small inputs.
pub(crate) fn with_scratch<R>(op: &str, n: usize, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
    crate::kernels::with_thread_local(&SCRATCH, |v| {
        if v.len() < n {
            let oom = || {
                anyffi::Error::new(
                    "MemoryError",
                    format!(
                        "{op}: out of memory: cannot allocate a workspace of {n} float32 elements"
                    ),
                )
            };
            if n > isize::MAX as usize / std::mem::size_of::<f32>() {
                return Err(oom());
            }
            v.try_reserve_exact(n - v.len()).map_err(|_| oom())?;
            v.resize(n, 0.0);
        }
        Ok(f(&mut v[..n]))
    })
}

/// `a * b + c * d + e * f` elements, or a ValueError naming `op` when it overflows.
pub(crate) fn workspace_len(op: &str, terms: &[(usize, usize)]) -> Result<usize> {
    terms
        .iter()
        .try_fold(0usize, |acc, &(x, y)| {
            x.checked_mul(y).and_then(|p| acc.checked_add(p))
        })
        .ok_or_else(|| {
            anyffi::Error::value_error(format!(
                "{op}: the operands are too large: the float32 workspace size overflows"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_sizes_are_checked() {
        assert_eq!(workspace_len("op", &[(2, 3), (3, 4), (2, 4)]).unwrap(), 26);
        let e = workspace_len("ops.gemm", &[(1 << 40, 1 << 40), (1, 1)]).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().starts_with("ops.gemm: "), "{}", e.message());
        let e = workspace_len(
            "ops.gemm",
            &[(usize::MAX / 2, 1), (usize::MAX / 2, 1), (2, 1)],
        );
        assert_eq!(e.unwrap_err().kind(), "ValueError");
        // past isize::MAX bytes: a MemoryError naming the op, no allocation tried
        let e = with_scratch("ops.linear", usize::MAX / 2, |_| ()).unwrap_err();
        assert_eq!(e.kind(), "MemoryError");
        assert!(
            e.message().starts_with("ops.linear: out of memory"),
            "{}",
            e.message()
        );
        assert_eq!(with_scratch("op", 8, |w| w.len()).unwrap(), 8);
    }

    #[test]
    fn lru_evicts_the_least_recent() {
        let mut l: Lru<i32> = Lru::default();
        let key = |i: i64| {
            let mut k = Key::new();
            k.push(i);
            k
        };
        let old = set_capacity(2);
        l.get_or_plan(&key(1), || Ok(1)).unwrap();
        l.get_or_plan(&key(2), || Ok(2)).unwrap();
        l.get_or_plan(&key(1), || panic!("hit")).unwrap();
        l.get_or_plan(&key(3), || Ok(3)).unwrap(); // evicts 2
        assert_eq!(l.len(), 2);
        assert_eq!(l.get_or_plan(&key(1), || Ok(-1)).unwrap(), 1);
        assert_eq!(l.get_or_plan(&key(2), || Ok(-2)).unwrap(), -2);
        set_capacity(old);
    }
}
