//! Objects (c_api.h "Object"): the 24-byte header, the exact strong/weak reference-count
//! protocol, allocation with deleter glue, and the owning handles `ObjectRef<T>` / `WeakRef<T>`.
//!
//! Rationale: C++ code compiled from the official headers into other libraries manipulates
//! `combined_ref_count` inline, so every operation here is bit-for-bit the protocol of spec §2.2:
//! strong count in the low 32 bits, weak count in the high 32 bits, the weak "1" held collectively
//! by the strong references, and deleter flags 1 (destroy), 2 (free) and 3 (both).

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::abi::{
    kTVMFFIBigInt, kTVMFFIBytes, kTVMFFIObject, kTVMFFIObjectDeleterFlagBitMaskBoth,
    kTVMFFIObjectDeleterFlagBitMaskStrong, kTVMFFIObjectDeleterFlagBitMaskWeak, kTVMFFIShape,
    kTVMFFIStr, TVMFFIObject,
};

/// Count word of a fresh object: one strong reference, and the weak reference they share.
pub const INITIAL_REF_COUNT: u64 = (1 << 32) | 1;
const STRONG_MASK: u64 = 0xFFFF_FFFF;
const WEAK_ONE: u64 = 1 << 32;

/// A Rust type whose `#[repr(C)]` layout starts with a [`TVMFFIObject`] header.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with the header as their first field, and `type_index()`
/// must return the index every instance carries in its header.
pub unsafe trait ObjectType: Sized + 'static {
    /// The registered type key, e.g. `ffi.String`.
    const TYPE_KEY: &'static str;
    /// The runtime type index of this type.
    fn type_index() -> i32;
    /// Whether this type's deleter keeps an object lent to a structural walk ([`while_lent`]).
    /// Strings, bytes, shapes and big integers are leaves no walk reads after a callback, and
    /// skip the check (a thread-local read on every release).
    const KEPT_WHILE_LENT: bool = true;
    /// Whether `type_index` denotes this type or a subtype of it.
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        let mine = Self::type_index();
        type_index == mine || crate::type_table::is_ancestor(mine, type_index)
    }
}

/// The root object: a header and nothing else (`ffi.Object`).
#[repr(C)]
pub struct Object {
    pub header: TVMFFIObject,
}

// SAFETY: header-only, repr(C), and every header reports a type that derives from Object.
unsafe impl ObjectType for Object {
    const TYPE_KEY: &'static str = "ffi.Object";
    fn type_index() -> i32 {
        kTVMFFIObject
    }
    #[inline]
    fn is_instance(_type_index: i32) -> bool {
        true
    }
}

impl TVMFFIObject {
    /// A fresh header for an object of type `T` released by the matching deleter of this crate.
    pub fn new<T: ObjectType>() -> Self {
        Self::with_index::<T>(T::type_index())
    }

    /// A fresh header with an explicit type index (for types that share one Rust layout).
    pub fn with_index<T: ObjectType>(type_index: i32) -> Self {
        TVMFFIObject {
            combined_ref_count: AtomicU64::new(INITIAL_REF_COUNT),
            type_index,
            __padding: 0,
            deleter: Some(drop_and_free::<T>),
        }
    }
}

/// The deleter glue of every object this crate allocates (with `malloc`): flag 1 runs `Drop`,
/// flag 2 frees the block.
unsafe extern "C" fn drop_and_free<T: ObjectType>(obj: *mut c_void, flags: c_int) {
    // SAFETY: this object's deleter, called with `flags`.
    if T::KEPT_WHILE_LENT && unsafe { keep_if_lent(obj, flags) } {
        return;
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
        // SAFETY: the protocol calls flag 1 exactly once, when the last strong reference goes.
        unsafe { std::ptr::drop_in_place(obj as *mut T) };
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
        // SAFETY: the block came from `malloc`/`posix_memalign` in `alloc_raw`.
        unsafe { libc::free(obj) };
    }
}

/// Allocates `size` bytes aligned to `align` with the C allocator (freed with `free`).
fn alloc_raw(size: usize, align: usize) -> *mut u8 {
    let p = if align <= 16 {
        // SAFETY: plain malloc; checked below.
        unsafe { libc::malloc(size.max(1)) }
    } else {
        let mut out = std::ptr::null_mut();
        // SAFETY: align is a power of two and a multiple of the pointer size.
        let rc = unsafe { libc::posix_memalign(&mut out, align, size.max(1)) };
        if rc != 0 {
            std::ptr::null_mut()
        } else {
            out
        }
    };
    if p.is_null() {
        std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(size, align).unwrap());
    }
    p as *mut u8
}

/// Places `value` in a fresh block with `extra` bytes after it and returns the owning handle and a
/// pointer to the extra bytes (uninitialised, aligned to 8). Crate-internal: every caller here
/// builds the header with `TVMFFIObject::new`/`with_index` for the right type and fills the
/// payload's pointers itself; outside the crate this is [`make_object_with_extra`] (unsafe).
pub(crate) fn new_object_with_extra<T: ObjectType>(
    value: T,
    extra: usize,
) -> (ObjectRef<T>, *mut u8) {
    let base = std::mem::size_of::<T>().next_multiple_of(8);
    let total = base
        .checked_add(extra)
        .expect("object size overflows usize");
    let p = alloc_raw(total, std::mem::align_of::<T>()) as *mut T;
    // SAFETY: p is a fresh block of at least size_of::<T>() bytes with T's alignment.
    unsafe { p.write(value) };
    // SAFETY: non-null (alloc_raw aborts otherwise) and initialised above.
    let obj = unsafe { ObjectRef::from_raw_owned(NonNull::new_unchecked(p)) };
    // SAFETY: within the block allocated above.
    let tail = unsafe { (p as *mut u8).add(base) };
    (obj, tail)
}

/// Places `value` in a fresh block and returns the owning handle (crate-internal, see
/// [`new_object_with_extra`]).
pub(crate) fn new_object<T: ObjectType>(value: T) -> ObjectRef<T> {
    new_object_with_extra(value, 0).0
}

/// Places `value` in a fresh block with `extra` bytes after it and returns the owning handle and a
/// pointer to the extra bytes (uninitialised, aligned to 8).
///
/// # Safety
/// `value.header` must be a fresh header made by `TVMFFIObject::new::<T>()` (or `with_index::<T>`
/// with an index whose instances have `T`'s layout), and every field of `value` must satisfy
/// the invariants `T`'s safe methods rely on (e.g. the cell of an `ffi.String` or `ffi.Shape`
/// must describe memory that lives as long as the object). Downcasts trust the header's type
/// index, and `ObjectRef<T>`'s methods trust the payload.
pub unsafe fn make_object_with_extra<T: ObjectType>(
    value: T,
    extra: usize,
) -> (ObjectRef<T>, *mut u8) {
    new_object_with_extra(value, extra)
}

/// Places `value` in a fresh block and returns the owning handle.
///
/// # Safety
/// As for [`make_object_with_extra`].
pub unsafe fn make_object<T: ObjectType>(value: T) -> ObjectRef<T> {
    new_object_with_extra(value, 0).0
}

/// Adds one strong reference.
///
/// # Safety
/// `obj` must point at a live object header.
#[inline]
pub unsafe fn inc_ref(obj: *mut TVMFFIObject) {
    // SAFETY: the caller guarantees a live header.
    unsafe { (*obj).combined_ref_count.fetch_add(1, Ordering::Relaxed) };
}

/// Drops one strong reference, running the object's own deleter as the protocol requires.
///
/// # Safety
/// `obj` must point at a live object header and the caller must own the reference it drops.
#[inline]
pub unsafe fn dec_ref(obj: *mut TVMFFIObject) {
    // SAFETY: the caller owns a strong reference, so the header is alive here.
    let header = unsafe { &*obj };
    let old = header.combined_ref_count.fetch_sub(1, Ordering::Release);
    if old & STRONG_MASK == 1 {
        // SAFETY: we dropped the last strong reference.
        unsafe { release_last_strong(obj, old) };
    }
}

/// How many releases may nest on one thread before further ones are queued (see
/// [`release_last_strong`]). Each level of a release is a few frames of ours plus the
/// deleter's; 128 levels stay far below the smallest thread stacks we meet.
const MAX_RELEASE_DEPTH: u32 = 128;

/// The releases of one thread (no destructor, so it is there until the thread is gone).
struct Releases {
    /// Releases now running, nested: a deleter dropping its members' last references starts
    /// releases inside its own.
    depth: Cell<u32>,
    /// How many releases wait in `DEFERRED_RELEASES`.
    queued: Cell<usize>,
    /// How many objects are lent now ([`while_lent`]), so that a last release looks them up.
    lent: Cell<u32>,
}

thread_local! {
    static RELEASES: Releases = const {
        Releases {
            depth: Cell::new(0),
            queued: Cell::new(0),
            lent: Cell::new(0),
        }
    };
    /// Releases queued past [`MAX_RELEASE_DEPTH`], run by the outermost release of the thread.
    static DEFERRED_RELEASES: RefCell<Vec<(usize, u64)>> = const { RefCell::new(Vec::new()) };
    /// Objects lent by [`while_lent`] on this thread, innermost last.
    static LENT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// Lent objects whose last strong reference went while they were lent: each holds one
    /// strong reference again, released when its lending ends.
    static KEPT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `obj` lent: a pointer read from a container's slot, handed on without a
/// reference of its own (so that its use count stays what the container's holders make it, as
/// in the official structural mutators), while `f` may run callbacks that change that
/// container. Should the object's last strong reference be released meanwhile on this thread
/// (a callback clearing the List or Dict that held it, through this library or through C++
/// code inlined from the official headers), its deleter does not destroy it but keeps it
/// ([`keep_if_lent`]), and it is released when `f` returns: the frames still reading it never
/// read freed memory, and its address is not reused for a new object while it is on a walk's
/// path. Objects whose deleter is not this library's (made by C++ code), and releases on other
/// threads, are not covered: there, as in the official library, a container must not be
/// changed while it is walked.
pub fn while_lent<R>(obj: *mut TVMFFIObject, f: impl FnOnce() -> R) -> R {
    struct Lend(usize);
    impl Drop for Lend {
        fn drop(&mut self) {
            end_lend(self.0);
        }
    }
    if LENT
        .try_with(|l| l.borrow_mut().push(obj as usize))
        .is_err()
    {
        return f();
    }
    RELEASES.with(|r| r.lent.set(r.lent.get() + 1));
    let _lend = Lend(obj as usize);
    f()
}

fn end_lend(obj: usize) {
    let still_lent = LENT
        .try_with(|l| {
            let mut l = l.borrow_mut();
            if let Some(i) = l.iter().rposition(|&p| p == obj) {
                l.remove(i);
            }
            l.contains(&obj)
        })
        .unwrap_or(false);
    RELEASES.with(|r| r.lent.set(r.lent.get() - 1));
    if still_lent {
        return;
    }
    let kept = KEPT
        .try_with(|k| {
            let mut k = k.borrow_mut();
            let i = k.iter().position(|&p| p == obj)?;
            Some(k.swap_remove(i))
        })
        .ok()
        .flatten();
    if kept.is_some() {
        // SAFETY: the strong reference `keep_if_lent` took back, released now that the object
        // is no longer lent.
        unsafe { dec_ref(obj as *mut TVMFFIObject) };
    }
}

/// Called by this library's deleters on flag 1 (the last strong reference is gone): when `obj`
/// is lent now (see [`while_lent`]), takes a strong reference back into `KEPT` and says so, and
/// the deleter then does nothing. The count word becomes one strong reference again, holding
/// the shared weak "1": with flag 3 the word still has that "1" (strong part zero); with flag 1
/// alone the caller drops the "1" after the deleter returns, so it is added back first.
///
/// # Safety
/// `obj` is an object whose deleter was just called with `flags`.
pub(crate) unsafe fn keep_if_lent(obj: *mut c_void, flags: c_int) -> bool {
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong == 0 || RELEASES.with(|r| r.lent.get()) == 0 {
        return false;
    }
    let lent = LENT
        .try_with(|l| l.borrow().contains(&(obj as usize)))
        .unwrap_or(false);
    if !lent
        || KEPT
            .try_with(|k| k.borrow_mut().push(obj as usize))
            .is_err()
    {
        return false;
    }
    // flag 3: the word still holds the weak "1" (nobody drops it before freeing)
    let back = if flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
        1
    } else {
        1 + WEAK_ONE
    };
    // SAFETY: per the caller the block is alive (flag 2 has not run).
    unsafe {
        (*(obj as *mut TVMFFIObject))
            .combined_ref_count
            .fetch_add(back, Ordering::Acquire)
    };
    true
}

/// Runs the deleter of an object whose last strong reference is gone.
///
/// A deleter drops its members' references, so freeing a nested value recurses once per level:
/// an array nested a million deep (`ffi.json.Parse` builds one from 2 MB of text) overflowed
/// the stack when released. Past [`MAX_RELEASE_DEPTH`] nested releases, a release is queued
/// instead, and the outermost release on the thread runs the queue before it returns, so every
/// object is still gone when the caller's `DecRef` returns; only the order among one value's
/// members changes. Strings, bytes, shapes and big integers own no objects and skip the count
/// (it costs a thread-local access: +5 ns on a 15 ns string release). At thread exit, once the
/// queue is gone, releases run directly as before.
#[cold]
unsafe fn release_last_strong(obj: *mut TVMFFIObject, old: u64) {
    // SAFETY: the header is alive until the deleter frees it.
    let ti = unsafe { (*obj).type_index };
    if matches!(ti, kTVMFFIStr | kTVMFFIBytes | kTVMFFIShape | kTVMFFIBigInt) {
        // SAFETY: per the caller, this was the last strong reference.
        unsafe { run_deleter(obj, old) };
        return;
    }
    RELEASES.with(|r| {
        let depth = r.depth.get();
        if depth >= MAX_RELEASE_DEPTH
            // SAFETY: the header is alive until the deleter frees it.
            && deleter_is_ours(unsafe { (*obj).deleter })
            && DEFERRED_RELEASES
                .try_with(|q| q.borrow_mut().push((obj as usize, old)))
                .is_ok()
        {
            r.queued.set(r.queued.get() + 1);
            return;
        }
        r.depth.set(depth + 1);
        // SAFETY: per the caller, this was the last strong reference.
        unsafe { run_deleter(obj, old) };
        if depth == 0 && r.queued.get() > 0 {
            // The outermost release: run what nested ones queued (each may queue more).
            while let Ok(Some((next, next_old))) =
                DEFERRED_RELEASES.try_with(|q| q.borrow_mut().pop())
            {
                r.queued.set(r.queued.get() - 1);
                // SAFETY: queued above in place of this very call.
                unsafe { run_deleter(next as *mut TVMFFIObject, next_old) };
            }
            let _ = DEFERRED_RELEASES.try_with(|q| {
                let mut q = q.borrow_mut();
                if q.capacity() > 4096 {
                    *q = Vec::new();
                }
            });
        }
        r.depth.set(depth);
    })
}

/// Whether `deleter` is this library's code, whose objects may be released later in the same
/// outermost `DecRef` (queued past [`MAX_RELEASE_DEPTH`]). A foreign deleter (a C or C++
/// object's) runs at once, however deep: its code may count on a child being gone when its
/// `DecRef` returns, as the official library's synchronous release guarantees (a C parent that
/// its child's deleter reads read freed memory when the child was queued; session 24 audit).
/// Asked only past the depth limit; the last answer is kept per thread (a deep chain has few
/// deleters).
fn deleter_is_ours(deleter: Option<unsafe extern "C" fn(*mut c_void, i32)>) -> bool {
    let Some(d) = deleter else { return true };
    thread_local!(static LAST: Cell<(usize, bool)> = const { Cell::new((0, false)) });
    let d = d as usize;
    if let Ok((p, ours)) = LAST.try_with(Cell::get) {
        if p == d {
            return ours;
        }
    }
    let base = |addr: usize| {
        // SAFETY: dladdr only reads the loader's tables; `info` is a plain out-parameter.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            (libc::dladdr(addr as *const c_void, &mut info) != 0).then_some(info.dli_fbase as usize)
        }
    };
    static OWN_BASE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let own = *OWN_BASE.get_or_init(|| base(deleter_is_ours as *const () as usize));
    let ours = own.is_some() && base(d) == own;
    let _ = LAST.try_with(|l| l.set((d, ours)));
    ours
}

/// The deleter calls for an object whose last strong reference is gone (count word `old`
/// before the drop).
unsafe fn run_deleter(obj: *mut TVMFFIObject, old: u64) {
    // SAFETY: the header outlives the strong part until the weak release below.
    let deleter = unsafe { (*obj).deleter };
    fence(Ordering::Acquire);
    let Some(deleter) = deleter else {
        // nothing to call, but the shared weak "1" still goes (weak references may read the
        // count, as the official DecRef leaves it)
        if old != INITIAL_REF_COUNT {
            // SAFETY: the block is alive while the shared weak "1" is held.
            unsafe { dec_weak(obj) };
        }
        return;
    };
    if old == INITIAL_REF_COUNT {
        // SAFETY: no strong or weak reference remains.
        unsafe { deleter(obj as *mut c_void, kTVMFFIObjectDeleterFlagBitMaskBoth) };
    } else {
        // SAFETY: the last strong reference is gone; weak ones keep the block.
        unsafe { deleter(obj as *mut c_void, kTVMFFIObjectDeleterFlagBitMaskStrong) };
        // SAFETY: the block is alive while the shared weak "1" is held.
        unsafe { dec_weak(obj) };
    }
}

/// Adds one weak reference.
///
/// # Safety
/// `obj` must point at a live object header.
#[inline]
pub unsafe fn inc_weak(obj: *mut TVMFFIObject) {
    // SAFETY: the caller guarantees a live header.
    unsafe {
        (*obj)
            .combined_ref_count
            .fetch_add(WEAK_ONE, Ordering::Relaxed)
    };
}

/// Drops one weak reference, freeing the block with the object's deleter when it is the last.
///
/// # Safety
/// The caller must own the weak reference it drops.
#[inline]
pub unsafe fn dec_weak(obj: *mut TVMFFIObject) {
    // SAFETY: the block is alive while a weak reference is held.
    let header = unsafe { &*obj };
    let deleter = header.deleter;
    if header
        .combined_ref_count
        .fetch_sub(WEAK_ONE, Ordering::Release)
        == WEAK_ONE
    {
        fence(Ordering::Acquire);
        if let Some(d) = deleter {
            // SAFETY: nothing references the block any more.
            unsafe { d(obj as *mut c_void, kTVMFFIObjectDeleterFlagBitMaskWeak) };
        }
    }
}

/// Tries to turn a weak reference into a strong one (fails once the strong count is zero).
///
/// # Safety
/// The caller must hold a weak reference to `obj`.
pub unsafe fn try_promote_weak(obj: *mut TVMFFIObject) -> bool {
    // SAFETY: the weak reference keeps the header alive.
    let count = unsafe { &(*obj).combined_ref_count };
    let mut cur = count.load(Ordering::Relaxed);
    loop {
        if cur & STRONG_MASK == 0 {
            return false;
        }
        match count.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

/// Strong count of a live object.
///
/// # Safety
/// `obj` must point at a live object header.
#[inline]
pub unsafe fn strong_count(obj: *const TVMFFIObject) -> u32 {
    // SAFETY: the caller guarantees a live header.
    (unsafe { (*obj).combined_ref_count.load(Ordering::Relaxed) } & STRONG_MASK) as u32
}

/// Whether the caller's reference is the only one, strong or weak (no `WeakRef` can
/// upgrade to a second handle): the condition for mutating a shared-immutable object in place.
///
/// # Safety
/// `obj` must point at a live object header.
#[inline]
pub unsafe fn is_sole_owner(obj: *const TVMFFIObject) -> bool {
    // SAFETY: the caller guarantees a live header.
    unsafe { (*obj).combined_ref_count.load(Ordering::Acquire) == INITIAL_REF_COUNT }
}

/// Weak count of a live object (including the weak reference the strong ones share).
///
/// # Safety
/// `obj` must point at a live object header.
#[inline]
pub unsafe fn weak_count(obj: *const TVMFFIObject) -> u32 {
    // SAFETY: the caller guarantees a live header.
    (unsafe { (*obj).combined_ref_count.load(Ordering::Relaxed) } >> 32) as u32
}

/// A strong, owning reference to an object of type `T` (`ObjectPtr<T>` / `ObjectRef` in C++).
#[repr(transparent)]
pub struct ObjectRef<T: ObjectType> {
    ptr: NonNull<T>,
    _marker: PhantomData<T>,
}

// SAFETY: the reference count is atomic; the payload decides whether sharing is allowed.
unsafe impl<T: ObjectType + Send + Sync> Send for ObjectRef<T> {}
// SAFETY: as above.
unsafe impl<T: ObjectType + Send + Sync> Sync for ObjectRef<T> {}

impl<T: ObjectType> ObjectRef<T> {
    /// Adopts a reference the caller owns (no count change).
    ///
    /// # Safety
    /// `ptr` must point at a live `T` and the caller must give up one strong reference to it.
    #[inline]
    pub unsafe fn from_raw_owned(ptr: NonNull<T>) -> Self {
        ObjectRef {
            ptr,
            _marker: PhantomData,
        }
    }

    /// Takes a new strong reference to a borrowed object.
    ///
    /// # Safety
    /// `ptr` must point at a live `T`.
    #[inline]
    pub unsafe fn from_raw_borrowed(ptr: NonNull<T>) -> Self {
        // SAFETY: live per the caller.
        unsafe { inc_ref(ptr.as_ptr() as *mut TVMFFIObject) };
        ObjectRef {
            ptr,
            _marker: PhantomData,
        }
    }

    /// Gives the reference away as a raw header pointer ("new reference" for the receiver).
    #[inline]
    pub fn into_raw(self) -> *mut TVMFFIObject {
        let p = self.ptr.as_ptr() as *mut TVMFFIObject;
        std::mem::forget(self);
        p
    }

    /// Lends the raw header pointer; the reference stays with `self`.
    #[inline]
    pub fn as_raw(&self) -> *mut TVMFFIObject {
        self.ptr.as_ptr() as *mut TVMFFIObject
    }

    /// The payload pointer.
    #[inline]
    pub fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// The object header.
    #[inline]
    pub fn header(&self) -> &TVMFFIObject {
        // SAFETY: every ObjectType starts with its header and we hold a strong reference.
        unsafe { &*(self.ptr.as_ptr() as *const TVMFFIObject) }
    }

    /// The runtime type index stored in the header.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.header().type_index
    }

    /// The registered key of the runtime type.
    pub fn type_key(&self) -> String {
        crate::type_table::type_key_of(self.type_index())
    }

    /// Number of strong references.
    #[inline]
    pub fn strong_count(&self) -> u32 {
        // SAFETY: alive while self exists.
        unsafe { strong_count(self.as_raw()) }
    }

    /// Whether both handles point at the same object.
    #[inline]
    pub fn same_as<U: ObjectType>(&self, other: &ObjectRef<U>) -> bool {
        self.as_raw() == other.as_raw()
    }

    /// Forgets the static type.
    #[inline]
    pub fn upcast(self) -> ObjectRef<Object> {
        // SAFETY: every object starts with the header, which is all `Object` is.
        unsafe { ObjectRef::from_raw_owned(NonNull::new_unchecked(self.into_raw() as *mut Object)) }
    }

    /// A weak reference to the same object.
    pub fn downgrade(&self) -> WeakRef<T> {
        // SAFETY: alive while self exists.
        unsafe { inc_weak(self.as_raw()) };
        WeakRef { ptr: self.ptr }
    }
}

impl ObjectRef<Object> {
    /// Checked downcast; gives the reference back unchanged on a type mismatch.
    pub fn downcast<T: ObjectType>(self) -> Result<ObjectRef<T>, ObjectRef<Object>> {
        if T::is_instance(self.type_index()) {
            // SAFETY: the runtime type is T or derives from it, and T extends its parent layout.
            Ok(unsafe {
                ObjectRef::from_raw_owned(NonNull::new_unchecked(self.into_raw() as *mut T))
            })
        } else {
            Err(self)
        }
    }

    /// Checked downcast of a borrowed reference.
    pub fn downcast_ref<T: ObjectType>(&self) -> Option<&ObjectRef<T>> {
        if T::is_instance(self.type_index()) {
            // SAFETY: ObjectRef is a transparent pointer and the type check passed.
            Some(unsafe { &*(self as *const ObjectRef<Object> as *const ObjectRef<T>) })
        } else {
            None
        }
    }
}

impl<T: ObjectType> Deref for ObjectRef<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a strong reference keeps the payload alive and initialised.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: ObjectType> Clone for ObjectRef<T> {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: alive while self exists.
        unsafe { inc_ref(self.as_raw()) };
        ObjectRef {
            ptr: self.ptr,
            _marker: PhantomData,
        }
    }
}

impl<T: ObjectType> Drop for ObjectRef<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own exactly one strong reference.
        unsafe { dec_ref(self.as_raw()) };
    }
}

impl<T: ObjectType> fmt::Debug for ObjectRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{:p}", self.type_key(), self.ptr)
    }
}

/// A weak reference: keeps the memory, not the object, alive.
pub struct WeakRef<T: ObjectType> {
    ptr: NonNull<T>,
}

// SAFETY: as for ObjectRef.
unsafe impl<T: ObjectType + Send + Sync> Send for WeakRef<T> {}
// SAFETY: as for ObjectRef.
unsafe impl<T: ObjectType + Send + Sync> Sync for WeakRef<T> {}

impl<T: ObjectType> WeakRef<T> {
    /// A strong reference, or `None` once the object has been destroyed.
    pub fn upgrade(&self) -> Option<ObjectRef<T>> {
        // SAFETY: our weak reference keeps the header alive.
        if unsafe { try_promote_weak(self.ptr.as_ptr() as *mut TVMFFIObject) } {
            // SAFETY: promotion added the strong reference we adopt.
            Some(unsafe { ObjectRef::from_raw_owned(self.ptr) })
        } else {
            None
        }
    }
}

impl<T: ObjectType> Clone for WeakRef<T> {
    fn clone(&self) -> Self {
        // SAFETY: our weak reference keeps the header alive.
        unsafe { inc_weak(self.ptr.as_ptr() as *mut TVMFFIObject) };
        WeakRef { ptr: self.ptr }
    }
}

impl<T: ObjectType> Drop for WeakRef<T> {
    fn drop(&mut self) {
        // SAFETY: we own one weak reference.
        unsafe { dec_weak(self.ptr.as_ptr() as *mut TVMFFIObject) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[repr(C)]
    struct Probe {
        header: TVMFFIObject,
        drops: Arc<AtomicUsize>,
    }
    // SAFETY: repr(C), header first.
    unsafe impl ObjectType for Probe {
        const TYPE_KEY: &'static str = "ffi.Object";
        fn type_index() -> i32 {
            kTVMFFIObject
        }
    }
    impl Drop for Probe {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn probe() -> (ObjectRef<Probe>, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let obj = new_object(Probe {
            header: TVMFFIObject::new::<Probe>(),
            drops: drops.clone(),
        });
        (obj, drops)
    }

    fn word(o: &ObjectRef<Probe>) -> u64 {
        o.header().combined_ref_count.load(Ordering::Relaxed)
    }

    #[test]
    fn fresh_object_has_one_strong_and_shared_weak() {
        let (o, drops) = probe();
        assert_eq!(word(&o), 0x1_0000_0001);
        let c = o.clone();
        assert_eq!(word(&o), 0x1_0000_0002);
        drop(c);
        assert_eq!(o.strong_count(), 1);
        drop(o);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn weak_outlives_strong_and_cannot_upgrade() {
        let (o, drops) = probe();
        let w = o.downgrade();
        assert_eq!(word(&o), 0x2_0000_0001);
        let again = w.upgrade().expect("alive");
        assert_eq!(again.strong_count(), 2);
        drop(again);
        drop(o);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "destroyed when the last strong ref went"
        );
        assert!(w.upgrade().is_none());
        drop(w);
    }

    /// The C++ header's inline `DecRef`: one atomic decrement, then the deleter itself with
    /// flag 3, or flag 1 and the weak "1" dropped after it.
    unsafe fn cxx_dec_ref(obj: *mut TVMFFIObject) {
        // SAFETY: per the caller, a live object and a strong reference it owns.
        unsafe {
            let old = (*obj).combined_ref_count.fetch_sub(1, Ordering::AcqRel);
            let deleter = (*obj).deleter.unwrap();
            if old == INITIAL_REF_COUNT {
                deleter(obj as *mut c_void, kTVMFFIObjectDeleterFlagBitMaskBoth);
            } else if old & STRONG_MASK == 1 {
                deleter(obj as *mut c_void, kTVMFFIObjectDeleterFlagBitMaskStrong);
                if (*obj)
                    .combined_ref_count
                    .fetch_sub(WEAK_ONE, Ordering::AcqRel)
                    == WEAK_ONE
                {
                    deleter(obj as *mut c_void, kTVMFFIObjectDeleterFlagBitMaskWeak);
                }
            }
        }
    }

    #[test]
    fn a_lent_object_released_meanwhile_is_kept_until_the_lending_ends() {
        for cxx in [false, true] {
            for with_weak in [false, true] {
                let (o, drops) = probe();
                let weak = with_weak.then(|| o.downgrade());
                let raw = o.into_raw();
                let before_end = while_lent(raw, || {
                    // the last strong reference goes while the object is lent
                    if cxx {
                        // SAFETY: the reference `into_raw` kept.
                        unsafe { cxx_dec_ref(raw) };
                    } else {
                        // SAFETY: the reference `into_raw` kept.
                        unsafe { dec_ref(raw) };
                    }
                    // kept: not destroyed, one strong reference (the keeper's), the weak ones
                    // as they were
                    // SAFETY: the block is alive (kept).
                    let w = unsafe { (*raw).combined_ref_count.load(Ordering::Relaxed) };
                    (drops.load(Ordering::SeqCst), w)
                });
                let weak_part = if with_weak { 2 } else { 1 };
                assert_eq!(
                    before_end,
                    (0, (weak_part << 32) | 1),
                    "cxx {cxx} weak {with_weak}"
                );
                assert_eq!(
                    drops.load(Ordering::SeqCst),
                    1,
                    "released when the lending ended"
                );
                if let Some(w) = weak {
                    assert!(w.upgrade().is_none());
                }
            }
        }
    }

    #[test]
    fn nested_lendings_keep_the_object_until_the_outermost_ends() {
        let (o, drops) = probe();
        let raw = o.into_raw();
        let (inner, outer) = while_lent(raw, || {
            let inner = while_lent(raw, || {
                // SAFETY: the object's only reference, released inside both lendings.
                unsafe { dec_ref(raw) };
                drops.load(Ordering::SeqCst)
            });
            (inner, drops.load(Ordering::SeqCst))
        });
        assert_eq!((inner, outer), (0, 0));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // a lent object whose references stay: lending changes no count
        let (o, drops) = probe();
        let during = while_lent(o.as_raw(), || word(&o));
        assert_eq!((during, word(&o)), (INITIAL_REF_COUNT, INITIAL_REF_COUNT));
        drop(o);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn upcast_downcast_round_trip() {
        let (o, _) = probe();
        let raw = o.as_raw();
        let base = o.upcast();
        assert_eq!(base.as_raw(), raw);
        let back = base.downcast::<Probe>().ok().unwrap();
        assert_eq!(back.strong_count(), 1);
    }

    #[test]
    fn concurrent_inc_dec_balances() {
        let (o, drops) = probe();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let o = ObjectRef::clone(&o);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let c = o.clone();
                        drop(c);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(o.strong_count(), 1);
        drop(o);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
