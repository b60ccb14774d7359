# DLDataType, DLDevice, BFloat16 and the mapping between Julia element types and DLPack dtypes.
# (c_api.h: DLDataType/DLDevice; the string grammar is the library's, spec §7.4.)

"""
    BFloat16

A raw 16-bit primitive type for bfloat16 data (DLPack code `kDLBfloat`, 16 bits): the bits,
the conversions to and from `Float32`/`Float64`/`Float16` (round to nearest even), and
comparisons between BFloat16 values, `isequal`/`hash`, `isnan`/`isinf`/`isfinite`,
`typemin`/`typemax` (±Inf), as for the Float32 value. BFloat16 is not a `Number`: compare
with other numbers, and compute, through `Float32(x)`. Arrays of another
package's 16-bit bfloat type (BFloat16s.jl) pass without a copy as
`reinterpret(AnyFFI.BFloat16, A)`.
"""
primitive type BFloat16 16 end

BFloat16(x::Float32) = _bf16_from_f32(x)
# Float64 -> Float32 -> bfloat16 would round twice (1 + 2^-8 + 2^-30 -> 1.0, not 1 + 2^-7).
# Round to Float32 towards zero and keep the lost bits as a sticky low bit ("round to odd"):
# Float32 has 16 more significand bits than bfloat16, so the final rounding is then exact.
function BFloat16(x::Float64)
    f = Float32(x, RoundToZero)
    if !isnan(x) && Float64(f) != x
        f = reinterpret(Float32, reinterpret(UInt32, f) | 0x00000001)
    end
    return _bf16_from_f32(f)
end
BFloat16(x::Union{Float16,Bool,Int8,Int16,UInt8,UInt16}) = BFloat16(Float32(x))  # exact in Float32
BFloat16(x::Real) = BFloat16(Float64(x))
function _bf16_from_f32(x::Float32)
    u = reinterpret(UInt32, x)
    isnan(x) && return reinterpret(BFloat16, UInt16((u >> 16) | 0x0040))  # keep NaN quiet
    u += 0x00007fff + ((u >> 16) & 0x1)                                     # nearest even
    return reinterpret(BFloat16, UInt16(u >> 16))
end
Base.Float32(x::BFloat16) = reinterpret(Float32, UInt32(reinterpret(UInt16, x)) << 16)
Base.Float64(x::BFloat16) = Float64(Float32(x))
Base.convert(::Type{BFloat16}, x::Real) = BFloat16(x)
Base.convert(::Type{T}, x::BFloat16) where {T<:AbstractFloat} = T(Float32(x))
Base.zero(::Type{BFloat16}) = reinterpret(BFloat16, 0x0000)
Base.one(::Type{BFloat16}) = reinterpret(BFloat16, 0x3f80)
Base.isnan(x::BFloat16) = isnan(Float32(x))
# BFloat16 is not a Number, so the Number fallbacks are missing: without these,
# transpose(A)/A' of a BFloat16 matrix has eltype Union{} and cannot be read or passed to FFI.
Base.transpose(x::BFloat16) = x
Base.adjoint(x::BFloat16) = x
Base.:(==)(a::BFloat16, b::BFloat16) = Float32(a) == Float32(b)
# comparisons, hashing and classification as for the Float32 value (so `maximum`, `argmax`,
# `sort`, `isapprox`-free checks, and BFloat16 keys in a Dict or Set behave as floats do)
Base.isequal(a::BFloat16, b::BFloat16) = isequal(Float32(a), Float32(b))
Base.hash(x::BFloat16, h::UInt) = hash(Float32(x), h)
Base.isless(a::BFloat16, b::BFloat16) = isless(Float32(a), Float32(b))
Base.:(<)(a::BFloat16, b::BFloat16) = Float32(a) < Float32(b)
Base.:(<=)(a::BFloat16, b::BFloat16) = Float32(a) <= Float32(b)
Base.isinf(x::BFloat16) = isinf(Float32(x))
Base.isfinite(x::BFloat16) = isfinite(Float32(x))
Base.Float16(x::BFloat16) = Float16(Float32(x))
Base.typemin(::Type{BFloat16}) = reinterpret(BFloat16, 0xff80)  # -Inf
Base.typemax(::Type{BFloat16}) = reinterpret(BFloat16, 0x7f80)  # Inf
Base.show(io::IO, x::BFloat16) = print(io, "BFloat16(", Float32(x), ")")

# --- DLDataType ------------------------------------------------------------------------------

"""
    DLDataType(code, bits, lanes)
    DLDataType(T::Type)        # e.g. DLDataType(Float32) == DLDataType(kDLFloat, 32, 1)
    DLDataType(s::AbstractString)  # the library's parser: "float32", "bfloat16", "int8x4", ...

A DLPack element type (4 bytes: code, bits, lanes). `string(dt)` prints it with the library's
grammar (`"float32"`, `"bool"`, `"float4_e2m1fnx2"`).
"""
DLDataType(code::Integer, bits::Integer, lanes::Integer = 1) =
    DLDataType(UInt8(code), UInt8(bits), UInt16(lanes))

# Julia element types that have a DLPack dtype (these arrays pass as tensors without copying).
const DLEltype = Union{Bool,Int8,Int16,Int32,Int64,UInt8,UInt16,UInt32,UInt64,
                       Float16,Float32,Float64,ComplexF32,ComplexF64,BFloat16}

DLDataType(::Type{Bool}) = DLDataType(kDLBool, 8, 1)
DLDataType(::Type{Int8}) = DLDataType(kDLInt, 8, 1)
DLDataType(::Type{Int16}) = DLDataType(kDLInt, 16, 1)
DLDataType(::Type{Int32}) = DLDataType(kDLInt, 32, 1)
DLDataType(::Type{Int64}) = DLDataType(kDLInt, 64, 1)
DLDataType(::Type{UInt8}) = DLDataType(kDLUInt, 8, 1)
DLDataType(::Type{UInt16}) = DLDataType(kDLUInt, 16, 1)
DLDataType(::Type{UInt32}) = DLDataType(kDLUInt, 32, 1)
DLDataType(::Type{UInt64}) = DLDataType(kDLUInt, 64, 1)
DLDataType(::Type{Float16}) = DLDataType(kDLFloat, 16, 1)
DLDataType(::Type{Float32}) = DLDataType(kDLFloat, 32, 1)
DLDataType(::Type{Float64}) = DLDataType(kDLFloat, 64, 1)
DLDataType(::Type{ComplexF32}) = DLDataType(kDLComplex, 64, 1)
DLDataType(::Type{ComplexF64}) = DLDataType(kDLComplex, 128, 1)
DLDataType(::Type{BFloat16}) = DLDataType(kDLBfloat, 16, 1)
DLDataType(::Type{T}) where {T} =
    throw(ArgumentError("DLDataType: Julia type $T has no DLPack data type"))

"""
    julia_type(dt::DLDataType) -> Type

The Julia element type of a dtype (`Float32` for `float32`, `BFloat16` for `bfloat16`, ...).
Throws `ArgumentError` for dtypes with no Julia type (float8/6/4, vectors of lanes > 1).
"""
function julia_type(dt::DLDataType)
    c, b = dt.code, dt.bits
    if dt.lanes == 1
        c == kDLBool && b == 8 && return Bool
        if c == kDLInt
            b == 8 && return Int8; b == 16 && return Int16
            b == 32 && return Int32; b == 64 && return Int64
        elseif c == kDLUInt
            b == 8 && return UInt8; b == 16 && return UInt16
            b == 32 && return UInt32; b == 64 && return UInt64
        elseif c == kDLFloat
            b == 16 && return Float16; b == 32 && return Float32; b == 64 && return Float64
        elseif c == kDLBfloat && b == 16
            return BFloat16
        elseif c == kDLComplex
            b == 64 && return ComplexF32; b == 128 && return ComplexF64
        end
    end
    throw(ArgumentError("julia_type: dtype $(string(dt)) has no Julia element type"))
end

function DLDataType(s::AbstractString)
    str = String(s)
    out = Ref{DLDataType}()
    rc = GC.@preserve str begin
        ba = Ref(TVMFFIByteArray(pointer(str), sizeof(str)))
        TVMFFIDataTypeFromString(ba, out)
    end
    check_call(rc)
    return out[]
end

function Base.print(io::IO, dt::DLDataType)
    out = Ref(ANY_NONE)
    if TVMFFIDataTypeToString(Ref(dt), out) != 0
        # a code the library has no name for: still printable (the error is dropped)
        err = TVMFFIErrorMoveFromRaised()
        err != C_NULL && TVMFFIObjectDecRef(err)
        print(io, "code", dt.code, "_", dt.bits, dt.lanes == 1 ? "" : string("x", dt.lanes))
        return
    end
    print(io, _from_any_owned(out[])::String)
end
Base.show(io::IO, dt::DLDataType) = print(io, "DLDataType(\"", dt, "\")")

# --- DLDevice --------------------------------------------------------------------------------

const DEVICE_NAMES = Dict{Int32,String}(
    kDLCPU => "cpu", kDLCUDA => "cuda", kDLCUDAHost => "cuda_host", kDLOpenCL => "opencl",
    kDLVulkan => "vulkan", kDLMetal => "metal", kDLVPI => "vpi", kDLROCM => "rocm",
    kDLROCMHost => "rocm_host", kDLExtDev => "ext_dev", kDLCUDAManaged => "cuda_managed",
    kDLOneAPI => "oneapi", kDLWebGPU => "webgpu", kDLHexagon => "hexagon", kDLMAIA => "maia",
    kDLTrn => "trn")

"""
    DLDevice(device_type::Integer, device_id::Integer = 0)
    DLDevice(name::Union{Symbol,AbstractString}, device_id = 0)   # DLDevice(:cuda, 1)

A DLPack device. `cpu()` and `cuda(id)` are shorthands; `string(d)` gives `"cpu:0"`.
"""
DLDevice(device_type::Integer, device_id::Integer = 0) =
    DLDevice(Int32(device_type), Int32(device_id))
function DLDevice(name::Union{Symbol,AbstractString}, device_id::Integer = 0)
    n = lowercase(String(name))
    if occursin(':', n)  # "cuda:1", as `string(d)` prints it
        n, id = split(n, ':'; limit = 2)
        device_id = parse(Int32, id)
    end
    for (k, v) in DEVICE_NAMES
        v == n && return DLDevice(k, Int32(device_id))
    end
    n == "gpu" && return DLDevice(kDLCUDA, Int32(device_id))
    throw(ArgumentError("DLDevice: unknown device type name \"$n\""))
end

"""`cpu(id = 0)`: `DLDevice(kDLCPU, id)`."""
cpu(id::Integer = 0) = DLDevice(kDLCPU, Int32(id))
"""`cuda(id = 0)`: `DLDevice(kDLCUDA, id)`."""
cuda(id::Integer = 0) = DLDevice(kDLCUDA, Int32(id))

Base.print(io::IO, d::DLDevice) =
    print(io, get(DEVICE_NAMES, d.device_type, string("device", d.device_type)), ":", d.device_id)
Base.show(io::IO, d::DLDevice) = print(io, "DLDevice(\"", d, "\")")
