//! The storage shared by `ffi.Map` (72) and `ffi.Dict` (76) (spec §2.4, `container/map_base.h`):
//! the 56-byte base, the small layout (≤ 4 entries, in-order key/value pairs, linear scan) and
//! the dense layout (blocks of 16 metadata bytes + 16 items, Fibonacci bucketing, chains through
//! a 126-entry jump table, and an insertion-order list through `prev`/`next`).
//!
//! Rationale: C++ header code in other libraries reads, iterates and mutates these objects
//! inline, and we must do the same to theirs. Every operation here therefore reproduces the
//! official state machine step for step (including its quirks: a dense update moves the key to
//! the end of the iteration order, a full small map turns dense even when the key exists), and
//! reaches memory only through the pointers the object itself holds. Storage is always released
//! through the object's own `data_deleter_`, so a foreign library may free or replace ours and we
//! theirs. All functions take raw pointers derived from the allocation, because the inline pairs
//! and the dense fields lie beyond the Rust struct.
//!
//! Rehashing copies entries (one reference each) instead of moving them, and only releases the
//! old storage once the new table is complete, so a failing custom hash leaves the map intact.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};

use crate::abi::{
    kTVMFFIDict, kTVMFFIMap, kTVMFFIObjectDeleterFlagBitMaskStrong,
    kTVMFFIObjectDeleterFlagBitMaskWeak, kTVMFFIStaticObjectBegin, TVMFFIAny, TVMFFIObject,
};
use crate::error::{Error, Result};
use crate::hash::{any_equal, any_hash};
use crate::object::{dec_ref, inc_ref, new_object_with_extra, ObjectRef, ObjectType};

/// Bit 63 of `slots_` marks the small layout.
pub const SMALL_TAG: u64 = 1 << 63;
/// Smallest small-layout capacity.
pub const SMALL_INIT: u64 = 2;
/// Largest small-layout capacity; a fifth entry turns the map dense.
pub const SMALL_MAX: u64 = 4;
/// Slots per dense block.
pub const BLOCK_CAP: u64 = 16;
/// Bytes of one dense item: key, value, prev, next.
pub const ITEM_BYTES: usize = 48;
/// Bytes of one dense block: 16 metadata bytes and 16 items.
pub const BLOCK_BYTES: usize = BLOCK_CAP as usize * (1 + ITEM_BYTES);
/// Metadata of an empty slot.
pub const META_EMPTY: u8 = 0xFF;
/// Metadata of a slot emptied while a chain is being moved (never written to).
pub const META_PROTECTED: u8 = 0xFE;
/// "No index" in the iteration list.
pub const INVALID: u64 = u64::MAX;
const MAX_LOAD: f64 = 0.99;
const FIB_MUL: u64 = 11_400_714_819_323_198_485;
const NUM_JUMPS: usize = 126;

/// Chain distances a metadata byte's low 7 bits select: 0..15, then triangular numbers.
pub static NEXT_PROBE: [u64; NUM_JUMPS] = [
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    21,
    28,
    36,
    45,
    55,
    66,
    78,
    91,
    105,
    120,
    136,
    153,
    171,
    190,
    210,
    231,
    253,
    276,
    300,
    325,
    351,
    378,
    406,
    435,
    465,
    496,
    528,
    561,
    595,
    630,
    666,
    703,
    741,
    780,
    820,
    861,
    903,
    946,
    990,
    1035,
    1081,
    1128,
    1176,
    1225,
    1275,
    1326,
    1378,
    1431,
    1485,
    1540,
    1596,
    1653,
    1711,
    1770,
    1830,
    1891,
    1953,
    2016,
    2080,
    2145,
    2211,
    2278,
    2346,
    2415,
    2485,
    2556,
    2628,
    8515,
    19110,
    42778,
    96141,
    216153,
    486591,
    1092981,
    2458653,
    5532801,
    12442566,
    27993903,
    62983476,
    141717030,
    318844378,
    717352503,
    1614057336,
    3631522476,
    8170957530,
    18384510628,
    41364789378,
    93070452520,
    209408356380,
    471168559170,
    1060128894105,
    2385289465695,
    5366898840628,
    12075518705635,
    27169915244790,
    61132312065111,
    137547689707000,
    309482283181501,
    696335127828753,
    1566753995631385,
    3525196511162271,
    7931691992677701,
    17846306936293605,
    40154190677507445,
    90346928918121501,
    203280589587557251,
    457381325854679626,
    1029107982097042876,
    2315492959180353330,
    5209859154120846435,
];

/// `void (*)(void*)` releasing a map's storage.
pub type DataDeleter = Option<unsafe extern "C" fn(*mut c_void)>;

/// The mutable part of the base (offsets 24..56).
#[repr(C)]
pub struct MapFields {
    pub data: *mut c_void,
    pub size: u64,
    pub slots: u64,
    pub data_deleter: DataDeleter,
}

/// The 56-byte base of both map types; the small pairs or the dense fields follow in place.
#[repr(C)]
pub struct MapBase {
    pub header: TVMFFIObject,
    fields: UnsafeCell<MapFields>,
}

/// Fields of the dense layout, at offset 56.
#[repr(C)]
pub struct DenseFields {
    pub fib_shift: u32,
    pub iter_head: u64,
    pub iter_tail: u64,
}

/// One key/value pair (32 bytes).
#[repr(C)]
pub struct KvPair {
    pub key: TVMFFIAny,
    pub value: TVMFFIAny,
}

/// One dense item (48 bytes).
#[repr(C)]
struct Item {
    kv: KvPair,
    prev: u64,
    next: u64,
}

const _: () = {
    assert!(std::mem::size_of::<MapBase>() == 56);
    assert!(std::mem::size_of::<DenseFields>() == 24);
    assert!(std::mem::size_of::<KvPair>() == 32);
    assert!(std::mem::size_of::<Item>() == ITEM_BYTES);
    assert!(BLOCK_BYTES == 784);
};

// SAFETY: repr(C) with the header first. The Rust type stands for both map kinds; handles that
// need the exact kind use `MapObj`/`DictObj`, which are transparent over this.
unsafe impl ObjectType for MapBase {
    const TYPE_KEY: &'static str = "ffi.Map";
    fn type_index() -> i32 {
        kTVMFFIMap
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIMap || type_index == kTVMFFIDict
    }
}

// SAFETY: as the official containers: shared read-only (Map) or mutated in place by whoever
// holds it (Dict); the ABI gives no lock and neither do we.
unsafe impl Send for MapBase {}
// SAFETY: as above.
unsafe impl Sync for MapBase {}

/// A new reference to a stored value.
///
/// # Safety
/// `v` must be a valid value: an object kind must point at a live object.
#[inline]
pub unsafe fn clone_raw(v: &TVMFFIAny) -> TVMFFIAny {
    if v.type_index >= kTVMFFIStaticObjectBegin {
        // SAFETY: stored object values hold a live reference.
        unsafe { inc_ref(v.value.v_obj) };
    }
    *v
}

/// Releases a stored value.
///
/// # Safety
/// `v` must be an owned value that is not used again.
#[inline]
pub unsafe fn drop_raw(v: TVMFFIAny) {
    if v.type_index >= kTVMFFIStaticObjectBegin {
        // SAFETY: per the caller, we own this reference.
        unsafe { dec_ref(v.value.v_obj) };
    }
}

/// `data_deleter_` of dense blocks allocated here.
unsafe extern "C" fn free_blocks(data: *mut c_void) {
    // SAFETY: blocks come from `malloc` in `new_dense`.
    unsafe { libc::free(data) };
}

/// `data_deleter_` of a small map that adopted the in-place pairs of another small map object:
/// the pairs sit at `object + 56`, so releasing the data releases that object.
unsafe extern "C" fn release_pairs_owner(data: *mut c_void) {
    // SAFETY: installed only by `inplace_switch_to`, which gave up one reference to the owner.
    unsafe { dec_ref((data as *mut u8).sub(std::mem::size_of::<MapBase>()) as *mut TVMFFIObject) };
}

/// Object deleter of maps allocated here: flag 1 releases entries and storage, flag 2 the block.
unsafe extern "C" fn map_deleter(obj: *mut c_void, flags: c_int) {
    // SAFETY: this object's deleter, called with `flags`.
    if unsafe { crate::object::keep_if_lent(obj, flags) } {
        return;
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
        // SAFETY: the last strong reference is gone; the block is ours until flag 2.
        unsafe { RawMap::from_ptr(obj as *mut MapBase).destroy() };
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
        // SAFETY: the block came from `malloc` in `new_object_with_extra`.
        unsafe { libc::free(obj) };
    }
}

/// `CalcTableSize`: the power-of-two slot count and Fibonacci shift for `cap` entries.
pub fn table_size(cap: u64) -> (u32, u64) {
    let mut shift = 64u32;
    let mut slots = 1u64;
    let mut c = cap;
    while c != 0 {
        shift -= 1;
        slots <<= 1;
        c >>= 1;
    }
    if slots < cap.saturating_mul(2) {
        (shift - 1, slots << 1)
    } else {
        (shift, slots)
    }
}

/// Outcome of an insertion that may need a bigger container.
pub enum Inserted {
    /// Done in place.
    InPlace,
    /// The entries (and the new one) now live in this new container; the old one still holds
    /// its entries unless it was dense (then it was emptied, as the official rehash does).
    Grown(ObjectRef<MapBase>),
}

/// How a dense `try_insert` placed a key.
enum Placed {
    /// A new slot holding the key and a None value, not yet on the iteration list.
    New(u64),
    /// The slot of an equal key, unlinked from the iteration list.
    Existing(u64),
    /// No room without rehashing.
    Full,
}

/// A raw map pointer (ours or foreign) with the operations of both layouts.
///
/// Every method requires that the pointer designates a live map whose layout invariants hold and
/// that no other thread mutates it meanwhile; the `unsafe` constructors carry that contract, so
/// the methods themselves are safe to call. Fields are read and written through raw pointers
/// only (no Rust references into the map are formed), because foreign code shares the memory.
#[derive(Clone, Copy)]
pub struct RawMap(NonNull<MapBase>);

/// Field accessors: one raw read or write each.
macro_rules! field {
    ($get:ident, $set:ident, $ptr:ident . $field:ident : $t:ty) => {
        #[inline]
        fn $get(self) -> $t {
            // SAFETY: the map is live and unshared for writing (type invariant).
            unsafe { (*self.$ptr()).$field }
        }
        #[inline]
        #[allow(dead_code)]
        fn $set(self, v: $t) {
            // SAFETY: as above.
            unsafe { (*self.$ptr()).$field = v }
        }
    };
}

impl RawMap {
    /// # Safety
    /// `p` must point at a live map (type 72 or 76) that stays alive, and is mutated by nobody
    /// else, while the result is used.
    #[inline]
    pub unsafe fn from_ptr(p: *mut MapBase) -> RawMap {
        // SAFETY: non-null per the caller.
        RawMap(unsafe { NonNull::new_unchecked(p) })
    }

    /// A map we hold a reference to.
    ///
    /// # Safety
    /// As for `from_ptr`, while the result is used.
    #[inline]
    pub unsafe fn of(obj: &ObjectRef<MapBase>) -> RawMap {
        RawMap(NonNull::new(obj.as_ptr()).expect("non-null"))
    }

    /// A map we just created and hold the only reference to.
    #[inline]
    pub(crate) fn of_owned(obj: &ObjectRef<MapBase>) -> RawMap {
        RawMap(NonNull::new(obj.as_ptr()).expect("non-null"))
    }

    #[inline]
    pub fn as_ptr(self) -> *mut MapBase {
        self.0.as_ptr()
    }

    #[inline]
    fn fp(self) -> *mut MapFields {
        // SAFETY: the base is live (type invariant); the fields live in an UnsafeCell.
        unsafe { (*self.0.as_ptr()).fields.get() }
    }

    #[inline]
    fn dp(self) -> *mut DenseFields {
        // SAFETY: the dense fields follow the base in every map allocation (small ones are sized
        // for at least two pairs, 120 bytes, so an in-place switch to dense fits).
        unsafe { (self.0.as_ptr() as *mut u8).add(56) as *mut DenseFields }
    }

    field!(data, set_data, fp.data: *mut c_void);
    field!(len, set_len, fp.size: u64);
    field!(slots, set_slots, fp.slots: u64);
    field!(deleter, set_deleter, fp.data_deleter: DataDeleter);
    field!(fib_shift, set_fib_shift, dp.fib_shift: u32);
    field!(head, set_head, dp.iter_head: u64);
    field!(tail, set_tail, dp.iter_tail: u64);

    #[inline]
    pub fn is_small(self) -> bool {
        self.slots() & SMALL_TAG != 0
    }

    /// Usable slots of the current layout (the tag masked off).
    #[inline]
    pub fn num_slots(self) -> u64 {
        self.slots() & !SMALL_TAG
    }

    /// Number of entries.
    #[inline]
    pub fn size(self) -> u64 {
        self.len()
    }

    /// What an iterator position depends on: the storage, its layout and the entry count.
    /// Unchanged while only values are replaced; an insertion or removal changes it.
    #[inline]
    pub fn iteration_token(self) -> (usize, u64, u64) {
        (self.data() as usize, self.slots(), self.len())
    }

    /// The runtime type index (72 or 76).
    #[inline]
    pub fn type_index(self) -> i32 {
        // SAFETY: live header.
        unsafe { (*self.0.as_ptr()).header.type_index }
    }

    /// The dense fields `(fib_shift, iter_list_head, iter_list_tail)`.
    pub fn dense_fields(self) -> (u32, u64, u64) {
        (self.fib_shift(), self.head(), self.tail())
    }

    // ----- small layout -----

    #[inline]
    fn pair(self, i: u64) -> *mut KvPair {
        // SAFETY: pairs [0, num_slots) lie at data_ in the small layout.
        unsafe { (self.data() as *mut KvPair).add(i as usize) }
    }

    #[inline]
    fn pair_key<'a>(self, i: u64) -> &'a TVMFFIAny {
        // SAFETY: callers pass i < size: an initialised pair, read while the map is unchanged.
        unsafe { &(*self.pair(i)).key }
    }

    /// Copies of the pair at small position `i`.
    fn clone_pair(self, i: u64) -> KvPair {
        // SAFETY: i < size: an initialised pair.
        let kv = unsafe { &*self.pair(i) };
        KvPair {
            // SAFETY: the values are stored in, or borrowed from, live objects.
            key: unsafe { clone_raw(&kv.key) },
            // SAFETY: the values are stored in, or borrowed from, live objects.
            value: unsafe { clone_raw(&kv.value) },
        }
    }

    fn small_find(self, key: &TVMFFIAny) -> Result<Option<u64>> {
        for i in 0..self.len() {
            // SAFETY: the values are stored in, or borrowed from, live objects.
            if unsafe { any_equal(self.pair_key(i), key) }? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    fn small_clear(self) {
        // Every pair is moved out, and the map left empty, before any is released: a released
        // value's destructor may use this map again (insert into it, which can replace its
        // storage), as in `dense_clear`.
        let n = self.len();
        self.set_len(0);
        let pairs: Vec<KvPair> = (0..n)
            .rev()
            // SAFETY: pair i was initialised and is no longer counted; moved out once.
            .map(|i| unsafe { ptr::read(self.pair(i)) })
            .collect();
        pairs.into_iter().for_each(drop_pair);
    }

    fn small_erase(self, i: u64) {
        let n = self.len();
        if i >= n {
            return;
        }
        let p = self.pair(i);
        // SAFETY: pair i is initialised; later pairs slide down bitwise to keep insertion order.
        let kv = unsafe {
            let kv = ptr::read(p);
            ptr::copy(p.add(1), p, (n - i - 1) as usize);
            kv
        };
        self.set_len(n - 1);
        self.release_pair(kv);
    }

    /// Appends copies of this small map's pairs to the empty small map `to` (room assumed).
    fn small_copy_into(self, to: RawMap) {
        for i in 0..self.len() {
            // SAFETY: slot i of `to` is free and within its capacity.
            unsafe { to.pair(i).write(self.clone_pair(i)) };
            to.set_len(i + 1);
        }
    }

    /// The official small insertion: update an equal key in place, append when there is room,
    /// else a new small map of twice the capacity (at most 4).
    fn small_insert(self, kv: KvPair) -> Result<Inserted> {
        let found = match self.small_find(&kv.key) {
            Ok(v) => v,
            Err(e) => {
                drop_pair(kv);
                return Err(e);
            }
        };
        if let Some(i) = found {
            // SAFETY: pair i is initialised; the old value is swapped out.
            let old = unsafe { ptr::replace(&mut (*self.pair(i)).value, kv.value) };
            // we own the incoming key (the stored one stays) and the old value
            self.release_pair(KvPair {
                key: kv.key,
                value: old,
            });
            return Ok(Inserted::InPlace);
        }
        let n = self.len();
        if n < self.num_slots() {
            // SAFETY: slot n is within the capacity and free.
            unsafe { self.pair(n).write(kv) };
            self.set_len(n + 1);
            return Ok(Inserted::InPlace);
        }
        let next = (self.num_slots() * 2).clamp(SMALL_INIT, SMALL_MAX);
        let grown = new_small(self.type_index(), next);
        self.small_copy_into(RawMap::of_owned(&grown));
        match RawMap::of_owned(&grown).small_insert(kv)? {
            Inserted::InPlace => Ok(Inserted::Grown(grown)),
            again => Ok(again),
        }
    }

    // ----- dense layout -----

    #[inline]
    fn block(self, i: u64) -> *mut u8 {
        // SAFETY: slot i < num_slots lies in block i / 16 of data_.
        unsafe { (self.data() as *mut u8).add((i / BLOCK_CAP) as usize * BLOCK_BYTES) }
    }

    #[inline]
    fn meta(self, i: u64) -> u8 {
        // SAFETY: metadata bytes are always initialised.
        unsafe { *self.block(i).add((i % BLOCK_CAP) as usize) }
    }

    #[inline]
    fn set_meta(self, i: u64, m: u8) {
        // SAFETY: as meta.
        unsafe { *self.block(i).add((i % BLOCK_CAP) as usize) = m }
    }

    #[inline]
    fn item(self, i: u64) -> *mut Item {
        // SAFETY: the item of slot i.
        unsafe {
            self.block(i)
                .add(BLOCK_CAP as usize + (i % BLOCK_CAP) as usize * ITEM_BYTES)
                as *mut Item
        }
    }

    #[inline]
    fn occupied(m: u8) -> bool {
        m != META_EMPTY && m != META_PROTECTED
    }

    #[inline]
    fn item_key<'a>(self, i: u64) -> &'a TVMFFIAny {
        // SAFETY: callers pass occupied slots, read while the map is unchanged.
        unsafe { &(*self.item(i)).kv.key }
    }

    #[inline]
    fn prev_of(self, i: u64) -> u64 {
        // SAFETY: occupied slot.
        unsafe { (*self.item(i)).prev }
    }

    #[inline]
    fn next_of(self, i: u64) -> u64 {
        // SAFETY: occupied slot.
        unsafe { (*self.item(i)).next }
    }

    #[inline]
    fn set_links(self, i: u64, prev: u64, next: u64) {
        // SAFETY: occupied slot.
        unsafe {
            (*self.item(i)).prev = prev;
            (*self.item(i)).next = next;
        }
    }

    #[inline]
    fn set_prev(self, i: u64, prev: u64) {
        // SAFETY: occupied slot.
        unsafe { (*self.item(i)).prev = prev }
    }

    #[inline]
    fn set_next(self, i: u64, next: u64) {
        // SAFETY: occupied slot.
        unsafe { (*self.item(i)).next = next }
    }

    /// Moves the pair out of an occupied slot (the slot must be emptied or overwritten after).
    #[inline]
    fn take_pair(self, i: u64) -> KvPair {
        // SAFETY: occupied slot; the caller retires it.
        unsafe { ptr::read(&(*self.item(i)).kv) }
    }

    #[inline]
    fn is_head_meta(m: u8) -> bool {
        m & 0x80 == 0
    }

    #[inline]
    fn bucket(self, hash: u64) -> u64 {
        FIB_MUL
            .wrapping_mul(hash)
            .checked_shr(self.fib_shift())
            .unwrap_or(0)
    }

    /// The slot after `i` in its chain, given `i`'s metadata.
    #[inline]
    fn chain_next(self, i: u64, meta: u8) -> Option<u64> {
        let off = NEXT_PROBE[(meta & 0x7F) as usize];
        (off != 0).then(|| i.wrapping_add(off) % self.num_slots())
    }

    #[inline]
    fn set_jump(self, i: u64, jump: u8) {
        self.set_meta(i, (self.meta(i) & 0x80) | jump);
    }

    /// Writes a fresh item into free slot `i` with metadata `meta` (0x00 head, 0x80 tail).
    fn put(self, i: u64, meta: u8, kv: KvPair) {
        self.set_meta(i, meta);
        // SAFETY: slot i is free; the item is written whole.
        unsafe {
            self.item(i).write(Item {
                kv,
                prev: INVALID,
                next: INVALID,
            })
        };
    }

    /// The first empty slot reachable from `i` by one jump, with the jump code.
    fn next_empty(self, i: u64) -> Option<(u8, u64)> {
        (1..NUM_JUMPS).find_map(|jump| {
            let c = i.wrapping_add(NEXT_PROBE[jump]) % self.num_slots();
            (self.meta(c) == META_EMPTY).then_some((jump as u8, c))
        })
    }

    /// The slot whose chain link points at `i` (`i` must not be a chain head).
    fn find_prev(self, i: u64) -> Result<u64> {
        // SAFETY: the values are stored in, or borrowed from, live objects.
        let mut prev = self.bucket(unsafe { any_hash(self.item_key(i)) }?);
        for _ in 0..=self.num_slots() {
            match self.chain_next(prev, self.meta(prev)) {
                Some(n) if n == i => return Ok(prev),
                Some(n) => prev = n,
                None => break,
            }
        }
        Err(Error::internal(
            "ffi.Map: broken dense chain (did a key's hash change?)",
        ))
    }

    fn dense_find(self, key: &TVMFFIAny) -> Result<Option<u64>> {
        if self.len() == 0 {
            return Ok(None);
        }
        // SAFETY: the values are stored in, or borrowed from, live objects.
        let mut i = self.bucket(unsafe { any_hash(key) }?);
        if !Self::is_head_meta(self.meta(i)) {
            return Ok(None);
        }
        loop {
            // SAFETY: the values are stored in, or borrowed from, live objects.
            if unsafe { any_equal(key, self.item_key(i)) }? {
                return Ok(Some(i));
            }
            match self.chain_next(i, self.meta(i)) {
                Some(n) => i = n,
                None => return Ok(None),
            }
        }
    }

    fn is_full(self) -> bool {
        (self.len() + 1) as f64 > self.num_slots() as f64 * MAX_LOAD
    }

    fn list_unlink(self, i: u64) {
        let (prev, next) = (self.prev_of(i), self.next_of(i));
        if prev == INVALID {
            self.set_head(next);
        } else {
            self.set_next(prev, next);
        }
        if next == INVALID {
            self.set_tail(prev);
        } else {
            self.set_prev(next, prev);
        }
    }

    fn list_push_back(self, i: u64) {
        let tail = self.tail();
        self.set_links(i, tail, INVALID);
        if tail != INVALID {
            self.set_next(tail, i);
        }
        if self.head() == INVALID {
            self.set_head(i);
        }
        self.set_tail(i);
    }

    /// Gives `dst` the list position of `src`.
    fn list_replace(self, src: u64, dst: u64) {
        let (prev, next) = (self.prev_of(src), self.next_of(src));
        self.set_links(dst, prev, next);
        if prev == INVALID {
            self.set_head(dst);
        } else {
            self.set_next(prev, dst);
        }
        if next == INVALID {
            self.set_tail(dst);
        } else {
            self.set_prev(next, dst);
        }
    }

    /// The official `TryInsert`: the key is written (bitwise) only for `Placed::New`.
    fn try_insert(self, key: &TVMFFIAny, hash: u64) -> Result<Placed> {
        if self.slots() == 0 {
            return Ok(Placed::Full);
        }
        let head = self.bucket(hash);
        let m = self.meta(head);
        if m == META_EMPTY {
            self.put(
                head,
                0x00,
                KvPair {
                    key: *key,
                    value: TVMFFIAny::NONE,
                },
            );
            self.set_len(self.len() + 1);
            return Ok(Placed::New(head));
        }
        if !Self::is_head_meta(m) {
            if self.is_full() {
                return Ok(Placed::Full);
            }
            return self.spare_list_head(head, key);
        }
        let mut tail = head;
        let mut cur = Some(head);
        while let Some(i) = cur {
            // SAFETY: the values are stored in, or borrowed from, live objects.
            if unsafe { any_equal(key, self.item_key(i)) }? {
                self.list_unlink(i);
                return Ok(Placed::Existing(i));
            }
            tail = i;
            cur = self.chain_next(i, self.meta(i));
        }
        if self.is_full() {
            return Ok(Placed::Full);
        }
        let Some((jump, slot)) = self.next_empty(tail) else {
            return Ok(Placed::Full);
        };
        self.put(
            slot,
            0x80,
            KvPair {
                key: *key,
                value: TVMFFIAny::NONE,
            },
        );
        self.set_jump(tail, jump);
        self.set_len(self.len() + 1);
        Ok(Placed::New(slot))
    }

    /// The official `TrySpareListHead`: slot `target` belongs to another chain; move that chain
    /// from `target` on elsewhere and make `target` the head of the key's new chain.
    fn spare_list_head(self, target: u64, key: &TVMFFIAny) -> Result<Placed> {
        let mut w = self.find_prev(target)?;
        let mut r = target;
        let mut first = true;
        loop {
            let Some((jump, empty)) = self.next_empty(w) else {
                return Ok(Placed::Full);
            };
            let kv = self.take_pair(r);
            self.put(empty, 0x80, kv);
            self.list_replace(r, empty);
            let r_meta = self.meta(r);
            self.set_meta(r, if first { META_PROTECTED } else { META_EMPTY });
            first = false;
            self.set_jump(w, jump);
            w = empty;
            match self.chain_next(r, r_meta) {
                Some(n) => r = n,
                None => break,
            }
        }
        self.put(
            target,
            0x00,
            KvPair {
                key: *key,
                value: TVMFFIAny::NONE,
            },
        );
        self.set_len(self.len() + 1);
        Ok(Placed::New(target))
    }

    fn dense_erase(self, i: u64) -> Result<()> {
        let m = self.meta(i);
        match self.chain_next(i, m) {
            None => {
                let prev = if Self::is_head_meta(m) {
                    None
                } else {
                    Some(self.find_prev(i)?)
                };
                self.set_len(self.len() - 1);
                if let Some(p) = prev {
                    self.set_jump(p, 0);
                }
                self.list_unlink(i);
                let kv = self.take_pair(i);
                self.set_meta(i, META_EMPTY);
                self.release_pair(kv);
            }
            Some(first_next) => {
                self.set_len(self.len() - 1);
                let (mut prev, mut last) = (i, first_next);
                while let Some(n) = self.chain_next(last, self.meta(last)) {
                    prev = last;
                    last = n;
                }
                self.list_unlink(i);
                let moved = self.take_pair(last);
                // SAFETY: slot i is occupied; its old pair is swapped out and released below.
                let old = unsafe { ptr::replace(&mut (*self.item(i)).kv, moved) };
                self.list_replace(last, i);
                self.set_meta(last, META_EMPTY);
                self.set_jump(prev, 0);
                self.release_pair(old);
            }
        }
        Ok(())
    }

    fn dense_clear(self) {
        if self.data().is_null() {
            self.set_len(0);
            return;
        }
        let n_blocks = self.num_slots().div_ceil(BLOCK_CAP);
        let mut dropped = Vec::with_capacity(self.len() as usize);
        for i in 0..n_blocks * BLOCK_CAP {
            if Self::occupied(self.meta(i)) {
                self.set_meta(i, META_EMPTY);
                dropped.push(self.take_pair(i));
            }
        }
        self.set_len(0);
        self.set_head(INVALID);
        self.set_tail(INVALID);
        dropped.into_iter().for_each(drop_pair);
    }

    /// Releases the dense storage (not the entries), as the official `ReleaseMemory`.
    fn release_memory(self) {
        let data = self.data();
        if !data.is_null() {
            if let Some(d) = self.deleter() {
                // SAFETY: the storage belongs to this map and `d` is its deleter.
                unsafe { d(data) };
            }
        }
        self.set_data(ptr::null_mut());
        self.set_deleter(None);
        self.set_slots(0);
        self.set_len(0);
        self.set_fib_shift(63);
    }

    /// The official dense insertion, rehashing into a table of twice the slots when needed.
    fn dense_insert(self, kv: KvPair) -> Result<Inserted> {
        // SAFETY: the values are stored in, or borrowed from, live objects.
        let placed = unsafe { any_hash(&kv.key) }.and_then(|h| self.try_insert(&kv.key, h));
        match placed {
            Ok(Placed::New(i)) => {
                // SAFETY: slot i was just written with a None value; the key moved in.
                unsafe { (*self.item(i)).kv.value = kv.value };
                self.list_push_back(i);
                Ok(Inserted::InPlace)
            }
            Ok(Placed::Existing(i)) => {
                // SAFETY: occupied slot; the old value is swapped out.
                let old = unsafe { ptr::replace(&mut (*self.item(i)).kv.value, kv.value) };
                self.list_push_back(i);
                // we own the incoming key (the stored one stays) and the old value
                self.release_pair(KvPair {
                    key: kv.key,
                    value: old,
                });
                Ok(Inserted::InPlace)
            }
            Ok(Placed::Full) => {
                let grown = match self.rehash_copy() {
                    Ok(g) => g,
                    Err(e) => {
                        drop_pair(kv);
                        return Err(e);
                    }
                };
                let grown = match RawMap::of_owned(&grown).dense_insert(kv)? {
                    Inserted::InPlace => grown,
                    Inserted::Grown(g) => g,
                };
                self.dense_clear();
                self.release_memory();
                Ok(Inserted::Grown(grown))
            }
            Err(e) => {
                drop_pair(kv);
                Err(e)
            }
        }
    }

    /// A table of twice the slots holding copies of every entry, inserted in iteration order.
    fn rehash_copy(self) -> Result<ObjectRef<MapBase>> {
        let (shift, slots) = if self.num_slots() == 0 {
            table_size(SMALL_MAX)
        } else {
            (self.fib_shift().saturating_sub(1), self.num_slots() * 2)
        };
        let mut target = new_dense(self.type_index(), shift, slots);
        let mut i = self.head();
        while i != INVALID {
            // SAFETY: occupied slot on the iteration list.
            let kv = unsafe { &(*self.item(i)).kv };
            let copy = KvPair {
                // SAFETY: the values are stored in, or borrowed from, live objects.
                key: unsafe { clone_raw(&kv.key) },
                // SAFETY: the values are stored in, or borrowed from, live objects.
                value: unsafe { clone_raw(&kv.value) },
            };
            if let Inserted::Grown(g) = RawMap::of_owned(&target).dense_insert(copy)? {
                target = g;
            }
            i = self.next_of(i);
        }
        Ok(target)
    }

    // ----- both layouts -----

    /// The iterator position of `key` (`index` for small maps, slot for dense ones).
    pub fn find(self, key: &TVMFFIAny) -> Result<Option<u64>> {
        if self.is_small() {
            self.small_find(key)
        } else {
            self.dense_find(key)
        }
    }

    /// First iterator position (`end()` when empty).
    #[inline]
    pub fn begin(self) -> u64 {
        if self.is_small() {
            0
        } else {
            self.head()
        }
    }

    /// The past-the-end position.
    #[inline]
    pub fn end(self) -> u64 {
        if self.is_small() {
            self.len()
        } else {
            INVALID
        }
    }

    /// The position after a valid position `pos`.
    #[inline]
    pub fn advance(self, pos: u64) -> u64 {
        if self.is_small() {
            (pos + 1).min(self.len())
        } else if pos == INVALID {
            INVALID
        } else {
            self.next_of(pos)
        }
    }

    /// Whether `pos` designates an entry (checked against the current state, so a stale
    /// position of a mutated map is refused rather than read).
    pub fn is_valid_pos(self, pos: u64) -> bool {
        if self.is_small() {
            pos < self.len()
        } else {
            pos < self.num_slots() && Self::occupied(self.meta(pos))
        }
    }

    /// The pair at a valid position.
    #[inline]
    pub fn kv_at(self, pos: u64) -> *mut KvPair {
        if self.is_small() {
            self.pair(pos)
        } else {
            // SAFETY: the pair is the first member of the item.
            unsafe { ptr::addr_of_mut!((*self.item(pos)).kv) }
        }
    }

    /// Inserts or updates (`MapBaseObj::InsertMaybeReHash`); ownership of the pair passes to
    /// the map (or is released on failure).
    pub fn insert(self, kv: KvPair) -> Result<Inserted> {
        if !self.is_small() {
            return self.dense_insert(kv);
        }
        if self.num_slots() < SMALL_MAX || self.len() < self.num_slots() {
            return self.small_insert(kv);
        }
        // A full 4-slot small map turns dense, even when the key is already present.
        let grown = match self.to_dense_copy() {
            Ok(g) => g,
            Err(e) => {
                drop_pair(kv);
                return Err(e);
            }
        };
        match RawMap::of_owned(&grown).dense_insert(kv)? {
            Inserted::InPlace => Ok(Inserted::Grown(grown)),
            again => Ok(again),
        }
    }

    /// `CreateFromRange` over this small map's pairs with `cap = size` (≥ 4): a dense copy.
    fn to_dense_copy(self) -> Result<ObjectRef<MapBase>> {
        let (shift, slots) = table_size(self.len());
        let mut target = new_dense(self.type_index(), shift, slots);
        for i in 0..self.len() {
            if let Inserted::Grown(g) =
                RawMap::of_owned(&target).dense_insert(self.clone_pair(i))?
            {
                target = g;
            }
        }
        Ok(target)
    }

    /// Removes the entry at a position (no-op for an invalid one).
    pub fn erase_at(self, pos: u64) -> Result<()> {
        if self.is_small() {
            self.small_erase(pos);
            Ok(())
        } else if self.is_valid_pos(pos) {
            self.dense_erase(pos)
        } else {
            Ok(())
        }
    }

    /// Removes `key`; whether it was present.
    pub fn erase(self, key: &TVMFFIAny) -> Result<bool> {
        match self.find(key)? {
            Some(pos) => {
                self.erase_at(pos)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Drops every entry, keeping the layout and the storage.
    pub fn clear(self) {
        if self.is_small() {
            self.small_clear();
        } else {
            self.dense_clear();
        }
    }

    /// Releases entries and storage (the destructor of both layouts; storage goes to its own
    /// deleter, whichever library allocated it).
    pub fn destroy(self) {
        if self.is_small() {
            self.small_clear();
            if let Some(d) = self.deleter() {
                // SAFETY: adopted storage and its deleter travel together.
                unsafe { d(self.data()) };
                self.set_data(ptr::null_mut());
                self.set_deleter(None);
                self.set_slots(0);
            }
        } else {
            self.dense_clear();
            self.release_memory();
        }
    }

    /// Takes over the storage of `other` (a map just built for this one), as the official
    /// `InplaceSwitchTo`: this map's entries are released first. Used by in-place Dict growth.
    pub fn inplace_switch_to(self, other: ObjectRef<MapBase>) {
        let o = RawMap::of_owned(&other);
        self.destroy();
        self.set_len(o.len());
        self.set_slots(o.slots());
        self.set_data(o.data());
        if o.is_small() && o.deleter().is_none() {
            // The pairs stay inside `other`; releasing them releases `other`.
            self.set_deleter(Some(release_pairs_owner));
            o.set_data(ptr::null_mut());
            o.set_len(0);
            o.set_slots(0);
            let _owned_by_data = other.into_raw();
            return;
        }
        self.set_deleter(o.deleter());
        if !o.is_small() {
            self.set_fib_shift(o.fib_shift());
            self.set_head(o.head());
            self.set_tail(o.tail());
        }
        o.set_deleter(None);
        o.set_data(ptr::null_mut());
        o.set_len(0);
        o.set_slots(0);
    }

    /// A new map of the same kind with copies of every entry and the same layout
    /// (`MapBaseObj::CopyFrom`, used by copy-on-write).
    pub fn copy(self) -> ObjectRef<MapBase> {
        let ti = self.type_index();
        if self.is_small() {
            let out = new_small(ti, self.len());
            self.small_copy_into(RawMap::of_owned(&out));
            return out;
        }
        let out = new_dense(ti, self.fib_shift(), self.num_slots());
        let o = RawMap::of_owned(&out);
        for i in 0..self.num_slots() {
            let m = self.meta(i);
            if Self::occupied(m) {
                // SAFETY: occupied source slot.
                let src = unsafe { &*self.item(i) };
                o.put(
                    i,
                    m,
                    KvPair {
                        // SAFETY: the values are stored in, or borrowed from, live objects.
                        key: unsafe { clone_raw(&src.kv.key) },
                        // SAFETY: the values are stored in, or borrowed from, live objects.
                        value: unsafe { clone_raw(&src.kv.value) },
                    },
                );
                o.set_links(i, src.prev, src.next);
            }
        }
        o.set_len(self.len());
        o.set_head(self.head());
        o.set_tail(self.tail());
        out
    }

    /// The bitwise key, value, prev and next of an occupied dense slot (borrowed copies, never
    /// to be released; for tests and layout probes).
    pub fn dense_slot(self, i: u64) -> Option<(TVMFFIAny, TVMFFIAny, u64, u64)> {
        if self.is_small() || !self.is_valid_pos(i) {
            return None;
        }
        // SAFETY: occupied slot, copied bitwise.
        let it = unsafe { &*self.item(i) };
        Some((it.kv.key, it.kv.value, it.prev, it.next))
    }

    /// The metadata byte of every dense slot (empty for small maps; for tests and probes).
    pub fn dense_metadata(self) -> Vec<u8> {
        if self.is_small() {
            return Vec::new();
        }
        (0..self.num_slots()).map(|i| self.meta(i)).collect()
    }
}

impl RawMap {
    /// Releases a pair an update of this map took out, once the map is consistent again: a
    /// released value's destructor may use the map (see `LookupGuard::releasing`).
    fn release_pair(self, kv: KvPair) {
        crate::map::LookupGuard::releasing(self.as_ptr(), || drop_pair(kv));
    }
}

/// Releases both values of a pair we own.
#[inline]
fn drop_pair(kv: KvPair) {
    // SAFETY: the pair is owned by the caller and not used again.
    unsafe { (drop_raw(kv.key), drop_raw(kv.value)) };
}

/// A new, empty small map of kind `type_index` with room for `max(n, 2)` pairs in place.
///
/// # Panics
/// When `type_index` is not 72 (`ffi.Map`) or 76 (`ffi.Dict`), or `n` pairs overflow `usize`.
pub fn new_small(type_index: i32, n: u64) -> ObjectRef<MapBase> {
    // The header index decides what downcasts (and foreign code) take the object for.
    assert!(
        type_index == kTVMFFIMap || type_index == kTVMFFIDict,
        "map storage must be an ffi.Map (72) or ffi.Dict (76), got type index {type_index}"
    );
    let n = n.max(SMALL_INIT);
    let base = MapBase {
        header: TVMFFIObject::with_index::<MapBase>(type_index),
        fields: UnsafeCell::new(MapFields {
            data: ptr::null_mut(),
            size: 0,
            slots: n | SMALL_TAG,
            data_deleter: None,
        }),
    };
    let bytes = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(std::mem::size_of::<KvPair>()))
        .expect("small map: pair storage size overflows usize");
    let (obj, tail) = new_object_with_extra(base, bytes);
    // SAFETY: fresh object we own alone; the pairs start right after the base.
    unsafe {
        (*obj.as_ptr()).header.deleter = Some(map_deleter);
        (*(*obj.as_ptr()).fields.get()).data = tail as *mut c_void;
    }
    obj
}

/// A new, empty dense map of kind `type_index` with `slots` slots (all empty).
///
/// # Panics
/// When `type_index` is not 72 or 76, or `slots` is not a power of two with
/// `fib_shift + log2(slots) == 64`.
pub fn new_dense(type_index: i32, fib_shift: u32, slots: u64) -> ObjectRef<MapBase> {
    // The header index decides what downcasts (and foreign code) take the object for.
    assert!(
        type_index == kTVMFFIMap || type_index == kTVMFFIDict,
        "map storage must be an ffi.Map (72) or ffi.Dict (76), got type index {type_index}"
    );
    // Buckets are `FIB_MUL * hash >> fib_shift`, used as slot indices without reduction.
    assert!(
        slots.is_power_of_two() && u64::from(fib_shift) + u64::from(slots.trailing_zeros()) == 64,
        "dense map: {slots} slots need fib_shift {}, got {fib_shift}",
        64 - slots.trailing_zeros().min(64)
    );
    let n_blocks = slots.div_ceil(BLOCK_CAP) as usize;
    let bytes = n_blocks
        .checked_mul(BLOCK_BYTES)
        .expect("map table size overflows usize");
    // SAFETY: plain malloc, checked below.
    let data = unsafe { libc::malloc(bytes.max(1)) } as *mut u8;
    if data.is_null() {
        std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(bytes, 8).unwrap());
    }
    for b in 0..n_blocks {
        // SAFETY: the metadata bytes of block b lie within the allocation.
        unsafe { ptr::write_bytes(data.add(b * BLOCK_BYTES), META_EMPTY, BLOCK_CAP as usize) };
    }
    let base = MapBase {
        header: TVMFFIObject::with_index::<MapBase>(type_index),
        fields: UnsafeCell::new(MapFields {
            data: data as *mut c_void,
            size: 0,
            slots,
            data_deleter: Some(free_blocks),
        }),
    };
    let (obj, tail) = new_object_with_extra(base, std::mem::size_of::<DenseFields>());
    // SAFETY: fresh object we own alone; the dense fields follow the base.
    unsafe {
        (*obj.as_ptr()).header.deleter = Some(map_deleter);
        (tail as *mut DenseFields).write(DenseFields {
            fib_shift,
            iter_head: INVALID,
            iter_tail: INVALID,
        });
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sizes() {
        assert_eq!(table_size(4), (61, 8));
        assert_eq!(table_size(5), (60, 16));
        assert_eq!(table_size(6), (60, 16));
        assert_eq!(table_size(8), (60, 16));
        assert_eq!(table_size(1000), (53, 2048));
    }

    #[test]
    fn offsets() {
        assert_eq!(std::mem::offset_of!(MapBase, fields), 24);
        assert_eq!(std::mem::offset_of!(MapFields, data), 0);
        assert_eq!(std::mem::offset_of!(MapFields, size), 8);
        assert_eq!(std::mem::offset_of!(MapFields, slots), 16);
        assert_eq!(std::mem::offset_of!(MapFields, data_deleter), 24);
        assert_eq!(std::mem::offset_of!(DenseFields, iter_head), 8);
        assert_eq!(std::mem::offset_of!(DenseFields, iter_tail), 16);
        assert_eq!(NEXT_PROBE[16], 21);
        assert_eq!(NEXT_PROBE[125], 5209859154120846435);
    }
}
