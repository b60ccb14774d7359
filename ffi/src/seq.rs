//! The sequence base shared by `ffi.Array` (71) and `ffi.List` (75): the object header followed
//! by a `TVMFFISeqCell` at offset 24 (spec §2.4), and the element operations both types use.
//!
//! Rationale: header code in other libraries reads and mutates the cell inline, so the cell is
//! the single source of truth: elements are `size` owned `TVMFFIAny`s at `data`, and `data` is
//! released by calling the cell's own `data_deleter` (NULL when the elements live in place).
//!
//! The official List allocates its buffers with `::operator new` and frees them with
//! `::operator delete`, and when it grows a list it keeps the list's old `data_deleter` for the
//! new buffer. A buffer may therefore be allocated by one library and freed by the other's
//! deleter, so ours use the process's own `operator new` / `operator delete` when a C++ runtime
//! is loaded (found with `dlsym`, which also honours a program's replacement operators), and
//! `malloc` / `free` otherwise (what libstdc++'s operators reduce to).

use std::cell::UnsafeCell;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::abi::{TVMFFIAny, TVMFFIObject, TVMFFISeqCell};
use crate::any::Any;
use crate::error::{Error, Result};

/// The lock that serialises the Rust-side operations on mutable containers (`ffi.List`,
/// `ffi.Dict`): both are `Sync` and mutated through `&self`, and the ABI leaves no room for a
/// lock in the object (foreign code shares the layout). One lock for every container, not one
/// per address stripe: a key lookup holds it while `__any_hash__`/`__any_equal__` hooks (user
/// code) run, and those may read other containers; with several locks two threads could take
/// two of them in opposite orders and deadlock. Reentrant: an element's destructor or a key hook
/// running inside an operation may use containers on the same thread. The cost is that
/// container operations on different threads run one at a time (each is short: the lock is
/// never held while removed elements are dropped), and that a key hook must not wait for
/// another thread that uses a container.
static CONTAINER_LOCK: parking_lot::ReentrantMutex<()> = parking_lot::const_reentrant_mutex(());

/// Holds the container lock (see `CONTAINER_LOCK`) for an operation on the container at `obj`.
/// Every Rust operation that reads or writes the storage of a List or Dict that other threads
/// may share takes it; C and C++ callers keep the ABI's contract (no concurrent mutation).
#[inline]
pub fn container_lock(obj: *const TVMFFIObject) -> parking_lot::ReentrantMutexGuard<'static, ()> {
    let _ = obj;
    CONTAINER_LOCK.lock()
}

/// Payload layout of both sequence types: the header and the cell.
#[repr(C)]
pub struct SeqObj {
    pub header: TVMFFIObject,
    cell: UnsafeCell<TVMFFISeqCell>,
}

/// `::operator new(size_t)` / `::operator delete(void*)` of the process, once a C++ runtime is
/// loaded (NULL until then; looked up again until found).
static CXX_NEW: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static CXX_DELETE: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

// `operator new(size_t, const std::nothrow_t&)`: NULL instead of a throw when memory runs out
// (a C++ exception must not reach Rust frames). libstdc++'s calls the (possibly replaced)
// `operator new(size_t)` inside a try block, and its blocks are freed by `operator delete`.
type CxxNew = unsafe extern "C" fn(usize, *const c_void) -> *mut c_void;
type CxxDelete = unsafe extern "C" fn(*mut c_void);

/// The argument `std::nothrow` stands for (an empty struct, never read).
static NOTHROW: u8 = 0;

fn cxx_symbol(cache: &AtomicPtr<c_void>, name: &CStr) -> *mut c_void {
    let p = cache.load(Ordering::Acquire);
    if !p.is_null() {
        return p;
    }
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !p.is_null() {
        cache.store(p, Ordering::Release);
    }
    p
}

/// The C++ allocation pair, when both operators are available.
fn cxx_operators() -> Option<(CxxNew, CxxDelete)> {
    let new = cxx_symbol(&CXX_NEW, c"_ZnwmRKSt9nothrow_t");
    let delete = cxx_symbol(&CXX_DELETE, c"_ZdlPv");
    if new.is_null() || delete.is_null() {
        return None;
    }
    // SAFETY: these are the Itanium-ABI names of `operator new(unsigned long, std::nothrow_t
    // const&)` and `operator delete(void*)`, whose calling convention is the C one here.
    unsafe {
        Some((
            std::mem::transmute::<*mut c_void, CxxNew>(new),
            std::mem::transmute::<*mut c_void, CxxDelete>(delete),
        ))
    }
}

/// `data_deleter` of element buffers allocated by this crate (and of buffers the official List
/// put in lists we created).
pub(crate) unsafe extern "C" fn free_any_buffer(data: *mut c_void) {
    if data.is_null() {
        return;
    }
    match cxx_operators() {
        // SAFETY: the buffer came from `operator new` (or from malloc before the C++ runtime was
        // loaded; libstdc++'s `operator delete` is `free`).
        Some((_, delete)) => unsafe { delete(data) },
        // SAFETY: no C++ runtime is loaded, so the buffer came from `malloc`.
        None => unsafe { libc::free(data) },
    }
}

/// The bytes of a buffer for `n` values, or None past `isize::MAX`.
fn any_buffer_bytes(n: usize) -> Option<usize> {
    n.checked_mul(std::mem::size_of::<TVMFFIAny>())
        .filter(|&b| b <= isize::MAX as usize)
}

/// A buffer for `n` values (NULL for `n == 0`), released by `free_any_buffer`; a MemoryError
/// when the size overflows or the allocator has no such block.
pub(crate) fn try_alloc_any_buffer(n: usize) -> Result<*mut TVMFFIAny> {
    if n == 0 {
        return Ok(ptr::null_mut());
    }
    let bytes = any_buffer_bytes(n).ok_or_else(|| {
        Error::new(
            "MemoryError",
            format!("cannot allocate room for {n} elements: the size overflows"),
        )
    })?;
    let p = match cxx_operators() {
        // SAFETY: the nothrow operator new returns an aligned block or NULL.
        Some((new, _)) => unsafe { new(bytes, &NOTHROW as *const u8 as *const c_void) },
        // SAFETY: plain malloc; checked below.
        None => unsafe { libc::malloc(bytes) },
    } as *mut TVMFFIAny;
    if p.is_null() {
        return Err(Error::new(
            "MemoryError",
            format!("cannot allocate {bytes} bytes for {n} elements"),
        ));
    }
    Ok(p)
}

/// As `try_alloc_any_buffer` for sizes the library chose itself: a size that overflows
/// `isize` panics ("capacity overflow", as `Vec::with_capacity`); an allocator failure aborts,
/// as any allocation failure in Rust does.
pub(crate) fn alloc_any_buffer(n: usize) -> *mut TVMFFIAny {
    let Some(bytes) = any_buffer_bytes(n) else {
        panic!("ffi.List: capacity overflow ({n} elements)");
    };
    match try_alloc_any_buffer(n) {
        Ok(p) => p,
        Err(_) => std::alloc::handle_alloc_error(
            std::alloc::Layout::from_size_align(bytes, 8).expect("checked above"),
        ),
    }
}

impl SeqObj {
    /// A header and a cell (elements are written by the constructor of the concrete type).
    pub(crate) fn new(header: TVMFFIObject, cell: TVMFFISeqCell) -> SeqObj {
        SeqObj {
            header,
            cell: UnsafeCell::new(cell),
        }
    }

    /// The cell, for reads and (by sequences that allow it) in-place mutation.
    #[inline]
    pub(crate) fn cell(&self) -> *mut TVMFFISeqCell {
        self.cell.get()
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        // SAFETY: the cell is plain data owned by the live object.
        unsafe { (*self.cell()).size as usize }
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Allocated element slots.
    #[inline]
    pub fn capacity(&self) -> usize {
        // SAFETY: as for len.
        unsafe { (*self.cell()).capacity as usize }
    }

    /// Pointer to the first element slot.
    #[inline]
    pub(crate) fn data_ptr(&self) -> *mut Any {
        // SAFETY: as for len.
        unsafe { (*self.cell()).data as *mut Any }
    }

    /// The elements, borrowed.
    ///
    /// # Safety
    /// Nobody may change the sequence while the slice is alive.
    #[inline]
    pub(crate) unsafe fn slice_unchecked(&self) -> &[Any] {
        let n = self.len();
        if n == 0 {
            return &[];
        }
        // SAFETY: `size` initialised values at `data`; Any is transparent over TVMFFIAny.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), n) }
    }

    /// An owned copy of element `i`, or the official IndexError.
    #[inline]
    pub fn at(&self, i: i64) -> Result<Any> {
        let n = self.len() as i64;
        if i < 0 || i >= n {
            return Err(Error::index_error(format!("Index {i} out of bounds {n}")));
        }
        // SAFETY: in bounds; the clone takes its own reference.
        Ok(unsafe { (*self.data_ptr().add(i as usize)).clone() })
    }

    /// Drops every element (from the back), leaving capacity untouched.
    pub(crate) fn clear(&self) {
        let cell = self.cell();
        // SAFETY: elements [0, size) are initialised; size shrinks before each drop so a
        // re-entrant deleter never sees a dropped element.
        unsafe {
            while (*cell).size > 0 {
                (*cell).size -= 1;
                ptr::drop_in_place(self.data_ptr().add((*cell).size as usize));
            }
        }
    }
}

impl Drop for SeqObj {
    fn drop(&mut self) {
        self.clear();
        let cell = self.cell.get_mut();
        if let Some(d) = cell.data_deleter {
            // SAFETY: the buffer belongs to this object and `d` is its matching deleter.
            unsafe { d(cell.data) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        assert_eq!(std::mem::size_of::<SeqObj>(), 56);
        assert_eq!(std::mem::offset_of!(SeqObj, cell), 24);
    }
}
