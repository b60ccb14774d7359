"""
    LibAnyFFI

Direct Julia bindings of `include/anyffi/c_api.h` (the TVM FFI stable C ABI as anyffi builds it):
the C names, struct mirrors field for field, and one thin `ccall` wrapper per C function; no
intermediate abstractions. Sections follow the header's order.

The library is chosen at run time (`ANYFFI_LIBRARY`, else the checkout's `target/release`), so
`ccall((:sym, lib), ...)` with a constant library is impossible: `__init__` (in `AnyFFI`) calls
[`load!`](@ref), which `dlopen`s the library and stores every symbol in a `const Ref{Ptr{Cvoid}}`
named `PTR_<symbol>`. The wrappers `ccall` through those pointers.

Layouts are checked against the C header by the test suite (`test/test_layout.jl`: `sizeof` and
`fieldoffset` of every mirror, against the numbers of spec §2.1).
"""
module LibAnyFFI

using Libdl

# ---------------------------------------------------------------------------------------------
# Section: constants (type indices, deleter flags, DLPack codes)
# ---------------------------------------------------------------------------------------------

# Type indices. `@enum` would forbid the two names C gives to 64 (kTVMFFIStaticObjectBegin and
# kTVMFFIObject), so these are plain constants, as in c_api.h.
const kTVMFFIAny = Int32(-1)
const kTVMFFINone = Int32(0)
const kTVMFFIInt = Int32(1)
const kTVMFFIBool = Int32(2)
const kTVMFFIFloat = Int32(3)
const kTVMFFIOpaquePtr = Int32(4)
const kTVMFFIDataType = Int32(5)
const kTVMFFIDevice = Int32(6)
const kTVMFFIDLTensorPtr = Int32(7)
const kTVMFFIRawStr = Int32(8)
const kTVMFFIByteArrayPtr = Int32(9)
const kTVMFFIObjectRValueRef = Int32(10)
const kTVMFFISmallStr = Int32(11)
const kTVMFFISmallBytes = Int32(12)
const kTVMFFIUnchanged = Int32(13)
const kTVMFFIStaticObjectBegin = Int32(64)
const kTVMFFIObject = Int32(64)
const kTVMFFIStr = Int32(65)
const kTVMFFIBytes = Int32(66)
const kTVMFFIError = Int32(67)
const kTVMFFIFunction = Int32(68)
const kTVMFFIShape = Int32(69)
const kTVMFFITensor = Int32(70)
const kTVMFFIArray = Int32(71)
const kTVMFFIMap = Int32(72)
const kTVMFFIModule = Int32(73)
const kTVMFFIOpaquePyObject = Int32(74)
const kTVMFFIList = Int32(75)
const kTVMFFIDict = Int32(76)
const kTVMFFIVisitInterrupt = Int32(77)
const kTVMFFIBigInt = Int32(78)
const kTVMFFIStaticObjectEnd = Int32(79)
const kTVMFFIDynObjectBegin = Int32(128)

const kTVMFFIObjectDeleterFlagBitMaskStrong = Cint(1)
const kTVMFFIObjectDeleterFlagBitMaskWeak = Cint(2)
const kTVMFFIObjectDeleterFlagBitMaskBoth = Cint(3)

const kTVMFFIBacktraceUpdateModeReplace = Int32(0)
const kTVMFFIBacktraceUpdateModeAppend = Int32(1)

const DLPACK_MAJOR_VERSION = UInt32(1)
const DLPACK_MINOR_VERSION = UInt32(3)
const DLPACK_FLAG_BITMASK_READ_ONLY = UInt64(1)
const DLPACK_FLAG_BITMASK_IS_COPIED = UInt64(2)
const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED = UInt64(4)

# DLDeviceType
const kDLCPU = Int32(1)
const kDLCUDA = Int32(2)
const kDLCUDAHost = Int32(3)
const kDLOpenCL = Int32(4)
const kDLVulkan = Int32(7)
const kDLMetal = Int32(8)
const kDLVPI = Int32(9)
const kDLROCM = Int32(10)
const kDLROCMHost = Int32(11)
const kDLExtDev = Int32(12)
const kDLCUDAManaged = Int32(13)
const kDLOneAPI = Int32(14)
const kDLWebGPU = Int32(15)
const kDLHexagon = Int32(16)
const kDLMAIA = Int32(17)
const kDLTrn = Int32(18)

# DLDataTypeCode
const kDLInt = UInt8(0)
const kDLUInt = UInt8(1)
const kDLFloat = UInt8(2)
const kDLOpaqueHandle = UInt8(3)
const kDLBfloat = UInt8(4)
const kDLComplex = UInt8(5)
const kDLBool = UInt8(6)
const kDLFloat8_e3m4 = UInt8(7)
const kDLFloat8_e4m3 = UInt8(8)
const kDLFloat8_e4m3b11fnuz = UInt8(9)
const kDLFloat8_e4m3fn = UInt8(10)
const kDLFloat8_e4m3fnuz = UInt8(11)
const kDLFloat8_e5m2 = UInt8(12)
const kDLFloat8_e5m2fnuz = UInt8(13)
const kDLFloat8_e8m0fnu = UInt8(14)
const kDLFloat6_e2m3fn = UInt8(15)
const kDLFloat6_e3m2fn = UInt8(16)
const kDLFloat4_e2m1fn = UInt8(17)

# ---------------------------------------------------------------------------------------------
# Section: structs (x86-64 layouts, spec §2.1)
# ---------------------------------------------------------------------------------------------

"""`TVMFFIObject`: the 24-byte header every object starts with."""
struct TVMFFIObject
    combined_ref_count::UInt64
    type_index::Int32
    __padding::UInt32
    deleter::Ptr{Cvoid}
end

"""`DLDataType`: element type as (code, bits, lanes); 4 bytes."""
struct DLDataType
    code::UInt8
    bits::UInt8
    lanes::UInt16
end

"""`DLDevice`: DLPack device type and ordinal; 8 bytes."""
struct DLDevice
    device_type::Int32
    device_id::Int32
end

"""
`TVMFFIAny`: a tagged 16-byte value. C's 8-byte payload union (`value`) is one `UInt64` here;
read it through [`any_int64`](@ref), [`any_float64`](@ref), [`any_ptr`](@ref), ... A `Union` of
isbits types would not be isbits in Julia, and a bit pattern is what the union is.
"""
struct TVMFFIAny
    type_index::Int32
    small_str_len::UInt32
    value::UInt64
end

"""`TVMFFIByteArray`: a borrowed byte range."""
struct TVMFFIByteArray
    data::Ptr{UInt8}
    size::Csize_t
end

"""`TVMFFIVersion`: the C ABI version triple."""
struct TVMFFIVersion
    major::UInt32
    minor::UInt32
    patch::UInt32
end

"""`DLTensor`: a plain tensor description; 48 bytes."""
struct DLTensor
    data::Ptr{Cvoid}
    device::DLDevice
    ndim::Int32
    dtype::DLDataType
    shape::Ptr{Int64}
    strides::Ptr{Int64}
    byte_offset::UInt64
end

"""`DLManagedTensor`: legacy managed tensor; the producer's deleter frees it."""
struct DLManagedTensor
    dl_tensor::DLTensor
    manager_ctx::Ptr{Cvoid}
    deleter::Ptr{Cvoid}
end

"""`DLPackVersion`."""
struct DLPackVersion
    major::UInt32
    minor::UInt32
end

"""`DLManagedTensorVersioned` (DLPack >= 1.0)."""
struct DLManagedTensorVersioned
    version::DLPackVersion
    manager_ctx::Ptr{Cvoid}
    deleter::Ptr{Cvoid}
    flags::UInt64
    dl_tensor::DLTensor
end

"""`TVMFFIShapeCell`: after the header of an `ffi.Shape`."""
struct TVMFFIShapeCell
    data::Ptr{Int64}
    size::Csize_t
end

"""`TVMFFISeqCell`: after the header of an `ffi.Array` / `ffi.List`."""
struct TVMFFISeqCell
    data::Ptr{Cvoid}
    size::Int64
    capacity::Int64
    data_deleter::Ptr{Cvoid}
end

"""`TVMFFIFunctionCell`: after the header of an `ffi.Function`."""
struct TVMFFIFunctionCell
    safe_call::Ptr{Cvoid}
    cpp_call::Ptr{Cvoid}
end

"""`TVMFFIErrorCell`: after the header of an `ffi.Error`."""
struct TVMFFIErrorCell
    kind::TVMFFIByteArray
    message::TVMFFIByteArray
    backtrace::TVMFFIByteArray
    update_backtrace::Ptr{Cvoid}
    cause_chain::Ptr{Cvoid}
    extra_context::Ptr{Cvoid}
end

"""`TVMFFITypeInfo`: runtime type information (stable pointers)."""
struct TVMFFITypeInfo
    type_index::Int32
    type_depth::Int32
    type_key::TVMFFIByteArray
    type_ancestors::Ptr{Ptr{TVMFFITypeInfo}}
    type_key_hash::UInt64
    num_fields::Int32
    num_methods::Int32
    fields::Ptr{Cvoid}
    methods::Ptr{Cvoid}
    metadata::Ptr{Cvoid}
end

"""Offset of the cell that follows the object header (`sizeof(TVMFFIObject)`)."""
const OBJECT_HEADER_SIZE = 24

# Payload accessors of TVMFFIAny (the C union)
@inline any_int64(a::TVMFFIAny) = reinterpret(Int64, a.value)
@inline any_float64(a::TVMFFIAny) = reinterpret(Float64, a.value)
@inline any_ptr(a::TVMFFIAny) = Ptr{Cvoid}(UInt(a.value))
@inline any_bool(a::TVMFFIAny) = a.value != 0
@inline any_dtype(a::TVMFFIAny) =
    DLDataType(a.value % UInt8, (a.value >> 8) % UInt8, (a.value >> 16) % UInt16)
@inline any_device(a::TVMFFIAny) =
    DLDevice(reinterpret(Int32, a.value % UInt32), reinterpret(Int32, (a.value >> 32) % UInt32))

@inline dtype_bits(dt::DLDataType) =
    UInt64(dt.code) | (UInt64(dt.bits) << 8) | (UInt64(dt.lanes) << 16)
@inline device_bits(d::DLDevice) =
    UInt64(reinterpret(UInt32, d.device_type)) | (UInt64(reinterpret(UInt32, d.device_id)) << 32)

const ANY_NONE = TVMFFIAny(kTVMFFINone, 0, 0)

# ---------------------------------------------------------------------------------------------
# Section: loading the library
# ---------------------------------------------------------------------------------------------

"""Handle of the loaded `libtvm_ffi.so` and its path (set by [`load!`](@ref))."""
const LIBHANDLE = Ref{Ptr{Cvoid}}(C_NULL)
const LIBPATH = Ref{String}("")

# Every C symbol the bindings use; each gets a `const PTR_<name> = Ref{Ptr{Cvoid}}`.
# (Keep in sync with the wrappers below: a missing PTR_ is a load-time error.)
const SYMBOLS = (
    :TVMFFIGetVersion,
    :TVMFFIObjectIncRef,
    :TVMFFIObjectDecRef,
    :TVMFFIAnyViewToOwnedAny,
    :TVMFFIStringFromByteArray,
    :TVMFFIBytesFromByteArray,
    :TVMFFIBigIntFromByteArray,
    :TVMFFIBigIntGetContentByteArray,
    :TVMFFIErrorMoveFromRaised,
    :TVMFFIErrorSetRaised,
    :TVMFFIErrorSetRaisedFromCStr,
    :TVMFFIErrorCreate,
    :TVMFFIBacktrace,
    :TVMFFIFunctionCreate,
    :TVMFFIFunctionCall,
    :TVMFFIFunctionGetGlobal,
    :TVMFFIFunctionSetGlobal,
    :TVMFFITensorFromDLPack,
    :TVMFFITensorFromDLPackVersioned,
    :TVMFFITensorToDLPack,
    :TVMFFITensorToDLPackVersioned,
    :TVMFFITensorCreateUnsafeView,
    :TVMFFIDataTypeFromString,
    :TVMFFIDataTypeToString,
    :TVMFFITypeKeyToIndex,
    :TVMFFIGetTypeInfo,
)

for s in SYMBOLS
    @eval const $(Symbol(:PTR_, s)) = Ref{Ptr{Cvoid}}(C_NULL)
end

"""
    load!(path) -> path

`dlopen` the library at `path` and resolve every symbol in `SYMBOLS`. Called from
`AnyFFI.__init__`; a second call with another path reloads the pointers.
"""
function load!(path::AbstractString)
    h = Libdl.dlopen(path, Libdl.RTLD_LAZY | Libdl.RTLD_GLOBAL)
    for s in SYMBOLS
        p = Libdl.dlsym(h, s)  # throws with the symbol name when missing
        getfield(@__MODULE__, Symbol(:PTR_, s))[] = p
    end
    LIBHANDLE[] = h
    LIBPATH[] = String(path)
    return path
end

"""Optional symbol lookup (for C functions a library may lack); `C_NULL` when missing."""
function dlsym_optional(s::Symbol)
    # dlsym_e (C_NULL when missing) is what Julia 1.5 has; newer Julia also has throw_error=false
    p = isdefined(Libdl, :dlsym_e) ? Libdl.dlsym_e(LIBHANDLE[], s) :
        Libdl.dlsym(LIBHANDLE[], s; throw_error = false)
    return p === nothing ? C_NULL : p
end

# ---------------------------------------------------------------------------------------------
# Section: Version API
# ---------------------------------------------------------------------------------------------

function TVMFFIGetVersion()
    out = Ref{TVMFFIVersion}()
    ccall(PTR_TVMFFIGetVersion[], Cvoid, (Ptr{TVMFFIVersion},), out)
    return out[]
end

# ---------------------------------------------------------------------------------------------
# Section: Basic object API
# ---------------------------------------------------------------------------------------------

@inline TVMFFIObjectIncRef(obj::Ptr{Cvoid}) = ccall(PTR_TVMFFIObjectIncRef[], Cint, (Ptr{Cvoid},), obj)
@inline TVMFFIObjectDecRef(obj::Ptr{Cvoid}) = ccall(PTR_TVMFFIObjectDecRef[], Cint, (Ptr{Cvoid},), obj)

"""Type index stored in an object header."""
@inline object_type_index(obj::Ptr{Cvoid}) = unsafe_load(Ptr{Int32}(obj + 8))
"""Strong reference count of an object (low 32 bits of `combined_ref_count`)."""
@inline object_strong_count(obj::Ptr{Cvoid}) = Int(unsafe_load(Ptr{UInt64}(obj)) & 0xffffffff)

# ---------------------------------------------------------------------------------------------
# Section: Any, strings, bytes, big integers
# ---------------------------------------------------------------------------------------------

TVMFFIAnyViewToOwnedAny(view::Ref{TVMFFIAny}, out::Ref{TVMFFIAny}) =
    ccall(PTR_TVMFFIAnyViewToOwnedAny[], Cint, (Ptr{TVMFFIAny}, Ptr{TVMFFIAny}), view, out)
TVMFFIStringFromByteArray(input::Ref{TVMFFIByteArray}, out::Ref{TVMFFIAny}) =
    ccall(PTR_TVMFFIStringFromByteArray[], Cint, (Ptr{TVMFFIByteArray}, Ptr{TVMFFIAny}), input, out)
TVMFFIBytesFromByteArray(input::Ref{TVMFFIByteArray}, out::Ref{TVMFFIAny}) =
    ccall(PTR_TVMFFIBytesFromByteArray[], Cint, (Ptr{TVMFFIByteArray}, Ptr{TVMFFIAny}), input, out)
TVMFFIBigIntFromByteArray(input::Ref{TVMFFIByteArray}, out::Ref{TVMFFIAny}) =
    ccall(PTR_TVMFFIBigIntFromByteArray[], Cint, (Ptr{TVMFFIByteArray}, Ptr{TVMFFIAny}), input, out)
TVMFFIBigIntGetContentByteArray(value::Ref{TVMFFIAny}) =
    ccall(PTR_TVMFFIBigIntGetContentByteArray[], TVMFFIByteArray, (Ptr{TVMFFIAny},), value)

# ---------------------------------------------------------------------------------------------
# Section: Error API
# ---------------------------------------------------------------------------------------------

function TVMFFIErrorMoveFromRaised()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    ccall(PTR_TVMFFIErrorMoveFromRaised[], Cvoid, (Ptr{Ptr{Cvoid}},), out)
    return out[]
end
TVMFFIErrorSetRaised(err::Ptr{Cvoid}) = ccall(PTR_TVMFFIErrorSetRaised[], Cvoid, (Ptr{Cvoid},), err)
TVMFFIErrorSetRaisedFromCStr(kind::AbstractString, msg::AbstractString) =
    ccall(PTR_TVMFFIErrorSetRaisedFromCStr[], Cvoid, (Cstring, Cstring), kind, msg)
TVMFFIErrorCreate(kind::Ref{TVMFFIByteArray}, msg::Ref{TVMFFIByteArray}, bt::Ref{TVMFFIByteArray},
                  out::Ref{Ptr{Cvoid}}) =
    ccall(PTR_TVMFFIErrorCreate[], Cint,
          (Ptr{TVMFFIByteArray}, Ptr{TVMFFIByteArray}, Ptr{TVMFFIByteArray}, Ptr{Ptr{Cvoid}}),
          kind, msg, bt, out)
TVMFFIBacktrace(file::Ptr{UInt8}, line::Integer, func::Ptr{UInt8}, cross_ffi_boundary::Integer) =
    ccall(PTR_TVMFFIBacktrace[], Ptr{TVMFFIByteArray}, (Ptr{UInt8}, Cint, Ptr{UInt8}, Cint),
          file, line, func, cross_ffi_boundary)

# ---------------------------------------------------------------------------------------------
# Section: Function API
# ---------------------------------------------------------------------------------------------

TVMFFIFunctionCreate(self::Ptr{Cvoid}, safe_call::Ptr{Cvoid}, deleter::Ptr{Cvoid}, out::Ref{Ptr{Cvoid}}) =
    ccall(PTR_TVMFFIFunctionCreate[], Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          self, safe_call, deleter, out)
@inline TVMFFIFunctionCall(func::Ptr{Cvoid}, args::Ptr{Cvoid}, n::Integer, result::Ptr{Cvoid}) =
    ccall(PTR_TVMFFIFunctionCall[], Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Int32, Ptr{Cvoid}),
          func, args, n, result)
TVMFFIFunctionGetGlobal(name::Ref{TVMFFIByteArray}, out::Ref{Ptr{Cvoid}}) =
    ccall(PTR_TVMFFIFunctionGetGlobal[], Cint, (Ptr{TVMFFIByteArray}, Ptr{Ptr{Cvoid}}), name, out)
TVMFFIFunctionSetGlobal(name::Ref{TVMFFIByteArray}, f::Ptr{Cvoid}, allow_override::Integer) =
    ccall(PTR_TVMFFIFunctionSetGlobal[], Cint, (Ptr{TVMFFIByteArray}, Ptr{Cvoid}, Cint),
          name, f, allow_override)

# ---------------------------------------------------------------------------------------------
# Section: Tensor / DLPack API
# ---------------------------------------------------------------------------------------------

TVMFFITensorFromDLPack(mt::Ptr{DLManagedTensor}, require_alignment::Integer,
                       require_contiguous::Integer, out::Ref{Ptr{Cvoid}}) =
    ccall(PTR_TVMFFITensorFromDLPack[], Cint, (Ptr{DLManagedTensor}, Int32, Int32, Ptr{Ptr{Cvoid}}),
          mt, require_alignment, require_contiguous, out)
TVMFFITensorFromDLPackVersioned(mt::Ptr{DLManagedTensorVersioned}, require_alignment::Integer,
                                require_contiguous::Integer, out::Ref{Ptr{Cvoid}}) =
    ccall(PTR_TVMFFITensorFromDLPackVersioned[], Cint,
          (Ptr{DLManagedTensorVersioned}, Int32, Int32, Ptr{Ptr{Cvoid}}),
          mt, require_alignment, require_contiguous, out)
TVMFFITensorToDLPack(tensor::Ptr{Cvoid}, out::Ref{Ptr{DLManagedTensor}}) =
    ccall(PTR_TVMFFITensorToDLPack[], Cint, (Ptr{Cvoid}, Ptr{Ptr{DLManagedTensor}}), tensor, out)
TVMFFITensorToDLPackVersioned(tensor::Ptr{Cvoid}, out::Ref{Ptr{DLManagedTensorVersioned}}) =
    ccall(PTR_TVMFFITensorToDLPackVersioned[], Cint, (Ptr{Cvoid}, Ptr{Ptr{DLManagedTensorVersioned}}),
          tensor, out)
TVMFFITensorCreateUnsafeView(source::Ptr{Cvoid}, prototype::Ptr{DLTensor}, out::Ref{Ptr{Cvoid}}) =
    ccall(PTR_TVMFFITensorCreateUnsafeView[], Cint, (Ptr{Cvoid}, Ptr{DLTensor}, Ptr{Ptr{Cvoid}}),
          source, prototype, out)

# ---------------------------------------------------------------------------------------------
# Section: DataType API
# ---------------------------------------------------------------------------------------------

TVMFFIDataTypeFromString(input::Ref{TVMFFIByteArray}, out::Ref{DLDataType}) =
    ccall(PTR_TVMFFIDataTypeFromString[], Cint, (Ptr{TVMFFIByteArray}, Ptr{DLDataType}), input, out)
TVMFFIDataTypeToString(dtype::Ref{DLDataType}, out::Ref{TVMFFIAny}) =
    ccall(PTR_TVMFFIDataTypeToString[], Cint, (Ptr{DLDataType}, Ptr{TVMFFIAny}), dtype, out)

# ---------------------------------------------------------------------------------------------
# Section: Type API
# ---------------------------------------------------------------------------------------------

TVMFFITypeKeyToIndex(key::Ref{TVMFFIByteArray}, out::Ref{Int32}) =
    ccall(PTR_TVMFFITypeKeyToIndex[], Cint, (Ptr{TVMFFIByteArray}, Ptr{Int32}), key, out)
TVMFFIGetTypeInfo(type_index::Integer) =
    ccall(PTR_TVMFFIGetTypeInfo[], Ptr{TVMFFITypeInfo}, (Int32,), type_index)

# Export the C names (the header's vocabulary) to `using .LibAnyFFI`; `AnyFFI` does not re-export
# them except DLDataType and DLDevice.
for n in names(@__MODULE__; all = true)
    local s = string(n)
    if any(p -> startswith(s, p), ("kTVMFFI", "kDL", "TVMFFI", "DL"))
        @eval export $n
    end
end

end # module LibAnyFFI
