//! `#[repr(C)]` mirrors of every struct, enum constant and flag of `c_api.h`, `c_env_api.h` and
//! `dlpack.h` (DLPack 1.3), with compile-time size and offset checks. No logic lives here.
//!
//! Rationale: DLPack is mirrored here rather than taken from a crate so that cbindgen sees every
//! type of the C header we generate, and so that the 1.3 additions (versioned tensors, flags,
//! `DLPackExchangeAPI`) sit beside the asserts that pin their layout.
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};
use std::sync::atomic::AtomicU64;

// ---------------------------------------------------------------------------------------------
// Version
// ---------------------------------------------------------------------------------------------

pub const TVM_FFI_VERSION_MAJOR: u32 = 0;
pub const TVM_FFI_VERSION_MINOR: u32 = 1;
pub const TVM_FFI_VERSION_PATCH: u32 = 16;

/// The C ABI version triple (`TVMFFIVersion`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TVMFFIVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

// ---------------------------------------------------------------------------------------------
// Type indices (TVMFFITypeIndex)
// ---------------------------------------------------------------------------------------------

pub const kTVMFFIAny: i32 = -1;
pub const kTVMFFINone: i32 = 0;
pub const kTVMFFIInt: i32 = 1;
pub const kTVMFFIBool: i32 = 2;
pub const kTVMFFIFloat: i32 = 3;
pub const kTVMFFIOpaquePtr: i32 = 4;
pub const kTVMFFIDataType: i32 = 5;
pub const kTVMFFIDevice: i32 = 6;
pub const kTVMFFIDLTensorPtr: i32 = 7;
pub const kTVMFFIRawStr: i32 = 8;
pub const kTVMFFIByteArrayPtr: i32 = 9;
pub const kTVMFFIObjectRValueRef: i32 = 10;
pub const kTVMFFISmallStr: i32 = 11;
pub const kTVMFFISmallBytes: i32 = 12;
pub const kTVMFFIUnchanged: i32 = 13;
pub const kTVMFFIStaticObjectBegin: i32 = 64;
pub const kTVMFFIObject: i32 = 64;
pub const kTVMFFIStr: i32 = 65;
pub const kTVMFFIBytes: i32 = 66;
pub const kTVMFFIError: i32 = 67;
pub const kTVMFFIFunction: i32 = 68;
pub const kTVMFFIShape: i32 = 69;
pub const kTVMFFITensor: i32 = 70;
pub const kTVMFFIArray: i32 = 71;
pub const kTVMFFIMap: i32 = 72;
pub const kTVMFFIModule: i32 = 73;
pub const kTVMFFIOpaquePyObject: i32 = 74;
pub const kTVMFFIList: i32 = 75;
pub const kTVMFFIDict: i32 = 76;
pub const kTVMFFIVisitInterrupt: i32 = 77;
pub const kTVMFFIBigInt: i32 = 78;
pub const kTVMFFIStaticObjectEnd: i32 = 79;
pub const kTVMFFIDynObjectBegin: i32 = 128;

// Deleter flags (TVMFFIObjectDeleterFlagBitMask).
pub const kTVMFFIObjectDeleterFlagBitMaskStrong: i32 = 1;
pub const kTVMFFIObjectDeleterFlagBitMaskWeak: i32 = 2;
pub const kTVMFFIObjectDeleterFlagBitMaskBoth: i32 = 3;

// Backtrace update modes for `TVMFFIErrorCell::update_backtrace`.
pub const kTVMFFIBacktraceUpdateModeReplace: i32 = 0;
pub const kTVMFFIBacktraceUpdateModeAppend: i32 = 1;

// Field flags (TVMFFIFieldFlagBitMask).
pub const kTVMFFIFieldFlagBitMaskWritable: i64 = 1 << 0;
pub const kTVMFFIFieldFlagBitMaskHasDefault: i64 = 1 << 1;
pub const kTVMFFIFieldFlagBitMaskIsStaticMethod: i64 = 1 << 2;
pub const kTVMFFIFieldFlagBitMaskSEqHashIgnore: i64 = 1 << 3;
pub const kTVMFFIFieldFlagBitMaskSEqHashDefPattern: i64 = 1 << 4;
pub const kTVMFFIFieldFlagBitMaskDefaultFromFactory: i64 = 1 << 5;
pub const kTVMFFIFieldFlagBitMaskReprOff: i64 = 1 << 6;
pub const kTVMFFIFieldFlagBitMaskCompareOff: i64 = 1 << 7;
pub const kTVMFFIFieldFlagBitMaskHashOff: i64 = 1 << 8;
pub const kTVMFFIFieldFlagBitMaskInitOff: i64 = 1 << 9;
pub const kTVMFFIFieldFlagBitMaskKwOnly: i64 = 1 << 10;
pub const kTVMFFIFieldFlagBitSetterIsFunctionObj: i64 = 1 << 11;
pub const kTVMFFIFieldFlagBitMaskSEqHashDefSimple: i64 = 1 << 12;

// Structural equality/hash kinds (TVMFFISEqHashKind).
pub const kTVMFFISEqHashKindUnsupported: i32 = 0;
pub const kTVMFFISEqHashKindTreeNode: i32 = 1;
pub const kTVMFFISEqHashKindFreeVar: i32 = 2;
pub const kTVMFFISEqHashKindDAGNode: i32 = 3;
pub const kTVMFFISEqHashKindConstTreeNode: i32 = 4;
pub const kTVMFFISEqHashKindUniqueInstance: i32 = 5;

// Definition regions of structural equality/hash/visit (TVMFFIDefRegionKind).
pub const kTVMFFIDefRegionKindNone: i32 = 0;
pub const kTVMFFIDefRegionKindPattern: i32 = 1;
pub const kTVMFFIDefRegionKindSimple: i32 = 2;

// ---------------------------------------------------------------------------------------------
// DLPack 1.3
// ---------------------------------------------------------------------------------------------

pub const DLPACK_MAJOR_VERSION: u32 = 1;
pub const DLPACK_MINOR_VERSION: u32 = 3;

pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

// DLDeviceType
pub const kDLCPU: i32 = 1;
pub const kDLCUDA: i32 = 2;
pub const kDLCUDAHost: i32 = 3;
pub const kDLOpenCL: i32 = 4;
pub const kDLVulkan: i32 = 7;
pub const kDLMetal: i32 = 8;
pub const kDLVPI: i32 = 9;
pub const kDLROCM: i32 = 10;
pub const kDLROCMHost: i32 = 11;
pub const kDLExtDev: i32 = 12;
pub const kDLCUDAManaged: i32 = 13;
pub const kDLOneAPI: i32 = 14;
pub const kDLWebGPU: i32 = 15;
pub const kDLHexagon: i32 = 16;
pub const kDLMAIA: i32 = 17;
pub const kDLTrn: i32 = 18;

// DLDataTypeCode
pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;
pub const kDLOpaqueHandle: u8 = 3;
pub const kDLBfloat: u8 = 4;
pub const kDLComplex: u8 = 5;
pub const kDLBool: u8 = 6;
pub const kDLFloat8_e3m4: u8 = 7;
pub const kDLFloat8_e4m3: u8 = 8;
pub const kDLFloat8_e4m3b11fnuz: u8 = 9;
pub const kDLFloat8_e4m3fn: u8 = 10;
pub const kDLFloat8_e4m3fnuz: u8 = 11;
pub const kDLFloat8_e5m2: u8 = 12;
pub const kDLFloat8_e5m2fnuz: u8 = 13;
pub const kDLFloat8_e8m0fnu: u8 = 14;
pub const kDLFloat6_e2m3fn: u8 = 15;
pub const kDLFloat6_e3m2fn: u8 = 16;
pub const kDLFloat4_e2m1fn: u8 = 17;

/// DLPack version pair.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// A device: DLPack device type and ordinal.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

/// An element type: code, bits, lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// A borrowed, plain tensor description.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// Legacy managed tensor: the producer's deleter frees it.
#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// Versioned managed tensor (DLPack >= 1.0).
#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// Allocator of managed tensors, as a framework exposes it (`DLPackManagedTensorAllocator`).
pub type DLPackManagedTensorAllocator = Option<
    unsafe extern "C" fn(
        prototype: *mut DLTensor,
        out: *mut *mut DLManagedTensorVersioned,
        error_ctx: *mut c_void,
        set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
    ) -> c_int,
>;

/// Header of `DLPackExchangeAPI`.
#[repr(C)]
pub struct DLPackExchangeAPIHeader {
    pub version: DLPackVersion,
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// The DLPack exchange table a framework publishes (only its layout matters to us).
#[repr(C)]
pub struct DLPackExchangeAPI {
    pub header: DLPackExchangeAPIHeader,
    pub managed_tensor_allocator: DLPackManagedTensorAllocator,
    pub managed_tensor_from_py_object_no_sync: *mut c_void,
    pub managed_tensor_to_py_object_no_sync: *mut c_void,
    pub dltensor_from_py_object_no_sync: *mut c_void,
    pub current_work_stream: *mut c_void,
}

// ---------------------------------------------------------------------------------------------
// Objects and Any
// ---------------------------------------------------------------------------------------------

/// Deleter of an object: receives the header pointer and a flag mask (1 strong, 2 weak, 3 both).
pub type TVMFFIObjectDeleter = Option<unsafe extern "C" fn(self_: *mut c_void, flags: c_int)>;

/// The 24-byte header every object starts with.
#[repr(C)]
pub struct TVMFFIObject {
    /// Strong count in the low 32 bits, weak count in the high 32 bits.
    // Not `pub`: through an `&TVMFFIObject` (every object handle lends one) a public `AtomicU64`
    // could be decremented from safe code and free a live object; read it with
    // `TVMFFIObject::ref_count_word`.
    pub(crate) combined_ref_count: AtomicU64,
    pub type_index: i32,
    pub __padding: u32,
    pub deleter: TVMFFIObjectDeleter,
}

impl TVMFFIObject {
    /// The combined count word (strong count low 32 bits, weak count high 32 bits).
    #[inline]
    pub fn ref_count_word(&self) -> u64 {
        self.combined_ref_count
            .load(std::sync::atomic::Ordering::Acquire)
    }
}

/// The 8-byte payload of an Any.
#[repr(C)]
#[derive(Clone, Copy)]
pub union TVMFFIAnyValue {
    pub v_int64: i64,
    pub v_float64: f64,
    pub v_ptr: *mut c_void,
    pub v_c_str: *const c_char,
    pub v_obj: *mut TVMFFIObject,
    pub v_dtype: DLDataType,
    pub v_device: DLDevice,
    pub v_bytes: [u8; 8],
    pub v_uint64: u64,
}

/// A tagged 16-byte value. `small_str_len` is the `zero_padding` word; it is non-zero only for
/// SmallStr/SmallBytes, where it holds the length.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIAny {
    pub type_index: i32,
    pub small_str_len: u32,
    pub value: TVMFFIAnyValue,
}

impl TVMFFIAny {
    /// The None value, with every byte zero.
    pub const NONE: TVMFFIAny = TVMFFIAny {
        type_index: kTVMFFINone,
        small_str_len: 0,
        value: TVMFFIAnyValue { v_uint64: 0 },
    };
}

/// A borrowed byte range (not NUL-terminated in general).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TVMFFIByteArray {
    pub data: *const c_char,
    pub size: usize,
}

/// Borrowed shape data.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TVMFFIShapeCell {
    pub data: *const i64,
    pub size: usize,
}

/// Sequence storage shared by Array and List.
#[repr(C)]
pub struct TVMFFISeqCell {
    pub data: *mut c_void,
    pub size: i64,
    pub capacity: i64,
    pub data_deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// Safe-call signature: every packed function is called through it.
pub type TVMFFISafeCallType = Option<
    unsafe extern "C" fn(
        handle: *mut c_void,
        args: *const TVMFFIAny,
        num_args: i32,
        result: *mut TVMFFIAny,
    ) -> c_int,
>;

/// Cell after the header of an `ffi.Function`.
#[repr(C)]
pub struct TVMFFIFunctionCell {
    pub safe_call: TVMFFISafeCallType,
    /// C++-ABI fast path of header-compiled code; always NULL in functions we create.
    pub cpp_call: *mut c_void,
}

/// Cell after the header of an `ffi.Error`.
#[repr(C)]
pub struct TVMFFIErrorCell {
    pub kind: TVMFFIByteArray,
    pub message: TVMFFIByteArray,
    pub backtrace: TVMFFIByteArray,
    pub update_backtrace: Option<
        unsafe extern "C" fn(self_: *mut c_void, backtrace: *const TVMFFIByteArray, mode: i32),
    >,
    pub cause_chain: *mut c_void,
    pub extra_context: *mut c_void,
}

/// Cell after the header of an `ffi.OpaquePyObject`.
#[repr(C)]
pub struct TVMFFIOpaqueObjectCell {
    pub handle: *mut c_void,
}

/// Prefix placed before an object body by a custom allocator (dormant in this ABI version).
#[repr(C)]
pub struct TVMFFIObjectAllocHeader {
    pub delete_space: Option<unsafe extern "C" fn(body: *mut c_void)>,
}

/// A custom object allocator.
#[repr(C)]
pub struct TVMFFICustomAllocator {
    pub allocate: Option<
        unsafe extern "C" fn(
            size: usize,
            align: usize,
            type_index: i32,
            ctx: *mut c_void,
        ) -> *mut c_void,
    >,
    pub context: *mut c_void,
}

/// Getter of a reflected field: reads `field_addr` into an owned Any.
pub type TVMFFIFieldGetter =
    Option<unsafe extern "C" fn(field: *mut c_void, result: *mut TVMFFIAny) -> c_int>;
/// Setter of a reflected field from a borrowed Any.
pub type TVMFFIFieldSetter =
    Option<unsafe extern "C" fn(field: *mut c_void, value: *const TVMFFIAny) -> c_int>;
/// Creator of an empty object of a reflected type.
pub type TVMFFIObjectCreator = Option<unsafe extern "C" fn(result: *mut *mut c_void) -> c_int>;

/// Reflection information of one field.
#[repr(C)]
pub struct TVMFFIFieldInfo {
    pub name: TVMFFIByteArray,
    pub doc: TVMFFIByteArray,
    pub metadata: TVMFFIByteArray,
    pub flags: i64,
    pub size: i64,
    pub alignment: i64,
    pub offset: i64,
    pub getter: TVMFFIFieldGetter,
    /// A `TVMFFIFieldSetter`, or an `ffi.Function` handle when `SetterIsFunctionObj` is set.
    pub setter: *mut c_void,
    pub default_value_or_factory: TVMFFIAny,
    pub field_static_type_index: i32,
}

/// Reflection information of one method.
#[repr(C)]
pub struct TVMFFIMethodInfo {
    pub name: TVMFFIByteArray,
    pub doc: TVMFFIByteArray,
    pub metadata: TVMFFIByteArray,
    pub flags: i64,
    pub method: TVMFFIAny,
}

/// Extra per-type information.
#[repr(C)]
pub struct TVMFFITypeMetadata {
    pub doc: TVMFFIByteArray,
    pub creator: TVMFFIObjectCreator,
    pub total_size: i32,
    pub structural_eq_hash_kind: i32,
}

/// One type attribute column: `data[type_index]` for `type_index < size`.
#[repr(C)]
pub struct TVMFFITypeAttrColumn {
    pub data: *const TVMFFIAny,
    pub size: i32,
    pub begin_index: i32,
}

/// Runtime type information; pointers to it stay valid for the life of the process.
#[repr(C)]
pub struct TVMFFITypeInfo {
    pub type_index: i32,
    pub type_depth: i32,
    pub type_key: TVMFFIByteArray,
    pub type_ancestors: *const *const TVMFFITypeInfo,
    pub type_key_hash: u64,
    pub num_fields: i32,
    pub num_methods: i32,
    pub fields: *const TVMFFIFieldInfo,
    pub methods: *const TVMFFIMethodInfo,
    pub metadata: *const TVMFFITypeMetadata,
}

// ---------------------------------------------------------------------------------------------
// Layout checks (spec §2.1, verified against the official headers)
// ---------------------------------------------------------------------------------------------

macro_rules! assert_layout {
    ($t:ty, $size:expr, $align:expr $(, $field:ident @ $off:expr)*) => {
        const _: () = {
            assert!(size_of::<$t>() == $size);
            assert!(std::mem::align_of::<$t>() == $align);
            $(assert!(offset_of!($t, $field) == $off);)*
        };
    };
}

assert_layout!(TVMFFIVersion, 12, 4, major @ 0, minor @ 4, patch @ 8);
assert_layout!(TVMFFIObject, 24, 8, combined_ref_count @ 0, type_index @ 8, deleter @ 16);
assert_layout!(TVMFFIAny, 16, 8, type_index @ 0, small_str_len @ 4, value @ 8);
assert_layout!(TVMFFIByteArray, 16, 8, data @ 0, size @ 8);
assert_layout!(TVMFFIShapeCell, 16, 8, data @ 0, size @ 8);
assert_layout!(TVMFFISeqCell, 32, 8, data @ 0, size @ 8, capacity @ 16, data_deleter @ 24);
assert_layout!(TVMFFIErrorCell, 72, 8, kind @ 0, message @ 16, backtrace @ 32, update_backtrace @ 48,
    cause_chain @ 56, extra_context @ 64);
assert_layout!(TVMFFIFunctionCell, 16, 8, safe_call @ 0, cpp_call @ 8);
assert_layout!(TVMFFIOpaqueObjectCell, 8, 8, handle @ 0);
assert_layout!(TVMFFIObjectAllocHeader, 8, 8, delete_space @ 0);
assert_layout!(TVMFFICustomAllocator, 16, 8, allocate @ 0, context @ 8);
assert_layout!(TVMFFIFieldInfo, 120, 8, name @ 0, doc @ 16, metadata @ 32, flags @ 48, size @ 56,
    alignment @ 64, offset @ 72, getter @ 80, setter @ 88, default_value_or_factory @ 96,
    field_static_type_index @ 112);
assert_layout!(TVMFFIMethodInfo, 72, 8, name @ 0, doc @ 16, metadata @ 32, flags @ 48, method @ 56);
assert_layout!(TVMFFITypeMetadata, 32, 8, doc @ 0, creator @ 16, total_size @ 24,
    structural_eq_hash_kind @ 28);
assert_layout!(TVMFFITypeAttrColumn, 16, 8, data @ 0, size @ 8, begin_index @ 12);
assert_layout!(TVMFFITypeInfo, 72, 8, type_index @ 0, type_depth @ 4, type_key @ 8,
    type_ancestors @ 24, type_key_hash @ 32, num_fields @ 40, num_methods @ 44, fields @ 48,
    methods @ 56, metadata @ 64);
assert_layout!(DLDataType, 4, 2, code @ 0, bits @ 1, lanes @ 2);
assert_layout!(DLDevice, 8, 4, device_type @ 0, device_id @ 4);
assert_layout!(DLTensor, 48, 8, data @ 0, device @ 8, ndim @ 16, dtype @ 20, shape @ 24,
    strides @ 32, byte_offset @ 40);
assert_layout!(DLManagedTensor, 64, 8, dl_tensor @ 0, manager_ctx @ 48, deleter @ 56);
assert_layout!(DLManagedTensorVersioned, 80, 8, version @ 0, manager_ctx @ 8, deleter @ 16,
    flags @ 24, dl_tensor @ 32);
assert_layout!(DLPackExchangeAPI, 56, 8, header @ 0, managed_tensor_allocator @ 16,
    managed_tensor_from_py_object_no_sync @ 24, managed_tensor_to_py_object_no_sync @ 32,
    dltensor_from_py_object_no_sync @ 40, current_work_stream @ 48);
