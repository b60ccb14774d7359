# Julia values <-> TVMFFIAny, and the TVMAny (owned) / TVMAnyView (borrowed) wrappers
# (c_api.h: Any; spec §3.1 type indices, §4 encoding rules, §5.6 argument marshalling).
#
# Ownership table:
#   function arguments   borrowed views built by `_arg`: (TVMFFIAny, keep). `keep` is what
#                        must stay alive during the call (the String behind a RawStr, the
#                        TensorView behind a DLTensor*, the wrapper behind an object), or a
#                        `_Temp` object made for this call and released right after it. Once
#                        every argument is converted, the call pins each object wrapper among
#                        the keeps (`_hold_args`: its reference stays until the call's keeps are
#                        released, even if another thread releases or finalizes the wrapper).
#   call results         owned: `_from_any_owned` adopts objects (borrowed = false) and
#                        releases what it copies out (strings, bytes, big integers).
#   callback arguments,  borrowed: `_from_any_borrowed` IncRefs objects it wraps
#   container elements   (borrowed = true) and copies strings.
#   callback results     owned: `_to_owned_any` (the library releases them).
#
# Julia -> FFI:
#   nothing -> None; Bool -> Bool; Integer -> Int (BigInt object beyond Int64);
#   AbstractFloat -> Float; Ptr -> OpaquePtr; DLDataType and element types (Float32, ...) ->
#   DataType; DLDevice -> Device;
#   String/Symbol/Char -> SmallStr (<= 7 bytes) or a borrowed RawStr (a Str if it holds NUL);
#   codeunits(s) (String or SubString) -> SmallBytes / borrowed ByteArrayPtr; other views of a
#   String's memory -> ArgumentError (a tensor may be written);
#   strided array with a DLPack eltype -> DLTensor* (TensorView, no copy);
#   other arrays, tuples -> ffi.Array; AbstractDict -> ffi.Map; Function -> ffi.Function;
#   TVMError and other exceptions -> ffi.Error (`error_kind`, `error_message`);
#   objects -> their handle; TVMAny/TVMAnyView -> their value.
# FFI -> Julia:
#   None -> nothing; Int -> Int64; Bool -> Bool; Float -> Float64; OpaquePtr -> Ptr{Cvoid};
#   DataType -> DLDataType; Device -> DLDevice; DLTensor* -> TensorView; strings -> String;
#   bytes -> Vector{UInt8}; BigInt -> BigInt; Error -> TVMError (returned, not thrown);
#   Function -> TVMFunction; Tensor -> TVMTensor; Shape/Array/List/Map/Dict/Module -> TVMShape/
#   TVMArray/TVMList/TVMMap/TVMDict/TVMModule; other objects -> TVMObject;
#   other POD indices (e.g. 13, Unchanged) -> TVMAnyView.

# --- TVMAny / TVMAnyView types (methods at the end) -------------------------------------------

"""
    TVMAnyView(raw::TVMFFIAny)

A borrowed FFI value: the 16 bytes, owning nothing and never finalised. Valid only while its
owner keeps the value (e.g. a callback argument, until the callback returns). `copy_value(v)`
converts it to a Julia value (taking a new reference for objects).
"""
struct TVMAnyView
    raw::TVMFFIAny
end

"""
    TVMAny(x)                               # an owned FFI value from a Julia value
    TVMAny(raw::TVMFFIAny; borrowed::Bool)  # adopt (false) or copy (true) a raw value

An owned FFI value. Its finalizer releases the object it may hold. `take_value(a)` moves the
value out as a Julia value (leaving `a` None); `copy_value(a)` converts and leaves `a` as is.
`call_any(f, args...)` returns results in this form, unconverted.
"""
mutable struct TVMAny
    raw::TVMFFIAny
    function TVMAny(raw::TVMFFIAny; borrowed::Bool)
        if borrowed
            out = Ref(ANY_NONE)
            check_call(TVMFFIAnyViewToOwnedAny(Ref(raw), out))
            raw = out[]
        end
        a = new(raw)
        raw.type_index >= kTVMFFIStaticObjectBegin && finalizer(_release_any!, a)
        return a
    end
end

# deepcopy: an owned copy of the value (a new reference to an object it holds; the default
# copied the raw value without one, and without a finalizer)
function Base.deepcopy_internal(a::TVMAny, d::IdDict)
    haskey(d, a) && return d[a]::TVMAny
    y = TVMAny(a.raw; borrowed = true)
    d[a] = y
    return y
end

# An object argument: the call's pin (taken by `_hold_args`) goes.
@inline _release_keep(x::Union{AbstractTVMObject,TVMError}) = _unpin!(x)

# What a call checks and holds once every argument converted (conversions run user code: a
# `strides`, `pointer` or `iterate` method), right before it calls, by argument and keep:
#   an object          pinned: its reference stays until the call's keeps are released, even
#                      if another thread releases or finalizes the wrapper;
#   an array's view    its array still has the view's pointer and size (a view kept from an
#                      earlier call, or user code while later arguments converted, may have
#                      seen it resized: its memory moved or shrank).
# A failure undoes the pins taken and raises without calling; a conversion that throws leaves
# no pin behind (the temporaries go to their finalizers, as before).
@inline _hold(::Any, ::Any) = true
@inline _hold(::Any, x::Union{AbstractTVMObject,TVMError}) = _pin!(x)
@inline _hold(A::AbstractArray, tv::TensorView) = _view_matches(A, tv)
@inline _hold(tv::TensorView, ::TensorView) = _view_current(tv)
@inline _unhold(::Any) = nothing
@inline _unhold(x::Union{AbstractTVMObject,TVMError}) = _unpin!(x)
_hold_error(::Any, x::Union{AbstractTVMObject,TVMError}) = _released_error(x)
_hold_error(A, tv::TensorView) = _moved_error(A isa TensorView ? A.parent : A)

@inline _view_matches(A::AbstractArray, tv::TensorView{N}) where {N} =
    UInt(pointer(A)) == UInt(tv.data) && size(A) == tv.shape_buf
# A view passed as itself: its array, if it has one, must still match. The array's type is not
# known here: one dynamic call on it (~20 ns; `isa AbstractArray` on the field and a two-argument
# dispatch made it ~50 ns).
@inline function _view_current(tv::TensorView)
    _owns_memory(tv) || return true  # a borrowed view: its owner answers for the memory
    ptr, len = _memory_extent(tv.parent)::Tuple{UInt,Int}
    return ptr == UInt(tv.data) && len == prod(tv.shape_buf)
end
_memory_extent(A::AbstractArray) = (UInt(pointer(A)), length(A))
@noinline _moved_error(A) = ArgumentError(
    "AnyFFI: a tensor argument's $(typeof(A)) was resized after its TensorView was made (the " *
    "view still has the old memory and size); pass the array itself, or a new TensorView(A)")

@inline function _hold_args(args::Tuple, keeps::Tuple)
    ok = _hold_each(args, keeps)  # (by dispatch: folds to `true` for plain values)
    all(ok) || _holds_failed(args, keeps, ok)
    return nothing
end
# (`map` over the keeps was not inlined: a call each way, 5.5 -> 19.6 ns for one object)
@inline _hold_each(::Tuple{}, ::Tuple{}) = ()
@inline _hold_each(a::Tuple, k::Tuple) =
    (_hold(first(a), first(k)), _hold_each(Base.tail(a), Base.tail(k))...)
@noinline function _holds_failed(args::Tuple, keeps::Tuple, ok::Tuple)
    bad = 0
    for i in 1:length(ok)
        ok[i] ? _unhold(keeps[i]) : (bad == 0 && (bad = i))
    end
    throw(_hold_error(args[bad], keeps[bad]))
end
function _hold_args(args::Tuple, keeps::Vector{Any})
    for i in eachindex(keeps)
        if !_hold(args[i], keeps[i])
            for j in 1:i-1
                _unhold(keeps[j])
            end
            throw(_hold_error(args[i], keeps[i]))
        end
    end
    return nothing
end

# A temporary object created for one call; released right after it (or by its finalizer if a
# later argument fails to convert).
struct _Temp{T}
    obj::T
end
@inline _release_keep(::Any) = nothing
@inline _release_keep(tv::TensorView) = _unregister_view(tv)
@inline _release_keep(t::_Temp) = release!(t.obj)

@inline _pod(ti::Int32, bits::UInt64) = TVMFFIAny(ti, UInt32(0), bits)

@inline _arg(::Nothing) = (ANY_NONE, nothing)
@inline _arg(x::Bool) = (_pod(kTVMFFIBool, UInt64(x)), nothing)
@inline _arg(x::Union{Int8,Int16,Int32,Int64,UInt8,UInt16,UInt32}) =
    (_pod(kTVMFFIInt, reinterpret(UInt64, Int64(x))), nothing)
# Integers beyond Int64 become ffi.BigInt objects made for the call. One keep type for both
# cases: every `_arg` method must be type-stable (a Union-typed keep inside GC.@preserve trips
# an assertion in Julia 1.5's codegen).
struct _IntKeep
    temp::Union{Nothing,TVMObject}
end
_release_keep(k::_IntKeep) = (k.temp === nothing || release!(k.temp); nothing)
function _arg(x::Integer)
    if typemin(Int64) <= x <= typemax(Int64)
        return (_pod(kTVMFFIInt, reinterpret(UInt64, Int64(x))), _IntKeep(nothing))
    end
    t = _bigint_object(BigInt(x))
    t.type_index >= kTVMFFIStaticObjectBegin || return (t, _IntKeep(nothing))
    return (t, _IntKeep(TVMObject(any_ptr(t); borrowed = false)))
end
@inline _arg(x::Union{Float16,Float32,Float64}) = (_pod(kTVMFFIFloat, reinterpret(UInt64, Float64(x))), nothing)
@inline _arg(x::BFloat16) = _arg(Float32(x))
_arg(x::AbstractFloat) = _arg(Float64(x))
_arg(x::Union{AbstractIrrational,Rational}) = _arg(Float64(x))  # pi, 1//3
@inline _arg(x::Ptr) = (_pod(kTVMFFIOpaquePtr, UInt64(UInt(x))), nothing)
@inline _arg(x::DLDataType) = (_pod(kTVMFFIDataType, dtype_bits(x)), nothing)
# an element type names its dtype: runtime.empty(shape, Float32, cpu())
@inline _arg(::Type{T}) where {T<:DLEltype} = _arg(DLDataType(T))
@inline _arg(x::DLDevice) = (_pod(kTVMFFIDevice, device_bits(x)), nothing)

# Small strings and bytes live inline: length in small_str_len, content in the payload, the
# remaining bytes zero (spec §4.2).
@inline function _small(ti::Int32, p::Ptr{UInt8}, n::Int)
    v = UInt64(0)
    for i in 1:n
        v |= UInt64(unsafe_load(p, i)) << (8 * (i - 1))
    end
    return TVMFFIAny(ti, UInt32(n), v)
end

# A string argument keeps its String alive, plus the ffi.String made for it when it holds NUL
# bytes (one keep type for every case, so calls with strings stay type-stable).
struct _StrKeep
    s::String
    temp::Union{Nothing,TVMObject}
end
_release_keep(k::_StrKeep) = (k.temp === nothing || release!(k.temp); nothing)

function _arg(s::String)
    n = sizeof(s)
    n <= 7 && return (GC.@preserve(s, _small(kTVMFFISmallStr, pointer(s), n)), _StrKeep(s, nothing))
    if !Base.containsnul(s)  # Julia Strings are NUL-terminated: lend it as a C string
        return (_pod(kTVMFFIRawStr, UInt64(UInt(pointer(s)))), _StrKeep(s, nothing))
    end
    a = _string_any(s)
    return (a, _StrKeep(s, TVMObject(any_ptr(a); borrowed = false)))
end
_arg(s::AbstractString) = _arg(String(s))
_arg(s::Symbol) = _arg(String(s))
_arg(c::AbstractChar) = _arg(string(c))

# Bytes: `codeunits(s)` (a Vector{UInt8} is a tensor).
mutable struct _ByteArrayBox  # a TVMFFIByteArray at offset 0, and what it points into
    data::Ptr{UInt8}
    size::Csize_t
    parent::Any
end
# (of a SubString too: its bytes in the parent String; a DenseVector, it passed as a tensor)
function _arg(b::_StrCodeUnits)
    s = b.s
    n = ncodeunits(s)
    box = _ByteArrayBox(pointer(s), n, s)  # also for small bytes: one keep type (see _IntKeep)
    n <= 7 && return (GC.@preserve(s, _small(kTVMFFISmallBytes, pointer(s), n)), box)
    return (_pod(kTVMFFIByteArrayPtr, UInt64(UInt(pointer_from_objref(box)))), box)
end

# (the keep is the wrapper: `_hold_args` holds it for the call)
@inline function _arg(x::AbstractTVMObject)
    h = x.handle
    h == C_NULL && throw(_released_error(x))
    return (_pod(LibAnyFFI.object_type_index(h), UInt64(UInt(h))), x)
end
_arg(e::TVMError) = (_pod(kTVMFFIError, UInt64(UInt(_error_handle!(e)))), e)
# Any other exception passed as a value is an ffi.Error with the kind and message it would have
# if thrown from a callback (as tvm_ffi passes Python exceptions), made for the call.
function _arg(e::Exception)
    kind, msg = error_kind(e), error_message(e)
    h = _new_error_handle(kind, msg, "")
    h == C_NULL && throw(TVMError("InternalError", "TVMFFIErrorCreate failed"))
    return _temp_object(TVMObject(h; borrowed = false))
end
@inline _arg(tv::TensorView) = (_check_open(tv); (_pod(kTVMFFIDLTensorPtr, UInt64(UInt(pointer_from_objref(tv)))), tv))
@inline function _arg(A::DLStridedArray)
    _string_memory(A) && throw(_string_memory_error("AnyFFI (an FFI function argument)", A))
    return _arg(TensorView(A))
end
function _arg(A::AbstractArray)
    _string_memory(A) && throw(_string_memory_error("AnyFFI (an FFI function argument)", A))
    _strided_memory(A) && return _arg(_tensorview_of(A))
    # element by element as an ffi.Array: vectors only (an N-d array would lose its shape)
    ndims(A) <= 1 || throw(ArgumentError(
        "AnyFFI: cannot pass a $(ndims(A))-d $(typeof(A)) to an FFI function: it is neither a " *
        "strided array of a DLPack element type (a tensor) nor a vector (an ffi.Array); " *
        "pass collect(A) for a copy"))
    return _temp_object(TVMArray(A))
end
_arg(t::Tuple) = _temp_object(TVMArray(t))
_arg(d::AbstractDict) = _temp_object(TVMMap(d))
_arg(f::Function) = _temp_object(TVMFunction(f))
_arg(x::TVMAny) = (x.raw, x)
_arg(x::TVMAnyView) = (x.raw, nothing)
_arg(x) = throw(ArgumentError("AnyFFI: cannot pass a value of type $(typeof(x)) to an FFI function"))

_temp_object(o::AbstractTVMObject) = ((_pod(LibAnyFFI.object_type_index(o.handle), UInt64(UInt(o.handle)))), _Temp(o))
# Owned ffi.String / ffi.Bytes from Julia bytes.
function _string_any(s::String)
    out = Ref(ANY_NONE)
    GC.@preserve s check_call(TVMFFIStringFromByteArray(Ref(TVMFFIByteArray(pointer(s), sizeof(s))), out))
    return out[]
end
function _bytes_any(s::String)
    out = Ref(ANY_NONE)
    GC.@preserve s check_call(TVMFFIBytesFromByteArray(Ref(TVMFFIByteArray(pointer(s), sizeof(s))), out))
    return out[]
end

# Owned Int or ffi.BigInt from a Julia integer: little-word-first two's complement words.
function _bigint_object(x::BigInt)
    nbits = x >= 0 ? ndigits(x, base = 2) + 1 : ndigits(-x - 1, base = 2) + 1
    nwords = max(1, cld(nbits, 64))
    y = mod(x, BigInt(1) << (64 * nwords))
    words = UInt64[UInt64((y >> (64 * (i - 1))) & typemax(UInt64)) for i in 1:nwords]
    out = Ref(ANY_NONE)
    GC.@preserve words check_call(TVMFFIBigIntFromByteArray(
        Ref(TVMFFIByteArray(Ptr{UInt8}(pointer(words)), 8 * nwords)), out))
    return out[]
end

function _bigint_value(a::TVMFFIAny)
    ba = TVMFFIBigIntGetContentByteArray(Ref(a))
    n = Int(ba.size) ÷ 8
    n == 0 && return BigInt(0)
    x = BigInt(0)
    for i in n:-1:1
        x = (x << 64) + unsafe_load(Ptr{UInt64}(ba.data), i)
    end
    if unsafe_load(Ptr{Int64}(ba.data), n) < 0
        x -= BigInt(1) << (64 * n)
    end
    return x
end

# --- FFI -> Julia ----------------------------------------------------------------------------

_from_any_owned(a::TVMFFIAny) = _from_any(a, true)
_from_any_borrowed(a::TVMFFIAny) = _from_any(a, false)

function _from_any(a::TVMFFIAny, owned::Bool)
    ti = a.type_index
    ti == kTVMFFINone && return nothing
    ti == kTVMFFIInt && return any_int64(a)
    ti == kTVMFFIBool && return any_bool(a)
    ti == kTVMFFIFloat && return any_float64(a)
    ti >= kTVMFFIStaticObjectBegin && return _object_to_julia(any_ptr(a), ti, owned)
    ti == kTVMFFISmallStr && return _small_string(a)
    ti == kTVMFFIOpaquePtr && return any_ptr(a)
    ti == kTVMFFIDataType && return any_dtype(a)
    ti == kTVMFFIDevice && return any_device(a)
    ti == kTVMFFIDLTensorPtr && return _dltensor_arg_view(any_ptr(a))
    ti == kTVMFFISmallBytes && return _small_bytes(a)
    ti == kTVMFFIRawStr && return unsafe_string(Ptr{UInt8}(any_ptr(a)))
    if ti == kTVMFFIByteArrayPtr
        ba = unsafe_load(Ptr{TVMFFIByteArray}(any_ptr(a)))
        return _copy_bytes(ba.data, ba.size)
    end
    if ti == kTVMFFIObjectRValueRef  # a view of the caller's object slot; we do not steal it
        h = unsafe_load(Ptr{Ptr{Cvoid}}(any_ptr(a)))
        h == C_NULL && return nothing
        return _object_to_julia(h, LibAnyFFI.object_type_index(h), false)
    end
    return TVMAnyView(a)
end

function _small_string(a::TVMFFIAny)
    r = Ref(a.value)
    return GC.@preserve r unsafe_string(Ptr{UInt8}(Base.unsafe_convert(Ptr{UInt64}, r)), a.small_str_len)
end
function _small_bytes(a::TVMFFIAny)
    r = Ref(a.value)
    return GC.@preserve r _copy_bytes(Ptr{UInt8}(Base.unsafe_convert(Ptr{UInt64}, r)), a.small_str_len)
end
function _copy_bytes(p::Ptr{UInt8}, n::Integer)
    v = Vector{UInt8}(undef, n)
    n > 0 && GC.@preserve v unsafe_copyto!(pointer(v), p, n)
    return v
end

# Str/Bytes: ByteArray {data, size} at +24 (always read through `data`, spec §2.4).
_byte_cell(h::Ptr{Cvoid}) = unsafe_load(Ptr{TVMFFIByteArray}(h + LibAnyFFI.OBJECT_HEADER_SIZE))

function _object_to_julia(h::Ptr{Cvoid}, ti::Int32, owned::Bool)
    borrowed = !owned
    if ti == kTVMFFIStr
        b = _byte_cell(h)
        s = unsafe_string(b.data, b.size)
        owned && TVMFFIObjectDecRef(h)
        return s
    elseif ti == kTVMFFIFunction
        return TVMFunction(h; borrowed = borrowed)
    elseif ti == kTVMFFITensor
        return TVMTensor(h; borrowed = borrowed)
    elseif ti == kTVMFFIBytes
        b = _byte_cell(h)
        v = _copy_bytes(b.data, b.size)
        owned && TVMFFIObjectDecRef(h)
        return v
    elseif ti == kTVMFFIError
        return TVMError(h; borrowed = borrowed)
    elseif ti == kTVMFFIShape
        return TVMShape(h; borrowed = borrowed)
    elseif ti == kTVMFFIArray
        return TVMArray(h; borrowed = borrowed)
    elseif ti == kTVMFFIList
        return TVMList(h; borrowed = borrowed)
    elseif ti == kTVMFFIMap
        return TVMMap(h; borrowed = borrowed)
    elseif ti == kTVMFFIDict
        return TVMDict(h; borrowed = borrowed)
    elseif ti == kTVMFFIModule
        return TVMModule(h; borrowed = borrowed)
    elseif ti == kTVMFFIBigInt
        x = _bigint_value(TVMFFIAny(ti, 0, UInt64(UInt(h))))
        owned && TVMFFIObjectDecRef(h)
        return x
    end
    return TVMObject(h; borrowed = borrowed)
end

# --- Julia -> owned Any (callback results, TVMAny(x)) ----------------------------------------

_to_owned_any(::Nothing) = ANY_NONE
# A borrowed DLTensor* would dangle once the callback returns: export the array instead.
_to_owned_any(x::DLStridedArray) = _steal(to_dlpack(x))
# A borrowed view (a callback's argument) becomes an ffi.Tensor over the same memory.
_to_owned_any(x::TensorView) = _steal(to_dlpack(x))
_to_owned_any(x) = _owned_from_view(x)
_to_owned_any(x::_StrCodeUnits) = _owned_from_view(x)  # bytes, not a tensor
function _owned_from_view(x)
    v, keep = _arg(x)
    _hold(x, keep) || throw(_hold_error(x, keep))
    ti = v.type_index
    # A strided array outside DLStridedArray (transpose, adjoint, nested PermutedDimsArray, views
    # of those) passes as a borrowed DLTensor* to a TensorView made for this conversion: it would
    # dangle as soon as we return. Export the array it views instead (an owned ffi.Tensor).
    ti == kTVMFFIDLTensorPtr && keep isa TensorView && return _steal(to_dlpack(keep))
    if ti >= kTVMFFIStaticObjectBegin || ti == kTVMFFIRawStr || ti == kTVMFFIByteArrayPtr
        out = Ref(ANY_NONE)
        rc = GC.@preserve keep TVMFFIAnyViewToOwnedAny(Ref(v), out)  # IncRef / String / Bytes
        _release_keep(keep)
        check_call(rc)
        return out[]
    end
    return v
end

# An owned Any holding a new reference to o (o keeps, and later releases, its own).
function _steal(o::AbstractTVMObject)
    h = _live_handle(o)
    TVMFFIObjectIncRef(h)
    return _pod(LibAnyFFI.object_type_index(h), UInt64(UInt(h)))
end

# --- TVMAny / TVMAnyView ---------------------------------------------------------------------

TVMAny(x) = TVMAny(_to_owned_any(x); borrowed = false)
TVMAny() = TVMAny(ANY_NONE; borrowed = false)
TVMAnyView(a::TVMAny) = TVMAnyView(a.raw)

function _release_any!(a::TVMAny)
    r = a.raw
    if r.type_index >= kTVMFFIStaticObjectBegin
        a.raw = ANY_NONE
        TVMFFIObjectDecRef(any_ptr(r))
    end
    return nothing
end

"""
    take_value(a::TVMAny)

Move the value out of `a` as a Julia value (objects keep the reference `a` held); `a` is None
afterwards.
"""
function take_value(a::TVMAny)
    r = a.raw
    a.raw = ANY_NONE
    return _from_any_owned(r)
end
take_value(::TVMAnyView) = throw(ArgumentError("take_value: a TVMAnyView owns nothing; use copy_value"))

"""
    copy_value(a::Union{TVMAny,TVMAnyView})

The value as a Julia value, leaving `a` unchanged (objects get a new reference).
"""
copy_value(a::TVMAny) = GC.@preserve a _from_any_borrowed(a.raw)
copy_value(a::TVMAnyView) = _from_any_borrowed(a.raw)

type_index(a::Union{TVMAny,TVMAnyView}) = Int(a.raw.type_index)
type_key(a::Union{TVMAny,TVMAnyView}) = type_key(a.raw.type_index)

Base.show(io::IO, a::TVMAny) = print(io, "TVMAny(", type_key(a), ")")
Base.show(io::IO, a::TVMAnyView) = print(io, "TVMAnyView(", type_key(a), ")")
