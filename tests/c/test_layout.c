/*
 * test_layout.c: sizes, alignments and field offsets of every public struct in
 * c_api.h, c_env_api.h and dlpack.h (spec §2.1), plus enum values and the
 * version (spec §0, §3.1, §12).
 *
 * The layout table is checked twice from one list: at compile time with
 * _Static_assert (the build fails if the headers drift), and at run time so
 * the numbers show up as a test.
 */
#include <stdalign.h>
#include <stddef.h>

#include "tffi_test.h"

/* X(type, size, align) */
#define TFFI_STRUCTS(X)                  \
  X(TVMFFIVersion, 12, 4)                \
  X(TVMFFIObject, 24, 8)                 \
  X(TVMFFIAny, 16, 8)                    \
  X(TVMFFIByteArray, 16, 8)              \
  X(TVMFFIShapeCell, 16, 8)              \
  X(TVMFFISeqCell, 32, 8)                \
  X(TVMFFIErrorCell, 72, 8)              \
  X(TVMFFIFunctionCell, 16, 8)           \
  X(TVMFFIOpaqueObjectCell, 8, 8)        \
  X(TVMFFIObjectAllocHeader, 8, 8)       \
  X(TVMFFICustomAllocator, 16, 8)        \
  X(TVMFFIFieldInfo, 120, 8)             \
  X(TVMFFIMethodInfo, 72, 8)             \
  X(TVMFFITypeMetadata, 32, 8)           \
  X(TVMFFITypeAttrColumn, 16, 8)         \
  X(TVMFFITypeInfo, 72, 8)               \
  X(DLPackVersion, 8, 4)                 \
  X(DLDataType, 4, 2)                    \
  X(DLDevice, 8, 4)                      \
  X(DLTensor, 48, 8)                     \
  X(DLManagedTensor, 64, 8)              \
  X(DLManagedTensorVersioned, 80, 8)     \
  X(DLPackExchangeAPIHeader, 16, 8)      \
  X(DLPackExchangeAPI, 56, 8)

/* F(type, field, offset, size) */
#define TFFI_FIELDS(F)                                               \
  F(TVMFFIVersion, major, 0, 4)                                      \
  F(TVMFFIVersion, minor, 4, 4)                                      \
  F(TVMFFIVersion, patch, 8, 4)                                      \
  F(TVMFFIObject, combined_ref_count, 0, 8)                          \
  F(TVMFFIObject, type_index, 8, 4)                                  \
  F(TVMFFIObject, __padding, 12, 4)                                  \
  F(TVMFFIObject, deleter, 16, 8)                                    \
  F(TVMFFIObject, __ensure_align, 16, 8)                             \
  F(TVMFFIAny, type_index, 0, 4)                                     \
  F(TVMFFIAny, zero_padding, 4, 4)                                   \
  F(TVMFFIAny, small_str_len, 4, 4)                                  \
  F(TVMFFIAny, v_int64, 8, 8)                                        \
  F(TVMFFIAny, v_float64, 8, 8)                                      \
  F(TVMFFIAny, v_ptr, 8, 8)                                          \
  F(TVMFFIAny, v_c_str, 8, 8)                                        \
  F(TVMFFIAny, v_obj, 8, 8)                                          \
  F(TVMFFIAny, v_dtype, 8, 4)                                        \
  F(TVMFFIAny, v_device, 8, 8)                                       \
  F(TVMFFIAny, v_bytes, 8, 8)                                        \
  F(TVMFFIAny, v_uint64, 8, 8)                                       \
  F(TVMFFIByteArray, data, 0, 8)                                     \
  F(TVMFFIByteArray, size, 8, 8)                                     \
  F(TVMFFIShapeCell, data, 0, 8)                                     \
  F(TVMFFIShapeCell, size, 8, 8)                                     \
  F(TVMFFISeqCell, data, 0, 8)                                       \
  F(TVMFFISeqCell, size, 8, 8)                                       \
  F(TVMFFISeqCell, capacity, 16, 8)                                  \
  F(TVMFFISeqCell, data_deleter, 24, 8)                              \
  F(TVMFFIErrorCell, kind, 0, 16)                                    \
  F(TVMFFIErrorCell, message, 16, 16)                                \
  F(TVMFFIErrorCell, backtrace, 32, 16)                              \
  F(TVMFFIErrorCell, update_backtrace, 48, 8)                        \
  F(TVMFFIErrorCell, cause_chain, 56, 8)                             \
  F(TVMFFIErrorCell, extra_context, 64, 8)                           \
  F(TVMFFIFunctionCell, safe_call, 0, 8)                             \
  F(TVMFFIFunctionCell, cpp_call, 8, 8)                              \
  F(TVMFFIOpaqueObjectCell, handle, 0, 8)                            \
  F(TVMFFIObjectAllocHeader, delete_space, 0, 8)                     \
  F(TVMFFICustomAllocator, allocate, 0, 8)                           \
  F(TVMFFICustomAllocator, context, 8, 8)                            \
  F(TVMFFIFieldInfo, name, 0, 16)                                    \
  F(TVMFFIFieldInfo, doc, 16, 16)                                    \
  F(TVMFFIFieldInfo, metadata, 32, 16)                               \
  F(TVMFFIFieldInfo, flags, 48, 8)                                   \
  F(TVMFFIFieldInfo, size, 56, 8)                                    \
  F(TVMFFIFieldInfo, alignment, 64, 8)                               \
  F(TVMFFIFieldInfo, offset, 72, 8)                                  \
  F(TVMFFIFieldInfo, getter, 80, 8)                                  \
  F(TVMFFIFieldInfo, setter, 88, 8)                                  \
  F(TVMFFIFieldInfo, default_value_or_factory, 96, 16)               \
  F(TVMFFIFieldInfo, field_static_type_index, 112, 4)                \
  F(TVMFFIMethodInfo, name, 0, 16)                                   \
  F(TVMFFIMethodInfo, doc, 16, 16)                                   \
  F(TVMFFIMethodInfo, metadata, 32, 16)                              \
  F(TVMFFIMethodInfo, flags, 48, 8)                                  \
  F(TVMFFIMethodInfo, method, 56, 16)                                \
  F(TVMFFITypeMetadata, doc, 0, 16)                                  \
  F(TVMFFITypeMetadata, creator, 16, 8)                              \
  F(TVMFFITypeMetadata, total_size, 24, 4)                           \
  F(TVMFFITypeMetadata, structural_eq_hash_kind, 28, 4)              \
  F(TVMFFITypeAttrColumn, data, 0, 8)                                \
  F(TVMFFITypeAttrColumn, size, 8, 4)                                \
  F(TVMFFITypeAttrColumn, begin_index, 12, 4)                        \
  F(TVMFFITypeInfo, type_index, 0, 4)                                \
  F(TVMFFITypeInfo, type_depth, 4, 4)                                \
  F(TVMFFITypeInfo, type_key, 8, 16)                                 \
  F(TVMFFITypeInfo, type_ancestors, 24, 8)                           \
  F(TVMFFITypeInfo, type_key_hash, 32, 8)                            \
  F(TVMFFITypeInfo, num_fields, 40, 4)                               \
  F(TVMFFITypeInfo, num_methods, 44, 4)                              \
  F(TVMFFITypeInfo, fields, 48, 8)                                   \
  F(TVMFFITypeInfo, methods, 56, 8)                                  \
  F(TVMFFITypeInfo, metadata, 64, 8)                                 \
  F(DLPackVersion, major, 0, 4)                                      \
  F(DLPackVersion, minor, 4, 4)                                      \
  F(DLDataType, code, 0, 1)                                          \
  F(DLDataType, bits, 1, 1)                                          \
  F(DLDataType, lanes, 2, 2)                                         \
  F(DLDevice, device_type, 0, 4)                                     \
  F(DLDevice, device_id, 4, 4)                                       \
  F(DLTensor, data, 0, 8)                                            \
  F(DLTensor, device, 8, 8)                                          \
  F(DLTensor, ndim, 16, 4)                                           \
  F(DLTensor, dtype, 20, 4)                                          \
  F(DLTensor, shape, 24, 8)                                          \
  F(DLTensor, strides, 32, 8)                                        \
  F(DLTensor, byte_offset, 40, 8)                                    \
  F(DLManagedTensor, dl_tensor, 0, 48)                               \
  F(DLManagedTensor, manager_ctx, 48, 8)                             \
  F(DLManagedTensor, deleter, 56, 8)                                 \
  F(DLManagedTensorVersioned, version, 0, 8)                         \
  F(DLManagedTensorVersioned, manager_ctx, 8, 8)                     \
  F(DLManagedTensorVersioned, deleter, 16, 8)                        \
  F(DLManagedTensorVersioned, flags, 24, 8)                          \
  F(DLManagedTensorVersioned, dl_tensor, 32, 48)                     \
  F(DLPackExchangeAPIHeader, version, 0, 8)                          \
  F(DLPackExchangeAPIHeader, prev_api, 8, 8)                         \
  F(DLPackExchangeAPI, header, 0, 16)                                \
  F(DLPackExchangeAPI, managed_tensor_allocator, 16, 8)              \
  F(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync, 24, 8) \
  F(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync, 32, 8)   \
  F(DLPackExchangeAPI, dltensor_from_py_object_no_sync, 40, 8)       \
  F(DLPackExchangeAPI, current_work_stream, 48, 8)

/* Compile-time checks. */
#define TFFI_STATIC_STRUCT(T, size, align)                         \
  _Static_assert(sizeof(T) == (size), "sizeof(" #T ")");           \
  _Static_assert(alignof(T) == (align), "alignof(" #T ")");
#define TFFI_STATIC_FIELD(T, f, off, size)                             \
  _Static_assert(offsetof(T, f) == (off), "offsetof(" #T ", " #f ")"); \
  _Static_assert(sizeof(((T*)0)->f) == (size), "sizeof(" #T "." #f ")");
TFFI_STRUCTS(TFFI_STATIC_STRUCT)
TFFI_FIELDS(TFFI_STATIC_FIELD)

/* All C enums of the ABI are int32. */
_Static_assert(sizeof(TVMFFITypeIndex) == 4, "TVMFFITypeIndex is int32");
_Static_assert(sizeof(TVMFFIObjectDeleterFlagBitMask) == 4, "deleter flags are int32");
_Static_assert(sizeof(TVMFFIBacktraceUpdateMode) == 4, "update mode is int32");
_Static_assert(sizeof(TVMFFIFieldFlagBitMask) == 4, "field flags are int32");
_Static_assert(sizeof(TVMFFISEqHashKind) == 4, "SEqHashKind is int32");
_Static_assert(sizeof(TVMFFIDefRegionKind) == 4, "DefRegionKind is int32");
_Static_assert(sizeof(DLDeviceType) == 4, "DLDeviceType is int32");

TEST(layout_struct_sizes) {
#define TFFI_RT_STRUCT(T, size, align) \
  CHECK_EQ(sizeof(T), size);           \
  CHECK_EQ(alignof(T), align);
  TFFI_STRUCTS(TFFI_RT_STRUCT)
#undef TFFI_RT_STRUCT
}

TEST(layout_field_offsets) {
#define TFFI_RT_FIELD(T, f, off, size) \
  CHECK_EQ(offsetof(T, f), off);       \
  CHECK_EQ(sizeof(((T*)0)->f), size);
  TFFI_FIELDS(TFFI_RT_FIELD)
#undef TFFI_RT_FIELD
}

TEST(layout_enum_values) {
  /* Type indices (spec §3.1). */
  CHECK_EQ(kTVMFFIAny, -1);
  CHECK_EQ(kTVMFFINone, 0);
  CHECK_EQ(kTVMFFIInt, 1);
  CHECK_EQ(kTVMFFIBool, 2);
  CHECK_EQ(kTVMFFIFloat, 3);
  CHECK_EQ(kTVMFFIOpaquePtr, 4);
  CHECK_EQ(kTVMFFIDataType, 5);
  CHECK_EQ(kTVMFFIDevice, 6);
  CHECK_EQ(kTVMFFIDLTensorPtr, 7);
  CHECK_EQ(kTVMFFIRawStr, 8);
  CHECK_EQ(kTVMFFIByteArrayPtr, 9);
  CHECK_EQ(kTVMFFIObjectRValueRef, 10);
  CHECK_EQ(kTVMFFISmallStr, 11);
  CHECK_EQ(kTVMFFISmallBytes, 12);
  CHECK_EQ(kTVMFFIUnchanged, 13);
  CHECK_EQ(kTVMFFIStaticObjectBegin, 64);
  CHECK_EQ(kTVMFFIObject, 64);
  CHECK_EQ(kTVMFFIStr, 65);
  CHECK_EQ(kTVMFFIBytes, 66);
  CHECK_EQ(kTVMFFIError, 67);
  CHECK_EQ(kTVMFFIFunction, 68);
  CHECK_EQ(kTVMFFIShape, 69);
  CHECK_EQ(kTVMFFITensor, 70);
  CHECK_EQ(kTVMFFIArray, 71);
  CHECK_EQ(kTVMFFIMap, 72);
  CHECK_EQ(kTVMFFIModule, 73);
  CHECK_EQ(kTVMFFIOpaquePyObject, 74);
  CHECK_EQ(kTVMFFIList, 75);
  CHECK_EQ(kTVMFFIDict, 76);
  CHECK_EQ(kTVMFFIVisitInterrupt, 77);
  CHECK_EQ(kTVMFFIBigInt, 78);
  CHECK_EQ(kTVMFFIStaticObjectEnd, 79);
  CHECK_EQ(kTVMFFIDynObjectBegin, 128);
  /* Deleter flags (spec §2.2). */
  CHECK_EQ(kTVMFFIObjectDeleterFlagBitMaskStrong, 1);
  CHECK_EQ(kTVMFFIObjectDeleterFlagBitMaskWeak, 2);
  CHECK_EQ(kTVMFFIObjectDeleterFlagBitMaskBoth, 3);
  CHECK_EQ(kTVMFFIBacktraceUpdateModeReplace, 0);
  CHECK_EQ(kTVMFFIBacktraceUpdateModeAppend, 1);
  /* Field flags (spec §2.1). */
  CHECK_EQ(kTVMFFIFieldFlagBitMaskWritable, 1);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskHasDefault, 2);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskIsStaticMethod, 4);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskSEqHashIgnore, 8);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskSEqHashDefPattern, 16);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskDefaultFromFactory, 32);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskReprOff, 64);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskCompareOff, 128);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskHashOff, 256);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskInitOff, 512);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskKwOnly, 1024);
  CHECK_EQ(kTVMFFIFieldFlagBitSetterIsFunctionObj, 2048);
  CHECK_EQ(kTVMFFIFieldFlagBitMaskSEqHashDefSimple, 4096);
  CHECK_EQ(kTVMFFISEqHashKindUnsupported, 0);
  CHECK_EQ(kTVMFFISEqHashKindTreeNode, 1);
  CHECK_EQ(kTVMFFISEqHashKindFreeVar, 2);
  CHECK_EQ(kTVMFFISEqHashKindDAGNode, 3);
  CHECK_EQ(kTVMFFISEqHashKindConstTreeNode, 4);
  CHECK_EQ(kTVMFFISEqHashKindUniqueInstance, 5);
  CHECK_EQ(kTVMFFIDefRegionKindNone, 0);
  CHECK_EQ(kTVMFFIDefRegionKindPattern, 1);
  CHECK_EQ(kTVMFFIDefRegionKindSimple, 2);
  /* DLPack 1.3 (spec §2.1, §7.4). */
  CHECK_EQ(DLPACK_MAJOR_VERSION, 1);
  CHECK_EQ(DLPACK_MINOR_VERSION, 3);
  CHECK_EQ(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
  CHECK_EQ(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
  CHECK_EQ(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);
  CHECK_EQ(kDLCPU, 1);
  CHECK_EQ(kDLCUDA, 2);
  CHECK_EQ(kDLInt, 0);
  CHECK_EQ(kDLUInt, 1);
  CHECK_EQ(kDLFloat, 2);
  CHECK_EQ(kDLOpaqueHandle, 3);
  CHECK_EQ(kDLBfloat, 4);
  CHECK_EQ(kDLBool, 6);
  CHECK_EQ(kDLFloat8_e3m4, 7);
  CHECK_EQ(kDLFloat8_e8m0fnu, 14);
  CHECK_EQ(kDLFloat6_e2m3fn, 15);
  CHECK_EQ(kDLFloat6_e3m2fn, 16);
  CHECK_EQ(kDLFloat4_e2m1fn, 17);
}

TEST(version_is_0_1_16) {
  TVMFFIVersion v;
  memset(&v, 0xAB, sizeof(v));
  TVMFFIGetVersion(&v);
  CHECK_EQ(v.major, 0);
  CHECK_EQ(v.minor, 1);
  CHECK_EQ(v.patch, 16);
  /* The header this suite was compiled against says the same. */
  CHECK_EQ(TVM_FFI_VERSION_MAJOR, 0);
  CHECK_EQ(TVM_FFI_VERSION_MINOR, 1);
  CHECK_EQ(TVM_FFI_VERSION_PATCH, 16);
}
