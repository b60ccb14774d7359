# Tensors: borrowed DLTensor views of Julia arrays, `ffi.Tensor` objects, DLPack in and out
# (c_api.h: Tensor / DLPack API; spec §2.4, §7).
#
# Layout choice. A Julia array passes in Julia order: shape = size(A), strides = strides(A) in
# elements, so a Matrix{Float32}(undef, m, n) is the DLPack tensor of shape (m, n) and strides
# (1, m), and A[i, j] is element (i-1, j-1) on both sides. Nothing is copied or reversed; any
# strided view (SubArray, ReshapedArray, PermutedDimsArray, ...) keeps its strides, and
# consumers that honour strides see the right elements. DLPack.jl makes the other choice: it
# reverses the dimensions so that a column-major Julia array looks like a compact row-major
# tensor of shape (n, m). Kernels that require compact row-major input (most ops) need that
# form: pass `rowmajor(A)` (a PermutedDimsArray with reversed dims, still no copy) to get it.
# Coming back, `from_dlpack` keeps the tensor's own index order too: a compact column-major
# tensor becomes an `Array`, any other layout a `PermutedDimsArray`/`SubArray` over the same
# memory with the same shape.

"""
    TensorView(A::AbstractArray)

A borrowed `DLTensor` view (passed as type index 7, `kTVMFFIDLTensorPtr`) of a strided Julia
array on the CPU: its pointer, `size(A)` and `strides(A)` (column-major for an `Array`), with
no copy. Shape and strides are stored inline, so the view is one small allocation. Julia
arrays passed to FFI functions become TensorViews automatically; the view (and the array it
keeps in `parent`) is kept alive for the duration of the call only. The view records the
array's pointer and size: passing it after the array was resized (its memory moved) raises an
`ArgumentError`.

A `DLTensor*` that a function receives as an argument or returns also becomes a TensorView
(with `parent === nothing`): its memory belongs to someone else and is valid only as long as
they say (for a callback argument: until the callback returns). `unsafe_array(view)` wraps it
as a Julia array without copying.
"""
mutable struct TensorView{N}
    # The first 48 bytes are a DLTensor (checked in test_layout.jl).
    data::Ptr{Cvoid}
    device::DLDevice
    ndim::Int32
    dtype::DLDataType
    shape::Ptr{Int64}
    strides::Ptr{Int64}
    byte_offset::UInt64
    shape_buf::NTuple{N,Int64}
    strides_buf::NTuple{N,Int64}
    parent::Any

    function TensorView{N}(data::Ptr{Cvoid}, device::DLDevice, dtype::DLDataType,
                           shape::NTuple{N,Int64}, strides::NTuple{N,Int64},
                           byte_offset::UInt64, parent) where {N}
        tv = new{N}(data, device, Int32(N), dtype, C_NULL, C_NULL, byte_offset, shape, strides, parent)
        p = pointer_from_objref(tv)  # Julia's GC does not move objects
        tv.shape = Ptr{Int64}(p + 48)
        tv.strides = Ptr{Int64}(p + 48 + 8 * N)
        return tv
    end
end

"""
    StridedView{T,N} <: AbstractArray{T,N}

A Julia array over foreign memory with arbitrary strides (in elements, negative ones
included), for tensor layouts that neither `Array` nor a `PermutedDimsArray` of one can express
(e.g. a slice whose strides are not multiples of each other, a reversed view, memory not
aligned to the element type). `owner` keeps the memory alive (a `TVMTensor`, or
`nothing` for memory someone else guarantees). It passes back to FFI functions as a
`TensorView` with the same strides, like any strided array.
"""
struct StridedView{T,N} <: AbstractArray{T,N}
    ptr::Ptr{T}
    size::NTuple{N,Int}
    strides::NTuple{N,Int}
    owner::Any
end
Base.size(a::StridedView) = a.size
Base.strides(a::StridedView) = a.strides
Base.stride(a::StridedView{T,N}, k::Integer) where {T,N} = k <= N ? a.strides[k] : a.strides[N] * a.size[N]
Base.IndexStyle(::Type{<:StridedView}) = IndexCartesian()
Base.unsafe_convert(::Type{Ptr{T}}, a::StridedView{T}) where {T} = a.ptr
Base.elsize(::Type{StridedView{T,N}}) where {T,N} = sizeof(T)
@inline function _offset(a::StridedView{T,N}, I::NTuple{N,Int}) where {T,N}
    o = 1
    for k in 1:N
        o += (I[k] - 1) * a.strides[k]
    end
    return o
end
@inline function Base.getindex(a::StridedView{T,N}, I::Vararg{Int,N}) where {T,N}
    @boundscheck checkbounds(a, I...)
    return GC.@preserve a unsafe_load(a.ptr, _offset(a, I))
end
@inline function Base.setindex!(a::StridedView{T,N}, v, I::Vararg{Int,N}) where {T,N}
    @boundscheck checkbounds(a, I...)
    GC.@preserve a unsafe_store!(a.ptr, convert(T, v), _offset(a, I))
    return a
end

# deepcopy copies the elements, as for any array (and `deepcopy(from_dlpack(t))` of a compact
# tensor): a StridedView owning a new Array. The default kept the pointer into the original
# memory (a copy that aliases it) or deep-copied the owner (a TVMTensor: an error about tensors).
function Base.deepcopy_internal(a::StridedView{T,N}, d::IdDict) where {T,N}
    haskey(d, a) && return d[a]::StridedView{T,N}
    B = Array{T,N}(undef, a.size)
    copyto!(B, a)
    y = StridedView{T,N}(pointer(B), a.size, strides(B), B)
    d[a] = y
    return y
end

# Strided CPU arrays with a DLPack element type (what passes as a TensorView).
const DLStridedArray{T<:DLEltype,N} = Union{StridedArray{T,N}, StridedView{T,N},
                                            PermutedDimsArray{T,N,<:Any,<:Any,<:StridedArray}}

@inline _i64(t::NTuple{N,Integer}) where {N} = map(Int64, t)

@inline TensorView(A::DLStridedArray) = _tensorview_of(A)
@inline function _tensorview_of(A::AbstractArray{T,N}) where {T,N}
    _string_memory(A) && throw(_string_memory_error("TensorView", A))
    return TensorView{N}(Ptr{Cvoid}(pointer(A)), DLDevice(kDLCPU, Int32(0)), DLDataType(T),
                         _i64(size(A)), _i64(strides(A)), UInt64(0), A)
end

# `codeunits` of a String or SubString: bytes, not a tensor (any.jl, `_arg`).
const _StrCodeUnits = Base.CodeUnits{UInt8,<:Union{String,SubString{String}}}

# Memory of a String (views, reshapes, reinterpretations, transposes of `codeunits(s)`, and
# `codeunits` of a SubString, a DenseVector): never a tensor. A DLTensor carries no read-only
# mark and an op may write its output there, changing a String, which Julia takes as
# immutable (it shares literals and hashes them once). Decided by type (the parent chain), so
# it folds away for the arrays that may pass.
@inline _memory_root(A::Array) = A
@inline function _memory_root(A::AbstractArray)
    p = parent(A)
    return p === A ? A : _memory_root(p)
end
@inline _string_memory(A::AbstractArray) = _memory_root(A) isa Base.CodeUnits
@noinline _string_memory_error(f, A) = ArgumentError(
    "$f: a $(typeof(A)) is the memory of a String, which Julia never changes; it cannot pass " *
    "as a tensor (a callee may write to it). Pass a copy: Vector{UInt8}(s), or collect(A) " *
    "(codeunits(s) itself passes as bytes)")
TensorView(A::AbstractArray) = _strided_memory(A) ? _tensorview_of(A) : throw(ArgumentError(
    "TensorView: need a strided CPU array with a DLPack element type, got $(typeof(A))"))

# Arrays outside the DLStridedArray union whose memory is still strided: `strides` and
# `pointer` both defined (Transpose and Adjoint of real matrices, nested PermutedDimsArrays,
# views of those). Ranges and other lazy arrays have neither.
function _strided_memory(A::AbstractArray)
    (eltype(A) <: DLEltype && !(A isa Union{AbstractRange,Base.CodeUnits})) || return false
    try
        strides(A)
        pointer(A)
        return true
    catch
        return false
    end
end

# A DLTensor someone else owns (a callback argument, a returned DLTensor*): metadata copied.
# Small ranks get concrete types (no dynamic dispatch on the callback path).
# Julia compiles tuple code per dimension count, in time that grows quadratically with it
# (1,000 dimensions: 5 s, 5,000: a compiler stack overflow); no array needs more than this.
const MAX_NDIM = 64

function _check_ndim(f::AbstractString, n::Integer)
    0 <= n <= MAX_NDIM ||
        throw(ArgumentError("$f: a tensor of $n dimensions; at most $MAX_NDIM are supported"))
    return Int(n)
end

function TensorView(p::Ptr{DLTensor})
    dl = unsafe_load(p)
    n = _check_ndim("TensorView", dl.ndim)
    n == 1 && return _tensorview(dl, Val(1))
    n == 2 && return _tensorview(dl, Val(2))
    n == 3 && return _tensorview(dl, Val(3))
    n == 0 && return _tensorview(dl, Val(0))
    return _tensorview(dl, Val(n))
end
function _tensorview(dl::DLTensor, ::Val{N}) where {N}
    shape = ntuple(i -> unsafe_load(dl.shape, i), Val(N))
    strides = dl.strides == C_NULL ? _rowmajor_strides(shape) : ntuple(i -> unsafe_load(dl.strides, i), Val(N))
    return TensorView{N}(dl.data, dl.device, dl.dtype, shape, strides, dl.byte_offset, nothing)
end

function _rowmajor_strides(shape::NTuple{N,Int64}) where {N}
    s = ones(Int64, N)
    for i in N-1:-1:1
        s[i] = s[i+1] * shape[i+1]
    end
    return NTuple{N,Int64}(s)
end

Base.size(tv::TensorView) = tv.shape_buf
Base.size(tv::TensorView, d::Integer) = d <= ndims(tv) ? Int(tv.shape_buf[d]) : 1
Base.strides(tv::TensorView) = tv.strides_buf
Base.ndims(::TensorView{N}) where {N} = N
Base.length(tv::TensorView) = prod(tv.shape_buf)
Base.eltype(tv::TensorView) = julia_type(tv.dtype)
Base.pointer(tv::TensorView) = tv.data + tv.byte_offset
dtype(tv::TensorView) = tv.dtype
device(tv::TensorView) = tv.device
Base.parent(tv::TensorView) = tv.parent
Base.show(io::IO, tv::TensorView) =
    print(io, "TensorView(", tv.dtype, _dims_string(size(tv)), ", strides=", strides(tv), ", ", tv.device, ")")
_dims_string(s) = string("[", join(s, ", "), "]")

"""
    unsafe_array(tv::TensorView)

The memory of a view as a Julia array, without copying: the original array for views of Julia
arrays, otherwise an array over memory that someone else owns (valid only while they keep it).
"""
# A borrowed view whose owner's guarantee has ended (a callback argument after the callback
# returned): any later use raises instead of reading memory that may be freed.
struct _ClosedView end
@inline _close_view!(x) = nothing
@inline _close_view!(tv::TensorView) =
    (tv.parent === nothing && (tv.parent = _ClosedView(); tv.data = C_NULL); nothing)
_check_open(tv::TensorView) = tv.parent isa _ClosedView && throw(ArgumentError(
    "TensorView: a callback's tensor argument is only valid until the callback returns; " *
    "copy it (copy(unsafe_array(v))) inside the callback"))

# deepcopy: a view of a Julia array is a view of a deep copy of the array (same shape and
# strides), like deepcopy of the array itself. A borrowed view (a callback's DLTensor*, a foreign
# result: memory someone else owns, maybe a device's) is an ArgumentError, as for TVMTensor.
# The default copied the fields: `data` still pointed at the original array (not the copied
# parent) and `shape`/`strides` into the original view, dangling once it was collected.
function Base.deepcopy_internal(tv::TensorView, d::IdDict)
    haskey(d, tv) && return d[tv]::TensorView
    _check_open(tv)
    p = tv.parent
    p isa AbstractArray || throw(ArgumentError(
        "deepcopy(::TensorView): the view borrows memory it does not own (a callback's " *
        "argument or a returned DLTensor*); copy the data instead: TensorView(copy(unsafe_array(v)))"))
    y = _tensorview_of(Base.deepcopy_internal(p, d))
    d[tv] = y
    return y
end

function unsafe_array(tv::TensorView)
    _check_open(tv)
    tv.parent isa AbstractArray && return tv.parent
    _is_host(tv.device) || throw(ArgumentError("unsafe_array: memory on $(tv.device) is not host memory"))
    T = julia_type(tv.dtype)
    return first(_wrap_strided(Ptr{T}(pointer(tv)), size(tv), strides(tv), nothing))
end

_is_host(d::DLDevice) = d.device_type in (kDLCPU, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged)

# --- Wrapping foreign memory as a Julia array (shared by from_dlpack and unsafe_array) -------
#
# Returns (array, root). Compact column-major -> Array; compact in another dimension order
# (e.g. row-major) -> PermutedDimsArray over an Array; any other strides (negative ones too),
# or a pointer not aligned to the element type -> a StridedView. `root` is the Array that should carry a finalizer releasing `owner`, or
# `nothing` when the array itself holds `owner` (StridedView) or there is no memory to share.
_is_aligned(p::Ptr{T}) where {T} = UInt(p) % Base.datatype_alignment(T) == 0

function _wrap_strided(p::Ptr{T}, shape::NTuple{N,Int64}, strides::NTuple{N,Int64}, owner) where {T,N}
    dims = map(Int, shape)
    if N == 0
        _is_aligned(p) || return StridedView{T,N}(p, dims, (), owner), nothing
        a = unsafe_wrap(Array, p, ())
        return a, a
    end
    if any(==(0), dims) || p == C_NULL
        return Array{T,N}(undef, dims), nothing  # no elements: nothing to share
    end
    if !_is_aligned(p)  # unsafe_wrap refuses such pointers; StridedView loads them fine
        return StridedView{T,N}(p, dims, map(Int, strides), owner), nothing
    end
    # order: dims of size > 1 by increasing stride, then the size-1 dims
    big = sort!([i for i in 1:N if dims[i] > 1], by = i -> (strides[i], i))
    order = vcat(big, [i for i in 1:N if dims[i] == 1])
    expect = 1
    compact = true
    for i in big
        strides[i] == expect || (compact = false; break)
        expect *= dims[i]
    end
    if !compact
        return StridedView{T,N}(p, dims, map(Int, strides), owner), nothing
    end
    if issorted(order)  # column-major in Julia order
        a = unsafe_wrap(Array, p, dims)
        return a, a
    end
    base = unsafe_wrap(Array, p, ntuple(k -> dims[order[k]], N))
    return PermutedDimsArray(base, Tuple(invperm(order))), base
end

"""
    rowmajor(A)

`A` with its dimensions reversed, as a `PermutedDimsArray` (no copy): a column-major Julia
array presented as a compact row-major tensor of the reversed shape, the form DLPack.jl uses
and most kernels require. `rowmajor(rowmajor(A)) == A`.
"""
rowmajor(A::AbstractArray{T,N}) where {T,N} = PermutedDimsArray(A, ntuple(i -> N + 1 - i, N))

# --- ffi.Tensor ------------------------------------------------------------------------------

"""
    TVMTensor(handle::Ptr{Cvoid}; borrowed::Bool)
    TVMTensor(A::AbstractArray)      # same as to_dlpack(A): no copy

A reference-counted `ffi.Tensor` (type index 70). `size`, `strides`, `ndims`, `eltype`,
`length`, `dtype`, `device` and `pointer` read its DLTensor; `from_dlpack(t)` gives a Julia
array over its memory (no copy) that keeps the tensor alive; `Array(t)` copies.
"""
@_object_wrapper TVMTensor

TVMTensor(A::AbstractArray) = to_dlpack(A)
# (object.jl) a deep copy would have to copy memory that may be another framework's or a device's
Base.deepcopy_internal(::TVMTensor, ::IdDict) = throw(ArgumentError(
    "deepcopy(::TVMTensor): a tensor shares its memory; copy the data instead (e.g. to_dlpack(copy(unsafe_array(t))))"))

_dl(t::TVMTensor) = unsafe_load(Ptr{DLTensor}(_live_handle(t) + LibAnyFFI.OBJECT_HEADER_SIZE))
Base.ndims(t::TVMTensor) = Int(_dl(t).ndim)
function Base.size(t::TVMTensor)
    dl = _dl(t)
    return ntuple(i -> Int(unsafe_load(dl.shape, i)), Int(dl.ndim))
end
Base.size(t::TVMTensor, d::Integer) = (s = size(t); d <= length(s) ? s[d] : 1)
function Base.strides(t::TVMTensor)
    dl = _dl(t)
    n = Int(dl.ndim)
    dl.strides == C_NULL && return map(Int, _rowmajor_strides(ntuple(i -> unsafe_load(dl.shape, i), n)))
    return ntuple(i -> Int(unsafe_load(dl.strides, i)), n)
end
Base.length(t::TVMTensor) = prod(size(t))
Base.eltype(t::TVMTensor) = julia_type(_dl(t).dtype)
dtype(t::TVMTensor) = _dl(t).dtype
device(t::TVMTensor) = _dl(t).device
Base.pointer(t::TVMTensor) = (dl = _dl(t); dl.data + dl.byte_offset)
Base.Array(t::TVMTensor) = Array(from_dlpack(t))

function Base.show(io::IO, t::TVMTensor)
    _released(t) && return print(io, "TVMTensor(<released>)")
    print(io, "TVMTensor(", dtype(t), _dims_string(size(t)), ", strides=", strides(t), ", ", device(t), ")")
end

"""
    dtype(x)

The `DLDataType` of a `TVMTensor` or a `TensorView`.
"""
function dtype end

"""
    device(x)

The `DLDevice` of a `TVMTensor` or a `TensorView`.
"""
function device end

# --- DLPack out of Julia ---------------------------------------------------------------------

"""
    to_dlpack(A::AbstractArray) -> TVMTensor

A new `ffi.Tensor` over the memory of a strided CPU Julia array, without copying (Julia order
and strides, see the layout note in `tensor.jl`). The array is kept alive until the library
drops the tensor (its DLPack deleter releases it).
"""
to_dlpack(A::DLStridedArray) = _export_dlpack(A)
to_dlpack(t::TVMTensor) = t
# A view of a Julia array exports the array; a borrowed one (a callback's DLTensor* argument)
# gets an ffi.Tensor over the same memory, valid as long as the view's owner keeps it.
to_dlpack(tv::TensorView) = tv.parent isa AbstractArray ? to_dlpack(tv.parent) : _export_view(tv)
function to_dlpack(A::AbstractArray)
    _strided_memory(A) || throw(ArgumentError(
        "to_dlpack: need a strided CPU array with a DLPack element type, got $(typeof(A))"))
    return _export_dlpack(A)
end

# The ffi.Tensor of a strided array (checked by the caller).
function _export_dlpack(A::AbstractArray)
    _string_memory(A) && throw(_string_memory_error("to_dlpack", A))
    _pin_size!(A)
    mt = _managed_versioned(A)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    rc = TVMFFITensorFromDLPackVersioned(mt, 0, 0, out)
    if rc != 0
        # not adopted: free it ourselves (the deleter also releases the keep-alive box)
        _dlpack_deleter_versioned(mt)
        check_call(rc)
    end
    return TVMTensor(out[]; borrowed = false)
end

# A Vector under an exported tensor must not be resized (push!, resize!, append!, ...): Julia
# would move its memory and the tensor would point to freed memory. Reshaping an Array marks its
# data shared, and Julia then refuses to resize it ("cannot resize array with shared data"), as
# it does for any reshaped vector; the mark stays for the vector's lifetime.
function _pin_size!(A::AbstractArray)
    root = A
    while true
        p = parent(root)
        p === root && break
        root = p
    end
    root isa Vector && reshape(root, length(root), 1)
    return nothing
end

# The ffi.Tensor of a borrowed view: its metadata copied into a malloc'd managed tensor with no
# keep-alive (the memory is the view owner's).
function _export_view(tv::TensorView{N}) where {N}
    _check_open(tv)
    mem = Libc.malloc(sizeof(DLManagedTensorVersioned) + 16 * N)
    mem == C_NULL && throw(OutOfMemoryError())
    mt = Ptr{DLManagedTensorVersioned}(mem)
    shp = Ptr{Int64}(mem + sizeof(DLManagedTensorVersioned))
    strd = shp + 8 * N
    for i in 1:N
        unsafe_store!(shp, tv.shape_buf[i], i)
        unsafe_store!(strd, tv.strides_buf[i], i)
    end
    dl = DLTensor(tv.data, tv.device, Int32(N), tv.dtype, shp, strd, tv.byte_offset)
    unsafe_store!(mt, DLManagedTensorVersioned(
        DLPackVersion(LibAnyFFI.DLPACK_MAJOR_VERSION, LibAnyFFI.DLPACK_MINOR_VERSION),
        C_NULL, DLPACK_DELETER_VERSIONED[], UInt64(0), dl))
    out = Ref{Ptr{Cvoid}}(C_NULL)
    rc = TVMFFITensorFromDLPackVersioned(mt, 0, 0, out)
    if rc != 0
        _dlpack_deleter_versioned(mt)
        check_call(rc)
    end
    return TVMTensor(out[]; borrowed = false)
end

# A malloc'd DLManagedTensorVersioned over A's memory; shape and strides follow the struct.
function _managed_versioned(A::AbstractArray{T,N}) where {T<:DLEltype,N}
    box = _keepalive!(A)
    nbytes = sizeof(DLManagedTensorVersioned) + 16 * N
    mem = Libc.malloc(nbytes)
    mem == C_NULL && (_mark_dead!(box); throw(OutOfMemoryError()))
    mt = Ptr{DLManagedTensorVersioned}(mem)
    shp = Ptr{Int64}(mem + sizeof(DLManagedTensorVersioned))
    strd = shp + 8 * N
    for i in 1:N
        unsafe_store!(shp, Int64(size(A, i)), i)
        unsafe_store!(strd, Int64(stride(A, i)), i)
    end
    dl = DLTensor(Ptr{Cvoid}(pointer(A)), DLDevice(kDLCPU, Int32(0)), Int32(N), DLDataType(T),
                  shp, strd, UInt64(0))
    unsafe_store!(mt, DLManagedTensorVersioned(
        DLPackVersion(LibAnyFFI.DLPACK_MAJOR_VERSION, LibAnyFFI.DLPACK_MINOR_VERSION),
        pointer_from_objref(box), DLPACK_DELETER_VERSIONED[], UInt64(0), dl))
    return mt
end

const DLPACK_DELETER_VERSIONED = Ref{Ptr{Cvoid}}(C_NULL)

# The deleter of our managed tensors: may run inside a finalizer, so it only stores and frees.
function _dlpack_deleter_versioned(mt::Ptr{DLManagedTensorVersioned})::Cvoid
    mt == C_NULL && return
    ctx = unsafe_load(Ptr{Ptr{Cvoid}}(mt + fieldoffset(DLManagedTensorVersioned, 2)))
    ctx != C_NULL && _mark_dead!(unsafe_pointer_to_objref(ctx)::_KeepAlive)
    Libc.free(mt)
    return
end

"""
    to_dlpack_versioned(t) -> Ptr{DLManagedTensorVersioned}
    to_dlpack_legacy(t)    -> Ptr{DLManagedTensor}

Export a tensor (or a Julia array, through `to_dlpack`) as a raw DLPack managed tensor that
holds a reference. The caller owns the pointer: hand it to a consumer (`from_dlpack(ptr)` or
another DLPack library) or call its deleter.
"""
function to_dlpack_versioned(t::TVMTensor)
    out = Ref{Ptr{DLManagedTensorVersioned}}(C_NULL)
    GC.@preserve t check_call(TVMFFITensorToDLPackVersioned(_live_handle(t), out))
    return out[]
end
function to_dlpack_legacy(t::TVMTensor)
    out = Ref{Ptr{DLManagedTensor}}(C_NULL)
    GC.@preserve t check_call(TVMFFITensorToDLPack(_live_handle(t), out))
    return out[]
end
to_dlpack_versioned(A::AbstractArray) = to_dlpack_versioned(to_dlpack(A))
to_dlpack_legacy(A::AbstractArray) = to_dlpack_legacy(to_dlpack(A))

# --- DLPack into Julia -----------------------------------------------------------------------

"""
    from_dlpack(t::TVMTensor) -> AbstractArray
    from_dlpack(p::Ptr{DLManagedTensorVersioned}) -> TVMTensor   (takes ownership on success)
    from_dlpack(p::Ptr{DLManagedTensor}) -> TVMTensor            (legacy; same)

For a tensor in host memory: a Julia array over the same memory, with the tensor's shape and
index order, without copying. The array keeps the tensor alive (one reference, released by the
array's finalizer). A compact column-major tensor gives an `Array`; other layouts give a
`PermutedDimsArray` over an `Array`, and any other strided layout a `StridedView`. For raw DLPack pointers: adopt them as a
`TVMTensor`, as `TVMFFITensorFromDLPack*` does.
"""
# Whether _wrap_strided will return a StridedView (non-compact layout with elements).
function _wrap_needs_owner(p::Ptr, shape::NTuple{N,Int64}, strides::NTuple{N,Int64}) where {N}
    any(==(0), shape) && return false
    _is_aligned(p) || return true
    N == 0 && return false
    big = sort!([i for i in 1:N if shape[i] > 1], by = i -> (strides[i], i))
    expect = 1
    for i in big
        strides[i] == expect || return true
        expect *= shape[i]
    end
    return false
end

function from_dlpack(t::TVMTensor)
    h = _live_handle(t)
    dl = _dl(t)
    _is_host(dl.device) || throw(ArgumentError("from_dlpack: tensor on $(dl.device) is not in host memory"))
    T = julia_type(dl.dtype)
    n = _check_ndim("from_dlpack", dl.ndim)
    shape = ntuple(i -> unsafe_load(dl.shape, i), n)
    strides = dl.strides == C_NULL ? _rowmajor_strides(shape) : ntuple(i -> unsafe_load(dl.strides, i), n)
    p = Ptr{T}(dl.data + dl.byte_offset)
    if _wrap_needs_owner(p, shape, strides)
        # a StridedView holds the tensor itself
        return first(_wrap_strided(p, shape, strides, TVMTensor(h; borrowed = true)))
    end
    arr, root = _wrap_strided(p, shape, strides, nothing)
    if root !== nothing
        TVMFFIObjectIncRef(h)  # the array's own reference, released by its finalizer
        finalizer(_ -> (TVMFFIObjectDecRef(h); nothing), root)
    end
    return arr
end
from_dlpack(A::AbstractArray) = A

function from_dlpack(p::Ptr{DLManagedTensorVersioned}; require_alignment::Integer = 0,
                     require_contiguous::Bool = false)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check_call(TVMFFITensorFromDLPackVersioned(p, require_alignment, require_contiguous, out))
    return TVMTensor(out[]; borrowed = false)
end
function from_dlpack(p::Ptr{DLManagedTensor}; require_alignment::Integer = 0,
                     require_contiguous::Bool = false)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check_call(TVMFFITensorFromDLPack(p, require_alignment, require_contiguous, out))
    return TVMTensor(out[]; borrowed = false)
end
