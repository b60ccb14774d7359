//! The type table (c_api.h "Type reflection"): static entries, index allocation with child slots
//! and overflow (spec §3.2), key lookup, stable `TVMFFITypeInfo` pointers, reflected fields,
//! methods, metadata and type-attribute columns.
//!
//! Rationale: header-compiled C++ stores `TVMFFITypeInfo*` (ancestors are pointers) and reads them
//! without locks, so entries are leaked boxes that never move, and the index→entry map is a
//! two-level array of atomics that readers walk without taking a lock. Writers (registration,
//! normally at load time) serialise on one mutex.

use std::collections::BTreeMap;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::LazyLock;

use parking_lot::Mutex;

use crate::abi::*;
use crate::any::Any;
use crate::error::{Error, Result};

const CHUNK_BITS: usize = 10;
const CHUNK: usize = 1 << CHUNK_BITS;
const NUM_CHUNKS: usize = 256;
/// Largest number of type indices the table can hold.
pub const MAX_TYPES: usize = CHUNK * NUM_CHUNKS;

/// One registered type. `info` comes first so that `*const TypeEntry` is a `*const TVMFFITypeInfo`.
#[repr(C)]
pub struct TypeEntry {
    pub info: TVMFFITypeInfo,
    key: Box<str>,
    /// The key's bytes and a NUL, which `info.type_key` points at (C readers print it with
    /// `%s`, as the official table's keys allow; an empty key still has a valid pointer).
    key_c: Box<[u8]>,
    ancestors: Box<[*const TVMFFITypeInfo]>,
    num_slots: i32,
    allocated_slots: i32,
    can_overflow: bool,
    fields: Vec<TVMFFIFieldInfo>,
    methods: Vec<TVMFFIMethodInfo>,
    metadata: Option<Box<TVMFFITypeMetadata>>,
    /// Backing storage of the byte arrays inside `fields`, `methods` and `metadata`.
    strings: Vec<Box<[u8]>>,
    /// Earlier buffers of `fields` and `methods`, outgrown but kept: readers take no lock, so
    /// one may still read a buffer `info` pointed at before a registration grew it
    /// (`push_published`).
    retired_fields: Vec<Vec<TVMFFIFieldInfo>>,
    retired_methods: Vec<Vec<TVMFFIMethodInfo>>,
    /// What the structural walks derived from this entry (`structural::type_facts`), owned by
    /// them: NULL until a walk meets an object of the type.
    pub(crate) walk_facts: AtomicPtr<std::ffi::c_void>,
}

/// Appends `item` to a field or method list that lock-free readers see through `info`: a full
/// buffer is not reallocated in place (that frees the old one under a reader: a `ffi.ReprPrint`
/// on another thread segfaulted while fields were registered, session 24 audit) but copied into
/// a bigger one, the old one retired. Returns the new count.
fn push_published<T>(list: &mut Vec<T>, retired: &mut Vec<Vec<T>>, item: T) -> usize {
    if list.len() == list.capacity() {
        let mut grown = Vec::with_capacity((2 * list.capacity()).max(8));
        // (moved, not dropped: the old buffer keeps its bytes for readers still on it)
        grown.append(list);
        retired.push(std::mem::replace(list, grown));
    }
    list.push(item);
    list.len()
}

/// Publishes a grown list: the pointer, then the count (release), so a reader that loads the
/// count and then the pointer (`published_count`, `published_ptr`) never indexes a buffer
/// shorter than the count it saw.
///
/// # Safety
/// `ptr` and `count` are the slots of a live type info; `data` holds `n` items.
unsafe fn publish<T>(ptr: &mut *const T, count: &mut i32, data: *const T, n: usize) {
    // SAFETY: the slots are aligned and live; readers access them atomically or as C does.
    unsafe {
        AtomicPtr::from_ptr(ptr as *mut *const T as *mut *mut T)
            .store(data as *mut T, Ordering::Release);
        std::sync::atomic::AtomicI32::from_ptr(count).store(n as i32, Ordering::Release);
    }
}

/// `*count` as `publish` stores it (acquire: the items and pointer stored before are seen).
///
/// # Safety
/// `count` is the slot of a live type info.
pub(crate) unsafe fn published_count(count: *const i32) -> i32 {
    // SAFETY: per the caller; only atomic stores write it after registration.
    unsafe { std::sync::atomic::AtomicI32::from_ptr(count as *mut i32).load(Ordering::Acquire) }
}

/// `*ptr` as `publish` stores it.
///
/// # Safety
/// `ptr` is the slot of a live type info.
pub(crate) unsafe fn published_ptr<T>(ptr: *const *const T) -> *const T {
    // SAFETY: per the caller.
    unsafe { AtomicPtr::from_ptr(ptr as *mut *mut T).load(Ordering::Acquire) }
}

/// The published items of a field or method list: the count, then the pointer.
///
/// # Safety
/// `ptr` and `count` are the slots of a live type info, published by `publish`.
unsafe fn published_slice<'a, T>(ptr: &'a *const T, count: &'a i32) -> &'a [T] {
    // SAFETY: per the caller; published buffers are never freed.
    unsafe {
        let n = published_count(count).max(0) as usize;
        let p = published_ptr(ptr);
        if n == 0 || p.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p, n)
        }
    }
}

impl TypeEntry {
    /// Owned copies of a registration's `(name, doc, metadata)` byte arrays, kept as long as
    /// the entry (the caller's buffers may go away after the call).
    fn keep_text(
        &mut self,
        name: &TVMFFIByteArray,
        doc: &TVMFFIByteArray,
        metadata: &TVMFFIByteArray,
    ) -> [TVMFFIByteArray; 3] {
        [name, doc, metadata].map(|b| leak_bytes(&mut self.strings, b))
    }

    /// ValueError if a field called `name` is already registered on this type.
    fn check_new_field(&self, name: &TVMFFIByteArray) -> Result<()> {
        // SAFETY: the caller passes a valid byte array.
        let name = unsafe { byte_array_str(name) };
        let taken = |f: &TVMFFIFieldInfo| {
            // SAFETY: field names are kept as owned copies in `strings`.
            unsafe { byte_array_str(&f.name) == name }
        };
        if self.fields.iter().any(taken) {
            return Err(Error::value_error(format!(
                "TVMFFITypeRegisterField: field `{name}` is already registered on type `{}`",
                self.key
            )));
        }
        // A field that shadows an ancestor's is registered, with a warning on stderr for each
        // ancestor (root first) that has it, in the official library's words.
        for &a in &self.ancestors {
            // SAFETY: ancestors' infos live in the table for the process's lifetime, their
            // field lists published by `publish`.
            let (key, fields) = unsafe {
                let a = &*a;
                (
                    byte_array_str(&a.type_key),
                    published_slice(&a.fields, &a.num_fields),
                )
            };
            for _ in fields.iter().filter(|f| taken(f)) {
                eprintln!(
                    "[WARNING] Field \"{name}\" in type \"{}\" duplicates an ancestor field in \
                     \"{key}\". Child types should not re-register inherited fields.",
                    self.key
                );
            }
        }
        Ok(())
    }

    /// The type key.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// Reflected fields registered on this type itself (not its ancestors), as published so
    /// far (another thread may be registering more: the slice stays valid, a grown array's
    /// old buffer is kept).
    pub fn fields(&self) -> &[TVMFFIFieldInfo] {
        // SAFETY: this entry's published pointer and count (`publish`).
        unsafe { published_slice(&self.info.fields, &self.info.num_fields) }
    }
    /// Reflected methods registered on this type itself (as `fields`).
    pub fn methods(&self) -> &[TVMFFIMethodInfo] {
        // SAFETY: as above.
        unsafe { published_slice(&self.info.methods, &self.info.num_methods) }
    }
    /// Registered metadata, if any.
    pub fn metadata(&self) -> Option<&TVMFFITypeMetadata> {
        self.metadata.as_deref()
    }
    /// Ancestors, root first.
    pub fn ancestors(&self) -> &[*const TVMFFITypeInfo] {
        &self.ancestors
    }
}

/// A type-attribute column; its address is stable, `col.data/size` follow `values`.
struct Column {
    col: TVMFFITypeAttrColumn,
    values: Vec<TVMFFIAny>,
    /// Earlier buffers of `values`, kept alive for lock-free readers.
    retired: Vec<Vec<TVMFFIAny>>,
}

struct Writer {
    key_to_index: BTreeMap<Box<str>, i32>,
    counter: i32,
    columns: BTreeMap<Box<str>, *mut Column>,
}

struct Table {
    chunks: [AtomicPtr<[AtomicPtr<TypeEntry>; CHUNK]>; NUM_CHUNKS],
    writer: Mutex<Writer>,
    /// The `EAGER_COLUMNS`, in order, set at creation: found without the writer lock (walks
    /// and printers look a hook up per object, on any thread).
    eager: [AtomicPtr<Column>; EAGER_COLUMNS.len()],
}

// SAFETY: raw pointers in Writer point at leaked, never-freed entries and columns, only mutated
// under the writer lock.
unsafe impl Send for Writer {}

/// Type-attribute columns the official library creates eagerly: header code caches their
/// pointers (even when NULL) on first use, so they must exist before any foreign code runs.
const EAGER_COLUMNS: &[&str] = &[
    "__ffi_enum__",
    "__any_hash__",
    "__any_equal__",
    "__s_equal__",
    "__s_hash__",
    "__s_visit__",
    "__s_mutate__",
    "__s_maybe_inplace_mutate__",
    "__data_to_json__",
    "__data_from_json__",
    "__ffi_shallow_copy__",
    "__ffi_repr__",
    "__ffi_hash__",
    "__ffi_eq__",
    "__ffi_compare__",
    "__ffi_new__",
    "__ffi_init__",
];

const STATIC_POD_KEYS: &[(i32, &str)] = &[
    (kTVMFFINone, "None"),
    (kTVMFFIInt, "int"),
    (kTVMFFIBool, "bool"),
    (kTVMFFIFloat, "float"),
    (kTVMFFIOpaquePtr, "void*"),
    (kTVMFFIDataType, "DataType"),
    (kTVMFFIDevice, "Device"),
    (kTVMFFIDLTensorPtr, "DLTensor*"),
    (kTVMFFIRawStr, "const char*"),
    (kTVMFFIByteArrayPtr, "TVMFFIByteArray*"),
    (kTVMFFIObjectRValueRef, "ObjectRValueRef"),
    (kTVMFFISmallStr, "ffi.SmallStr"),
    (kTVMFFISmallBytes, "ffi.SmallBytes"),
    (kTVMFFIUnchanged, "ffi.Unchanged"),
];

const STATIC_OBJECT_KEYS: &[(i32, &str)] = &[
    (kTVMFFIStr, "ffi.String"),
    (kTVMFFIBigInt, "ffi.BigInt"),
    (kTVMFFIBytes, "ffi.Bytes"),
    (kTVMFFIError, "ffi.Error"),
    (kTVMFFIFunction, "ffi.Function"),
    (kTVMFFIShape, "ffi.Shape"),
    (kTVMFFITensor, "ffi.Tensor"),
    (kTVMFFIArray, "ffi.Array"),
    (kTVMFFIList, "ffi.List"),
    (kTVMFFIMap, "ffi.Map"),
    (kTVMFFIDict, "ffi.Dict"),
    (kTVMFFIModule, "ffi.Module"),
    (kTVMFFIOpaquePyObject, "ffi.OpaquePyObject"),
    (kTVMFFIVisitInterrupt, "ffi.VisitInterrupt"),
];

/// Bumped after every registration of a field or of metadata, for caches of what walks read
/// per object type (`structural::type_facts`).
static LAYOUT_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The current `LAYOUT_GENERATION`: a cache of type fields or metadata made when it had another
/// value may be stale.
#[inline]
pub fn layout_generation() -> u64 {
    LAYOUT_GENERATION.load(Ordering::Acquire)
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let table = Table {
        chunks: [const { AtomicPtr::new(ptr::null_mut()) }; NUM_CHUNKS],
        writer: Mutex::new(Writer {
            key_to_index: BTreeMap::new(),
            counter: kTVMFFIDynObjectBegin,
            columns: BTreeMap::new(),
        }),
        eager: [const { AtomicPtr::new(ptr::null_mut()) }; EAGER_COLUMNS.len()],
    };
    {
        let mut w = table.writer.lock();
        let alloc =
            |w: &mut Writer, key: &str, ti: i32, depth: i32, overflow: bool, parent: i32| {
                table
                    .alloc_locked(w, key, ti, depth, 0, overflow, parent)
                    .expect("static type entry");
            };
        alloc(&mut w, "ffi.Object", kTVMFFIObject, 0, true, -1);
        for &(ti, key) in STATIC_POD_KEYS {
            alloc(&mut w, key, ti, 0, false, -1);
        }
        for &(ti, key) in STATIC_OBJECT_KEYS {
            alloc(&mut w, key, ti, 1, false, kTVMFFIObject);
        }
        for (slot, name) in table.eager.iter().zip(EAGER_COLUMNS) {
            slot.store(table.column_locked(&mut w, name), Ordering::Release);
        }
    }
    // Metadata after the writer lock is released: registration re-enters the table.
    let object_meta = TVMFFITypeMetadata {
        doc: TVMFFIByteArray {
            data: ptr::null(),
            size: 0,
        },
        creator: None,
        total_size: 24,
        structural_eq_hash_kind: kTVMFFISEqHashKindUnsupported,
    };
    table
        .register_metadata(kTVMFFIObject, &object_meta)
        .expect("ffi.Object metadata");
    let bigint_meta = TVMFFITypeMetadata {
        total_size: 32,
        ..object_meta
    };
    table
        .register_metadata(kTVMFFIBigInt, &bigint_meta)
        .expect("ffi.BigInt metadata");
    // The dynamic types of the library itself take the first dynamic indices (128 onwards, in
    // the official order) before any foreign library can allocate one.
    crate::builtin_types::register(&table).expect("built-in reflected types");
    // Library-owned attribute entries (BigInt's key hash/equality), present before any foreign
    // header code can hash a key.
    for (name, index, value) in crate::hash::builtin_attr_entries() {
        table
            .register_attr(index, name, &value)
            .expect("built-in type attribute");
    }
    table
});

/// `std::hash<std::string_view>` of libstdc++ (`_Hash_bytes` with seed 0xc70f6907), which the
/// official library stores as `type_key_hash` and structural hashing mixes in.
pub fn type_key_hash(bytes: &[u8]) -> u64 {
    const MUL: u64 = (0xc6a4_a793u64 << 32) + 0x5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let mut hash = 0xc70f_6907u64 ^ (bytes.len() as u64).wrapping_mul(MUL);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let word = u64::from_le_bytes(c.try_into().unwrap());
        hash ^= shift_mix(word.wrapping_mul(MUL)).wrapping_mul(MUL);
        hash = hash.wrapping_mul(MUL);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let word = rest
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64);
        hash ^= word;
        hash = hash.wrapping_mul(MUL);
    }
    shift_mix(shift_mix(hash).wrapping_mul(MUL))
}

fn leak_bytes(strings: &mut Vec<Box<[u8]>>, src: &TVMFFIByteArray) -> TVMFFIByteArray {
    if src.data.is_null() || src.size == 0 {
        return TVMFFIByteArray {
            data: ptr::null(),
            size: 0,
        };
    }
    // SAFETY: the registering caller passes a valid byte range.
    let bytes = unsafe { std::slice::from_raw_parts(src.data as *const u8, src.size) };
    let mut owned = Vec::with_capacity(bytes.len() + 1);
    owned.extend_from_slice(bytes);
    owned.push(0);
    let owned = owned.into_boxed_slice();
    let out = TVMFFIByteArray {
        data: owned.as_ptr() as *const _,
        size: bytes.len(),
    };
    strings.push(owned);
    out
}

/// Reads a byte array as UTF-8 (lossy) for messages and keys.
///
/// # Safety
/// `b` must describe readable memory (or be empty).
pub unsafe fn byte_array_str(b: &TVMFFIByteArray) -> std::borrow::Cow<'_, str> {
    if b.data.is_null() || b.size == 0 {
        return "".into();
    }
    // SAFETY: per the caller.
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(b.data as *const u8, b.size) })
}

impl Table {
    #[inline]
    fn get(&self, index: i32) -> *mut TypeEntry {
        if index < 0 || index as usize >= MAX_TYPES {
            return ptr::null_mut();
        }
        let idx = index as usize;
        let chunk = self.chunks[idx >> CHUNK_BITS].load(Ordering::Acquire);
        if chunk.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: chunks are leaked and never freed.
        unsafe { (*chunk)[idx & (CHUNK - 1)].load(Ordering::Acquire) }
    }

    fn set(&self, index: i32, entry: *mut TypeEntry) {
        let idx = index as usize;
        let slot = &self.chunks[idx >> CHUNK_BITS];
        let mut chunk = slot.load(Ordering::Acquire);
        if chunk.is_null() {
            let fresh: Box<[AtomicPtr<TypeEntry>; CHUNK]> =
                Box::new([const { AtomicPtr::new(ptr::null_mut()) }; CHUNK]);
            chunk = Box::into_raw(fresh);
            slot.store(chunk, Ordering::Release);
        }
        // SAFETY: chunk was leaked above or earlier; only the writer (locked) stores.
        unsafe { (*chunk)[idx & (CHUNK - 1)].store(entry, Ordering::Release) };
    }

    #[allow(clippy::too_many_arguments)]
    fn alloc_locked(
        &self,
        w: &mut Writer,
        key: &str,
        static_index: i32,
        depth: i32,
        child_slots: i32,
        mut can_overflow: bool,
        parent_index: i32,
    ) -> Result<i32> {
        if let Some(&ti) = w.key_to_index.get(key) {
            return Ok(ti);
        }
        if parent_index == -2 {
            return Ok(-2);
        }
        if child_slots < 0 {
            return Err(Error::value_error(format!(
                "TVMFFITypeGetOrAllocIndex: `num_child_slots` of `{key}` must be >= 0, got {child_slots}"
            )));
        }
        let parent = if parent_index >= 0 {
            let p = self.get(parent_index);
            if p.is_null() {
                return Err(Error::value_error(format!(
                    "TVMFFITypeGetOrAllocIndex: parent type index {parent_index} of `{key}` is not registered"
                )));
            }
            Some(p)
        } else {
            None
        };
        let index = if static_index >= 0 {
            // (at or past the next dynamic index, a later dynamic type would take the same
            // index: the official table refuses it too, by exiting)
            if static_index >= w.counter {
                return Err(Error::runtime_error(format!(
                    "TVMFFITypeGetOrAllocIndex: static index {static_index} of `{key}` is not \
                     below the next dynamic type index {}",
                    w.counter
                )));
            }
            if static_index as usize >= MAX_TYPES || !self.get(static_index).is_null() {
                let other = self.get(static_index);
                let other = if other.is_null() {
                    "an out-of-range index".to_string()
                } else {
                    // SAFETY: entries are never freed.
                    format!("`{}`", unsafe { &(*other).key })
                };
                return Err(Error::runtime_error(format!(
                    "TVMFFITypeGetOrAllocIndex: conflicting static index {static_index} between {other} and `{key}`"
                )));
            }
            static_index
        } else {
            let Some(p) = parent else {
                return Err(Error::value_error(format!(
                    "TVMFFITypeGetOrAllocIndex: `{key}` needs a static index or a parent type"
                )));
            };
            // SAFETY: entries are never freed; mutated only under the writer lock we hold.
            let p = unsafe { &mut *p };
            let need = child_slots + 1;
            // (a static registration may have taken one of the parent's slots: step past it
            // rather than give its index to a second type)
            while p.allocated_slots + need <= p.num_slots
                && (0..need).any(|k| {
                    !self
                        .get(p.info.type_index + p.allocated_slots + k)
                        .is_null()
                })
            {
                p.allocated_slots += 1;
            }
            if p.allocated_slots + need <= p.num_slots {
                let ti = p.info.type_index + p.allocated_slots;
                p.allocated_slots += need;
                ti
            } else if p.can_overflow {
                let ti = w.counter;
                if (ti as usize) + need as usize > MAX_TYPES {
                    return Err(Error::runtime_error(format!(
                        "TVMFFITypeGetOrAllocIndex: the type table is full ({MAX_TYPES} indices) while registering `{key}`"
                    )));
                }
                w.counter += need;
                ti
            } else {
                return Err(Error::runtime_error(format!(
                    "TVMFFITypeGetOrAllocIndex: reached the maximum number of sub-classes of `{}` while registering `{key}`",
                    p.key
                )));
            }
        };
        let mut ancestors = Vec::new();
        if let Some(p) = parent {
            // SAFETY: entries are never freed.
            let p = unsafe { &*p };
            if !p.can_overflow {
                can_overflow = false;
            }
            if index <= p.info.type_index {
                return Err(Error::runtime_error(format!(
                    "TVMFFITypeGetOrAllocIndex: `{key}` (index {index}) must come after its parent `{}` ({})",
                    p.key, p.info.type_index
                )));
            }
            ancestors.extend_from_slice(&p.ancestors);
            ancestors.push(&p.info as *const TVMFFITypeInfo);
        }
        if depth != ancestors.len() as i32 {
            return Err(Error::value_error(format!(
                "TVMFFITypeGetOrAllocIndex: `{key}` declares depth {depth} but its parent chain has depth {}",
                ancestors.len()
            )));
        }
        let key_box: Box<str> = key.into();
        let key_c: Box<[u8]> = key.bytes().chain([0]).collect();
        let ancestors = ancestors.into_boxed_slice();
        let entry = Box::into_raw(Box::new(TypeEntry {
            info: TVMFFITypeInfo {
                type_index: index,
                type_depth: depth,
                type_key: TVMFFIByteArray {
                    data: key_c.as_ptr() as *const _,
                    size: key_box.len(),
                },
                type_ancestors: if ancestors.is_empty() {
                    ptr::null()
                } else {
                    ancestors.as_ptr()
                },
                type_key_hash: type_key_hash(key.as_bytes()),
                num_fields: 0,
                num_methods: 0,
                fields: ptr::null(),
                methods: ptr::null(),
                metadata: ptr::null(),
            },
            key: key_box,
            key_c,
            ancestors,
            num_slots: child_slots + 1,
            allocated_slots: 1,
            can_overflow,
            fields: Vec::new(),
            methods: Vec::new(),
            metadata: None,
            strings: Vec::new(),
            retired_fields: Vec::new(),
            retired_methods: Vec::new(),
            walk_facts: AtomicPtr::new(ptr::null_mut()),
        }));
        self.set(index, entry);
        w.key_to_index.insert(key.into(), index);
        Ok(index)
    }

    fn column_locked(&self, w: &mut Writer, name: &str) -> *mut Column {
        *w.columns.entry(name.into()).or_insert_with(|| {
            Box::into_raw(Box::new(Column {
                col: TVMFFITypeAttrColumn {
                    data: ptr::null(),
                    size: 0,
                    begin_index: 0,
                },
                values: Vec::new(),
                retired: Vec::new(),
            }))
        })
    }

    /// The entry of `index` for mutation; `_w` proves the writer lock is held.
    fn entry_mut<'a>(
        &'a self,
        _w: &'a mut Writer,
        index: i32,
        what: &str,
    ) -> Result<&'a mut TypeEntry> {
        let e = self.get(index);
        if e.is_null() {
            return Err(Error::value_error(format!(
                "{what}: unknown type index {index}"
            )));
        }
        // SAFETY: entries are never freed; the caller holds the writer lock.
        Ok(unsafe { &mut *e })
    }

    fn register_metadata(&self, index: i32, meta: &TVMFFITypeMetadata) -> Result<()> {
        let mut w = self.writer.lock();
        let e = self.entry_mut(&mut w, index, "TVMFFITypeRegisterMetadata")?;
        if e.metadata.is_some() {
            // worded and logged (traceback, kind, message on stderr) as the official library
            let err = Error::runtime_error(format!(
                "Overriding {}, possible causes:\n\
                 - two ObjectDef<T>() calls for the same T \n\
                 - when we forget to assign _type_key to ObjectRef<Y> that inherits from T\n\
                 - another type with the same key is already registered\n\
                 Cross check the reflection registration.",
                e.key
            ));
            eprint!("{}", err.full_message());
            return Err(err);
        }
        let doc = leak_bytes(&mut e.strings, &meta.doc);
        let m = Box::new(TVMFFITypeMetadata { doc, ..*meta });
        e.info.metadata = &*m as *const _;
        e.metadata = Some(m);
        LAYOUT_GENERATION.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

/// `TVMFFITypeGetOrAllocIndex` (spec §3.2).
pub fn get_or_alloc_index(
    key: &str,
    static_index: i32,
    depth: i32,
    child_slots: i32,
    can_overflow: bool,
    parent_index: i32,
) -> Result<i32> {
    let t = &*TABLE;
    let mut w = t.writer.lock();
    t.alloc_locked(
        &mut w,
        key,
        static_index,
        depth,
        child_slots,
        can_overflow,
        parent_index,
    )
}

/// The index of a registered key.
pub fn key_to_index(key: &str) -> Option<i32> {
    TABLE.writer.lock().key_to_index.get(key).copied()
}

/// The entry of a registered index, or `None`.
#[inline]
pub fn type_entry(index: i32) -> Option<&'static TypeEntry> {
    let e = TABLE.get(index);
    // SAFETY: entries are leaked and never freed.
    (!e.is_null()).then(|| unsafe { &*e })
}

/// The stable `TVMFFITypeInfo` pointer of an index, or NULL.
#[inline]
pub fn type_info_ptr(index: i32) -> *const TVMFFITypeInfo {
    TABLE.get(index) as *const TVMFFITypeInfo
}

/// The key of an index, or `<unknown type N>` (for messages).
pub fn type_key_of(index: i32) -> String {
    match type_entry(index) {
        Some(e) => e.key.to_string(),
        None => format!("<unknown type {index}>"),
    }
}

/// Whether `ancestor` is a proper ancestor of `index` (lock-free).
#[inline]
pub fn is_ancestor(ancestor: i32, index: i32) -> bool {
    if index <= ancestor {
        return false;
    }
    let (Some(a), Some(e)) = (type_entry(ancestor), type_entry(index)) else {
        return false;
    };
    let d = a.info.type_depth as usize;
    d < e.ancestors.len() && ptr::eq(e.ancestors[d], &a.info)
}

/// Whether an object of type `index` is an instance of `target` (itself or a descendant).
#[inline]
pub fn is_instance_of(index: i32, target: i32) -> bool {
    index == target || is_ancestor(target, index)
}

/// `TVMFFITypeRegisterMetadata`.
///
/// # Safety
/// As for [`TypeSink`]: the metadata (size, creator) must be true of the type.
pub unsafe fn register_metadata(index: i32, meta: &TVMFFITypeMetadata) -> Result<()> {
    TABLE.register_metadata(index, meta)
}

/// Where type registrations go: the global table, or the table under construction while its
/// initialiser registers the library's own types (which must not re-enter the global).
///
/// # Safety
/// The `register_*` methods are unsafe: what they register is trusted by every consumer of the
/// type table (field getters and setters read and write at the registered offsets, creators and
/// native `__any_hash__`/`__any_equal__` hooks are called, values are read as valid Anys).
/// Callers must pass descriptions that are true of the type, values that are valid `TVMFFIAny`s
/// (live objects), and function pointers with the documented signatures.
pub trait TypeSink {
    /// Allocates (or finds) the index of `key` (spec §3.2).
    fn alloc_index(
        &self,
        key: &str,
        static_index: i32,
        depth: i32,
        child_slots: i32,
        can_overflow: bool,
        parent_index: i32,
    ) -> Result<i32>;
    /// `TVMFFITypeRegisterMetadata`.
    ///
    /// # Safety
    /// See the trait: the description must be true of the type.
    unsafe fn register_metadata(&self, index: i32, meta: &TVMFFITypeMetadata) -> Result<()>;
    /// `TVMFFITypeRegisterField`.
    ///
    /// # Safety
    /// See the trait: the description must be true of the type.
    unsafe fn register_field(&self, index: i32, info: &TVMFFIFieldInfo) -> Result<()>;
    /// `TVMFFITypeRegisterMethod`.
    ///
    /// # Safety
    /// See the trait: the description must be true of the type.
    unsafe fn register_method(&self, index: i32, info: &TVMFFIMethodInfo) -> Result<()>;
    /// `TVMFFITypeRegisterAttr`.
    ///
    /// # Safety
    /// See the trait: the description must be true of the type.
    unsafe fn register_attr(&self, index: i32, name: &str, value: &TVMFFIAny) -> Result<()>;
}

/// The process-wide type table as a [`TypeSink`].
pub struct GlobalTypes;

impl TypeSink for GlobalTypes {
    fn alloc_index(
        &self,
        key: &str,
        static_index: i32,
        depth: i32,
        child_slots: i32,
        can_overflow: bool,
        parent_index: i32,
    ) -> Result<i32> {
        get_or_alloc_index(
            key,
            static_index,
            depth,
            child_slots,
            can_overflow,
            parent_index,
        )
    }
    unsafe fn register_metadata(&self, index: i32, meta: &TVMFFITypeMetadata) -> Result<()> {
        TABLE.register_metadata(index, meta)
    }
    unsafe fn register_field(&self, index: i32, info: &TVMFFIFieldInfo) -> Result<()> {
        TABLE.register_field(index, info)
    }
    unsafe fn register_method(&self, index: i32, info: &TVMFFIMethodInfo) -> Result<()> {
        TABLE.register_method(index, info)
    }
    unsafe fn register_attr(&self, index: i32, name: &str, value: &TVMFFIAny) -> Result<()> {
        TABLE.register_attr(index, name, value)
    }
}

impl TypeSink for Table {
    fn alloc_index(
        &self,
        key: &str,
        static_index: i32,
        depth: i32,
        child_slots: i32,
        can_overflow: bool,
        parent_index: i32,
    ) -> Result<i32> {
        let mut w = self.writer.lock();
        self.alloc_locked(
            &mut w,
            key,
            static_index,
            depth,
            child_slots,
            can_overflow,
            parent_index,
        )
    }
    unsafe fn register_metadata(&self, index: i32, meta: &TVMFFITypeMetadata) -> Result<()> {
        Table::register_metadata(self, index, meta)
    }
    unsafe fn register_field(&self, index: i32, info: &TVMFFIFieldInfo) -> Result<()> {
        Table::register_field(self, index, info)
    }
    unsafe fn register_method(&self, index: i32, info: &TVMFFIMethodInfo) -> Result<()> {
        Table::register_method(self, index, info)
    }
    unsafe fn register_attr(&self, index: i32, name: &str, value: &TVMFFIAny) -> Result<()> {
        Table::register_attr(self, index, name, value)
    }
}

/// `TVMFFITypeRegisterField`: copies the description, owning its strings, default and setter.
///
/// # Safety
/// As for [`TypeSink`]: offset, size, getter and setter must be true of the type.
pub unsafe fn register_field(index: i32, info: &TVMFFIFieldInfo) -> Result<()> {
    TABLE.register_field(index, info)
}

/// `TVMFFITypeRegisterMethod`: copies the description and retains the method.
///
/// # Safety
/// As for [`TypeSink`]: `info.method` must be a valid value.
pub unsafe fn register_method(index: i32, info: &TVMFFIMethodInfo) -> Result<()> {
    TABLE.register_method(index, info)
}

/// `TVMFFITypeRegisterAttr`: column `name`, entry `index` = an owned copy of `value`.
///
/// # Safety
/// As for [`TypeSink`]: `value` must be a valid value, and an entry of a column the library
/// calls (`__any_hash__`, `__any_equal__`, `__ffi_init__`, ...) a function of its documented
/// signature.
pub unsafe fn register_attr(index: i32, name: &str, value: &TVMFFIAny) -> Result<()> {
    TABLE.register_attr(index, name, value)
}

impl Table {
    fn register_field(&self, index: i32, info: &TVMFFIFieldInfo) -> Result<()> {
        let mut w = self.writer.lock();
        let e = self.entry_mut(&mut w, index, "TVMFFITypeRegisterField")?;
        e.check_new_field(&info.name)?;
        let default = if info.flags & kTVMFFIFieldFlagBitMaskHasDefault != 0 {
            // SAFETY: the caller passes a valid view; we keep an owned copy.
            unsafe { Any::copy_from_raw_view(&info.default_value_or_factory) }?.into_raw()
        } else {
            TVMFFIAny::NONE
        };
        let setter = info.setter;
        if info.flags & kTVMFFIFieldFlagBitSetterIsFunctionObj != 0 && !setter.is_null() {
            // SAFETY: the flag says the setter is a live Function handle; we retain it.
            unsafe { crate::object::inc_ref(setter as *mut TVMFFIObject) };
        }
        let [name, doc, metadata] = e.keep_text(&info.name, &info.doc, &info.metadata);
        let copy = TVMFFIFieldInfo {
            name,
            doc,
            metadata,
            default_value_or_factory: default,
            setter,
            ..*info
        };
        let n = push_published(&mut e.fields, &mut e.retired_fields, copy);
        // SAFETY: the entry's own info; readers load the count, then the pointer.
        unsafe {
            publish(
                &mut e.info.fields,
                &mut e.info.num_fields,
                e.fields.as_ptr(),
                n,
            )
        };
        LAYOUT_GENERATION.fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn register_method(&self, index: i32, info: &TVMFFIMethodInfo) -> Result<()> {
        let mut w = self.writer.lock();
        let e = self.entry_mut(&mut w, index, "TVMFFITypeRegisterMethod")?;
        // SAFETY: the caller passes a valid view; we keep an owned copy.
        let method = unsafe { Any::copy_from_raw_view(&info.method) }?.into_raw();
        let [name, doc, metadata] = e.keep_text(&info.name, &info.doc, &info.metadata);
        let copy = TVMFFIMethodInfo {
            name,
            doc,
            metadata,
            method,
            ..*info
        };
        let n = push_published(&mut e.methods, &mut e.retired_methods, copy);
        // SAFETY: as for the fields.
        unsafe {
            publish(
                &mut e.info.methods,
                &mut e.info.num_methods,
                e.methods.as_ptr(),
                n,
            )
        };
        Ok(())
    }

    fn register_attr(&self, index: i32, name: &str, value: &TVMFFIAny) -> Result<()> {
        let t = self;
        let mut w = t.writer.lock();
        let col = t.column_locked(&mut w, name);
        if index == kTVMFFINone {
            return Ok(());
        }
        // (an index no type has yet is accepted, as the official library does: the type that
        // takes it later has the attribute)
        if index < 0 || index as usize >= MAX_TYPES {
            return Err(Error::value_error(format!(
                "TVMFFITypeRegisterAttr: type index {index} for attribute `{name}` is out of \
                 range (0 to {})",
                MAX_TYPES - 1
            )));
        }
        // SAFETY: columns are leaked and mutated only under the writer lock.
        let col = unsafe { &mut *col };
        let i = index as usize;
        if i < col.values.len() && col.values[i].type_index != kTVMFFINone {
            let e = t.get(index);
            let of = if e.is_null() {
                format!("type index {index}")
            } else {
                // SAFETY: entries are never freed.
                format!("type `{}`", unsafe { &(*e).key })
            };
            return Err(Error::runtime_error(format!(
                "TVMFFITypeRegisterAttr: attribute `{name}` of {of} is already registered"
            )));
        }
        // SAFETY: the caller passes a valid view; we keep an owned copy.
        let owned = unsafe { Any::copy_from_raw_view(value) }?.into_raw();
        if i >= col.values.len() {
            // The old buffer is retired, not freed: readers may still hold `col.data` (no lock
            // on reads). Kept reachable so leak checkers see it as owned. The value is in place
            // before the buffer is published.
            let mut grown = Vec::with_capacity((i + 1).max(col.values.len() * 2).max(16));
            grown.extend_from_slice(&col.values);
            grown.resize(i + 1, TVMFFIAny::NONE);
            grown[i] = owned;
            let old = std::mem::replace(&mut col.values, grown);
            col.retired.push(old);
            let n = col.values.len();
            // SAFETY: the column's own slots; readers load the size, then the data.
            unsafe { publish(&mut col.col.data, &mut col.col.size, col.values.as_ptr(), n) };
        } else {
            // A slot readers may be reading, None until now: the value first, then its type
            // index (release), so a reader that sees the type sees the value, never a typed
            // zero (a Function index with a NULL pointer).
            let slot: *mut TVMFFIAny = &mut col.values[i];
            // SAFETY: a live, aligned slot of the column; written only under the writer lock.
            unsafe {
                ptr::addr_of_mut!((*slot).value).write(owned.value);
                ptr::addr_of_mut!((*slot).small_str_len).write(owned.small_str_len);
                std::sync::atomic::AtomicI32::from_ptr(ptr::addr_of_mut!((*slot).type_index))
                    .store(owned.type_index, Ordering::Release);
            }
        }
        Ok(())
    }
}

/// `TVMFFIGetTypeAttrColumn`: the stable column pointer, or NULL when no such column exists.
pub fn attr_column(name: &str) -> *const TVMFFITypeAttrColumn {
    if let Some(i) = EAGER_COLUMNS.iter().position(|&n| n == name) {
        let c = TABLE.eager[i].load(Ordering::Acquire);
        // SAFETY: set when the table was made (non-NULL); columns are leaked.
        return unsafe { &(*c).col as *const _ };
    }
    let w = TABLE.writer.lock();
    match w.columns.get(name) {
        // SAFETY: columns are leaked.
        Some(&c) => unsafe { &(*c).col as *const _ },
        None => ptr::null(),
    }
}

/// A type-attribute column's pointer, kept by a caller that reads one column per object (columns
/// are leaked and never move; a column not created yet is looked up again next time).
#[derive(Default)]
pub struct ColumnCache(std::sync::OnceLock<usize>);

impl ColumnCache {
    pub const fn new() -> Self {
        ColumnCache(std::sync::OnceLock::new())
    }

    /// `attr_value(name, ti)` without the lookup by name once the column exists; `name` must be
    /// the same at every call on one cache.
    #[inline]
    pub fn entry(&self, name: &str, ti: i32) -> Option<TVMFFIAny> {
        let col = match self.0.get() {
            Some(&p) => p as *const TVMFFITypeAttrColumn,
            None => {
                let p = attr_column(name);
                if p.is_null() {
                    return None;
                }
                let _ = self.0.set(p as usize);
                p
            }
        };
        // SAFETY: a column's pointer, never NULL here.
        unsafe { column_entry(col, ti) }
    }
}

/// The entry of type `ti` in the column at `col`, or `None` when it has no value for it.
///
/// # Safety
/// `col` must be NULL or a column of this table.
unsafe fn column_entry(col: *const TVMFFITypeAttrColumn, ti: i32) -> Option<TVMFFIAny> {
    // SAFETY: columns are leaked; `data` has `size` entries (older buffers are leaked too, so a
    // reader racing a registration still reads valid memory, as in the C++ headers).
    unsafe {
        let col = col.as_ref()?;
        let offset = ti - col.begin_index;
        // the size, then the data, then the slot's type, then its value: the order
        // `register_attr` publishes them in reverse
        let size = published_count(ptr::addr_of!(col.size));
        let data = published_ptr(ptr::addr_of!(col.data));
        if offset < 0 || offset >= size || data.is_null() {
            return None;
        }
        let slot = data.add(offset as usize);
        let ti =
            std::sync::atomic::AtomicI32::from_ptr(ptr::addr_of!((*slot).type_index) as *mut i32)
                .load(Ordering::Acquire);
        if ti == kTVMFFINone {
            return None;
        }
        Some(TVMFFIAny {
            type_index: ti,
            small_str_len: ptr::addr_of!((*slot).small_str_len).read(),
            value: ptr::addr_of!((*slot).value).read(),
        })
    }
}

/// The value of attribute `name` for type `index`, borrowed from the column.
pub fn attr_value(name: &str, index: i32) -> Option<TVMFFIAny> {
    // SAFETY: NULL or a column of this table.
    unsafe { column_entry(attr_column(name), index) }
}

/// Every registered type key, ordered by index.
pub fn registered_keys() -> Vec<String> {
    let w = TABLE.writer.lock();
    let mut v: Vec<(i32, String)> = w
        .key_to_index
        .iter()
        .map(|(k, &i)| (i, k.to_string()))
        .collect();
    v.sort();
    v.into_iter().map(|(_, k)| k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libstdcxx_hash_matches_official_type_key_hash() {
        assert_eq!(type_key_hash(b"None"), 18116513903021958570);
    }

    #[test]
    fn static_entries() {
        for &(ti, key) in STATIC_POD_KEYS {
            let e = type_entry(ti).unwrap();
            assert_eq!(e.key(), key);
            assert_eq!(e.info.type_depth, 0);
            assert!(e.info.type_ancestors.is_null());
        }
        for &(ti, key) in STATIC_OBJECT_KEYS {
            let e = type_entry(ti).unwrap();
            assert_eq!(e.key(), key);
            assert_eq!(e.info.type_depth, 1);
            assert_eq!(e.ancestors(), &[type_info_ptr(kTVMFFIObject)]);
        }
        assert_eq!(
            type_entry(kTVMFFIObject)
                .unwrap()
                .metadata()
                .unwrap()
                .total_size,
            24
        );
        assert_eq!(key_to_index("ffi.String"), Some(65));
        assert!(type_entry(14).is_none());
        assert!(!attr_column("__any_hash__").is_null());
    }

    #[test]
    fn child_slots_then_overflow() {
        let base = get_or_alloc_index("tt.Base", -1, 1, 2, true, kTVMFFIObject).unwrap();
        assert!(base >= kTVMFFIDynObjectBegin);
        let c1 = get_or_alloc_index("tt.C1", -1, 2, 0, true, base).unwrap();
        let c2 = get_or_alloc_index("tt.C2", -1, 2, 0, true, base).unwrap();
        assert_eq!((c1, c2), (base + 1, base + 2));
        let c3 = get_or_alloc_index("tt.C3", -1, 2, 0, true, base).unwrap();
        assert!(c3 > base + 2);
        assert!(is_ancestor(base, c3) && is_ancestor(kTVMFFIObject, c3));
        assert!(!is_ancestor(c1, c2));
        assert_eq!(get_or_alloc_index("tt.C1", -1, 7, 7, false, 3).unwrap(), c1);
        assert_eq!(
            get_or_alloc_index("tt.Missing", -1, 1, 0, true, -2).unwrap(),
            -2
        );
        let p = type_info_ptr(c1);
        assert_eq!(type_info_ptr(c1), p);
        assert!(
            get_or_alloc_index("tt.Bad", -1, 5, 0, true, base).is_err(),
            "depth mismatch"
        );
        assert!(get_or_alloc_index("tt.Conflict", 65, 1, 0, false, 64).is_err());
    }

    #[test]
    fn registered_text_is_copied_and_field_names_are_unique() {
        let ti = get_or_alloc_index("tt.Fields", -1, 1, 0, true, kTVMFFIObject).unwrap();
        let bytes = |s: &[u8]| TVMFFIByteArray {
            data: s.as_ptr() as *const _,
            size: s.len(),
        };
        let mut name = b"x".to_vec();
        let mut doc = b"the x".to_vec();
        let field = TVMFFIFieldInfo {
            name: bytes(&name),
            doc: bytes(&doc),
            metadata: bytes(b""),
            flags: 0,
            size: 8,
            alignment: 8,
            offset: 24,
            getter: None,
            setter: ptr::null_mut(),
            default_value_or_factory: TVMFFIAny::NONE,
            field_static_type_index: kTVMFFIInt,
        };
        // SAFETY: a plain int64 field at 24, no getter (the table is only inspected).
        unsafe { register_field(ti, &field) }.unwrap();
        // SAFETY: as above.
        let err = unsafe { register_field(ti, &field) }.unwrap_err();
        assert!(err
            .message()
            .contains("field `x` is already registered on type `tt.Fields`"));
        // The caller's buffers may change or go away: the table kept its own copies.
        name.fill(b'?');
        doc.fill(b'?');
        let e = type_entry(ti).unwrap();
        assert_eq!(e.fields().len(), 1);
        // SAFETY: the table's own copies.
        unsafe {
            assert_eq!(byte_array_str(&e.fields()[0].name), "x");
            assert_eq!(byte_array_str(&e.fields()[0].doc), "the x");
            assert!(e.fields()[0].metadata.data.is_null());
        }
        // SAFETY: as above.
        assert!(unsafe { register_field(i32::MAX, &field) }.is_err());
    }
}
