/*
 * Prints the size, alignment and field offsets of every ABI struct, and the value of every ABI
 * constant. Compiled once against anyffi's generated header and once against the official
 * headers; run.sh diffs the two outputs, so any layout drift in include/anyffi/c_api.h fails.
 */
#include <stddef.h>
#include <stdio.h>

#ifdef PROBE_OFFICIAL
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>
#define ANY_V(f) f
#else
#include "anyffi/c_api.h"
#define ANY_V(f) value.f
#endif

#define S(T) printf("%-28s size %3zu align %zu\n", #T, sizeof(T), _Alignof(T))
#define F(T, f) printf("%-28s .%-28s @ %zu\n", #T, #f, offsetof(T, f))
#define C(k) printf("%-44s = %lld\n", #k, (long long)(k))

int main(void) {
  S(TVMFFIVersion); F(TVMFFIVersion, major); F(TVMFFIVersion, minor); F(TVMFFIVersion, patch);
  S(TVMFFIObject); F(TVMFFIObject, combined_ref_count); F(TVMFFIObject, type_index); F(TVMFFIObject, deleter);
  S(TVMFFIAny); F(TVMFFIAny, type_index); F(TVMFFIAny, small_str_len); F(TVMFFIAny, ANY_V(v_int64));
  F(TVMFFIAny, ANY_V(v_float64)); F(TVMFFIAny, ANY_V(v_ptr)); F(TVMFFIAny, ANY_V(v_c_str));
  F(TVMFFIAny, ANY_V(v_obj)); F(TVMFFIAny, ANY_V(v_dtype)); F(TVMFFIAny, ANY_V(v_device));
  F(TVMFFIAny, ANY_V(v_bytes)); F(TVMFFIAny, ANY_V(v_uint64));
  S(TVMFFIByteArray); F(TVMFFIByteArray, data); F(TVMFFIByteArray, size);
  S(TVMFFIShapeCell); F(TVMFFIShapeCell, data); F(TVMFFIShapeCell, size);
  S(TVMFFISeqCell); F(TVMFFISeqCell, data); F(TVMFFISeqCell, size); F(TVMFFISeqCell, capacity);
  F(TVMFFISeqCell, data_deleter);
  S(TVMFFIErrorCell); F(TVMFFIErrorCell, kind); F(TVMFFIErrorCell, message); F(TVMFFIErrorCell, backtrace);
  F(TVMFFIErrorCell, update_backtrace); F(TVMFFIErrorCell, cause_chain); F(TVMFFIErrorCell, extra_context);
  S(TVMFFIFunctionCell); F(TVMFFIFunctionCell, safe_call); F(TVMFFIFunctionCell, cpp_call);
  S(TVMFFIOpaqueObjectCell); F(TVMFFIOpaqueObjectCell, handle);
  S(TVMFFIObjectAllocHeader); F(TVMFFIObjectAllocHeader, delete_space);
  S(TVMFFICustomAllocator); F(TVMFFICustomAllocator, allocate); F(TVMFFICustomAllocator, context);
  S(TVMFFIFieldInfo); F(TVMFFIFieldInfo, name); F(TVMFFIFieldInfo, doc); F(TVMFFIFieldInfo, metadata);
  F(TVMFFIFieldInfo, flags); F(TVMFFIFieldInfo, size); F(TVMFFIFieldInfo, alignment); F(TVMFFIFieldInfo, offset);
  F(TVMFFIFieldInfo, getter); F(TVMFFIFieldInfo, setter); F(TVMFFIFieldInfo, default_value_or_factory);
  F(TVMFFIFieldInfo, field_static_type_index);
  S(TVMFFIMethodInfo); F(TVMFFIMethodInfo, name); F(TVMFFIMethodInfo, doc); F(TVMFFIMethodInfo, metadata);
  F(TVMFFIMethodInfo, flags); F(TVMFFIMethodInfo, method);
  S(TVMFFITypeMetadata); F(TVMFFITypeMetadata, doc); F(TVMFFITypeMetadata, creator);
  F(TVMFFITypeMetadata, total_size); F(TVMFFITypeMetadata, structural_eq_hash_kind);
  S(TVMFFITypeAttrColumn); F(TVMFFITypeAttrColumn, data); F(TVMFFITypeAttrColumn, size);
  F(TVMFFITypeAttrColumn, begin_index);
  S(TVMFFITypeInfo); F(TVMFFITypeInfo, type_index); F(TVMFFITypeInfo, type_depth); F(TVMFFITypeInfo, type_key);
  F(TVMFFITypeInfo, type_ancestors); F(TVMFFITypeInfo, type_key_hash); F(TVMFFITypeInfo, num_fields);
  F(TVMFFITypeInfo, num_methods); F(TVMFFITypeInfo, fields); F(TVMFFITypeInfo, methods); F(TVMFFITypeInfo, metadata);
  S(DLDataType); F(DLDataType, code); F(DLDataType, bits); F(DLDataType, lanes);
  S(DLDevice); F(DLDevice, device_type); F(DLDevice, device_id);
  S(DLTensor); F(DLTensor, data); F(DLTensor, device); F(DLTensor, ndim); F(DLTensor, dtype); F(DLTensor, shape);
  F(DLTensor, strides); F(DLTensor, byte_offset);
  S(DLManagedTensor); F(DLManagedTensor, dl_tensor); F(DLManagedTensor, manager_ctx); F(DLManagedTensor, deleter);
  S(DLManagedTensorVersioned); F(DLManagedTensorVersioned, version); F(DLManagedTensorVersioned, manager_ctx);
  F(DLManagedTensorVersioned, deleter); F(DLManagedTensorVersioned, flags); F(DLManagedTensorVersioned, dl_tensor);
  S(DLPackExchangeAPI); F(DLPackExchangeAPI, header); F(DLPackExchangeAPI, managed_tensor_allocator);
  F(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync); F(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync);
  F(DLPackExchangeAPI, dltensor_from_py_object_no_sync); F(DLPackExchangeAPI, current_work_stream);

  C(kTVMFFIAny); C(kTVMFFINone); C(kTVMFFIInt); C(kTVMFFIBool); C(kTVMFFIFloat); C(kTVMFFIOpaquePtr);
  C(kTVMFFIDataType); C(kTVMFFIDevice); C(kTVMFFIDLTensorPtr); C(kTVMFFIRawStr); C(kTVMFFIByteArrayPtr);
  C(kTVMFFIObjectRValueRef); C(kTVMFFISmallStr); C(kTVMFFISmallBytes); C(kTVMFFIUnchanged);
  C(kTVMFFIStaticObjectBegin); C(kTVMFFIObject); C(kTVMFFIStr); C(kTVMFFIBytes); C(kTVMFFIError);
  C(kTVMFFIFunction); C(kTVMFFIShape); C(kTVMFFITensor); C(kTVMFFIArray); C(kTVMFFIMap); C(kTVMFFIModule);
  C(kTVMFFIOpaquePyObject); C(kTVMFFIList); C(kTVMFFIDict); C(kTVMFFIVisitInterrupt); C(kTVMFFIBigInt);
  C(kTVMFFIStaticObjectEnd); C(kTVMFFIDynObjectBegin);
  C(kTVMFFIObjectDeleterFlagBitMaskStrong); C(kTVMFFIObjectDeleterFlagBitMaskWeak);
  C(kTVMFFIObjectDeleterFlagBitMaskBoth);
  C(kTVMFFIBacktraceUpdateModeReplace); C(kTVMFFIBacktraceUpdateModeAppend);
  C(kTVMFFIFieldFlagBitMaskWritable); C(kTVMFFIFieldFlagBitMaskHasDefault); C(kTVMFFIFieldFlagBitMaskIsStaticMethod);
  C(kTVMFFIFieldFlagBitMaskSEqHashIgnore); C(kTVMFFIFieldFlagBitMaskSEqHashDefPattern);
  C(kTVMFFIFieldFlagBitMaskDefaultFromFactory); C(kTVMFFIFieldFlagBitMaskReprOff);
  C(kTVMFFIFieldFlagBitMaskCompareOff); C(kTVMFFIFieldFlagBitMaskHashOff); C(kTVMFFIFieldFlagBitMaskInitOff);
  C(kTVMFFIFieldFlagBitMaskKwOnly); C(kTVMFFIFieldFlagBitSetterIsFunctionObj);
  C(kTVMFFIFieldFlagBitMaskSEqHashDefSimple);
  C(kTVMFFISEqHashKindUnsupported); C(kTVMFFISEqHashKindTreeNode); C(kTVMFFISEqHashKindFreeVar);
  C(kTVMFFISEqHashKindDAGNode); C(kTVMFFISEqHashKindConstTreeNode); C(kTVMFFISEqHashKindUniqueInstance);
  C(DLPACK_MAJOR_VERSION); C(DLPACK_MINOR_VERSION);
  C(DLPACK_FLAG_BITMASK_READ_ONLY); C(DLPACK_FLAG_BITMASK_IS_COPIED); C(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  C(kDLCPU); C(kDLCUDA); C(kDLCUDAHost); C(kDLOpenCL); C(kDLVulkan); C(kDLMetal); C(kDLVPI); C(kDLROCM);
  C(kDLROCMHost); C(kDLExtDev); C(kDLCUDAManaged); C(kDLOneAPI); C(kDLWebGPU); C(kDLHexagon); C(kDLMAIA);
  C(kDLTrn);
  C(kDLInt); C(kDLUInt); C(kDLFloat); C(kDLOpaqueHandle); C(kDLBfloat); C(kDLComplex); C(kDLBool);
  C(kDLFloat8_e3m4); C(kDLFloat8_e4m3); C(kDLFloat8_e4m3b11fnuz); C(kDLFloat8_e4m3fn); C(kDLFloat8_e4m3fnuz);
  C(kDLFloat8_e5m2); C(kDLFloat8_e5m2fnuz); C(kDLFloat8_e8m0fnu); C(kDLFloat6_e2m3fn); C(kDLFloat6_e3m2fn);
  C(kDLFloat4_e2m1fn);
  return 0;
}
