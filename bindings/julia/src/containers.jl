# Containers: ffi.Shape (69), ffi.Array (71), ffi.List (75), ffi.Map (72), ffi.Dict (76)
# (spec §2.4 layouts, §8 built-in functions).
#
# Shape, Array and List are read in place through their ABI cells (TVMFFIShapeCell at +24,
# TVMFFISeqCell at +24: elements are TVMFFIAny). Everything else goes through the built-in
# `ffi.*` globals, looked up on first use and cached; a missing global raises a clear error, so
# these types switch on when the library registers them.

const GLOBAL_CACHE = Dict{String,Any}()
const GLOBAL_CACHE_LOCK = ReentrantLock()

# A built-in global, cached once found (a missing one is looked up again next time).
function _global(name::String)
    f = lock(() -> get(GLOBAL_CACHE, name, nothing), GLOBAL_CACHE_LOCK)
    f === nothing || return f::TVMFunction
    f = get_global_func(name)
    f === nothing && return nothing
    lock(() -> (GLOBAL_CACHE[name] = f), GLOBAL_CACHE_LOCK)
    return f
end

function _require_global(name::String)
    f = _global(name)
    f === nothing && throw(TVMError("RuntimeError",
        "AnyFFI needs the global function `$name`, which $(library_path()) does not register"))
    return f
end

# --- ffi.Shape -------------------------------------------------------------------------------

"""
    TVMShape(dims::Integer...)
    TVMShape(dims)                     # a tuple or vector of integers
    TVMShape(handle::Ptr{Cvoid}; borrowed::Bool)

An immutable `ffi.Shape` (type index 69). Indexable and iterable like a vector of `Int64`;
`Tuple(s)` converts.
"""
@_object_wrapper TVMShape

TVMShape(dims::Integer...) = _require_global("ffi.Shape")(dims...)::TVMShape
TVMShape(dims::Union{Tuple,AbstractVector}) = TVMShape(dims...)

_shape_cell(s::TVMShape) =
    unsafe_load(Ptr{LibAnyFFI.TVMFFIShapeCell}(_live_handle(s) + LibAnyFFI.OBJECT_HEADER_SIZE))
Base.length(s::TVMShape) = Int(_shape_cell(s).size)
Base.size(s::TVMShape) = (length(s),)
# Bool is no index (as for a Vector: `v[true]` is an ArgumentError, not v[1])
@noinline _bool_index(i::Bool) = throw(ArgumentError("invalid index: $i of type Bool"))
Base.getindex(::TVMShape, i::Bool) = _bool_index(i)
function Base.getindex(s::TVMShape, i::Integer)
    c = _shape_cell(s)
    1 <= i <= c.size || throw(BoundsError(s, i))
    return GC.@preserve s unsafe_load(c.data, i)
end
Base.iterate(s::TVMShape, i::Int = 1) = i > length(s) ? nothing : (s[i], i + 1)
Base.eltype(::Type{TVMShape}) = Int64
Base.firstindex(::TVMShape) = 1
Base.lastindex(s::TVMShape) = length(s)
Base.Tuple(s::TVMShape) = Tuple(collect(s))
Base.keys(s::TVMShape) = Base.OneTo(length(s))
Base.eachindex(s::TVMShape) = Base.OneTo(length(s))
Base.ndims(::TVMShape) = 1
Base.isempty(s::TVMShape) = length(s) == 0
TVMShape(s::TVMShape) = s
Base.collect(s::TVMShape) = Int64[x for x in s]
# Shapes compare by value (other objects by identity).
Base.:(==)(s::TVMShape, t::TVMShape) = collect(s) == collect(t)
Base.hash(s::TVMShape, h::UInt) = hash(Tuple(s), h)  # as the tuple it equals (isequal)
Base.:(==)(s::TVMShape, t::Union{Tuple,AbstractVector}) = collect(s) == collect(t)
Base.:(==)(t::Union{Tuple,AbstractVector}, s::TVMShape) = s == t
# A shape hashes as the tuple it equals, and a tuple and a vector never hash alike: `isequal`
# (Dict and Set keys) holds with the tuple only, or equal keys would hash apart.
Base.isequal(s::TVMShape, t::AbstractVector) = false
Base.isequal(t::AbstractVector, s::TVMShape) = false
Base.isequal(s::TVMShape, t::Tuple) = isequal(Tuple(s), t)
Base.isequal(t::Tuple, s::TVMShape) = isequal(t, Tuple(s))
Base.isequal(s::TVMShape, t::TVMShape) = s == t
Base.show(io::IO, s::TVMShape) =
    _released(s) ? print(io, "TVMShape(<released>)") : print(io, "TVMShape(", Tuple(s), ")")

# --- ffi.Array / ffi.List --------------------------------------------------------------------

"""
    TVMArray(xs)                     # ffi.Array(xs...): each element converted like an argument
    TVMArray(handle::Ptr{Cvoid}; borrowed::Bool)

An immutable `ffi.Array` (type index 71): `length`, `getindex` (1-based), `iterate`, `collect`.
Julia tuples and vectors whose element type is not a tensor element type pass as `ffi.Array`.
"""
@_object_wrapper TVMArray

"""
    TVMList(xs)                      # ffi.List(xs...)
    TVMList(handle::Ptr{Cvoid}; borrowed::Bool)

A mutable `ffi.List` (type index 75): as `TVMArray`, plus `setindex!`, `push!`, `pop!`,
`insert!`, `deleteat!`, `empty!`.
"""
@_object_wrapper TVMList

const _Seq = Union{TVMArray,TVMList}

# What a container keeps must be owned: a Julia array element becomes an ffi.Tensor over its
# memory (keeping the array alive), not the borrowed DLTensor* view an argument gets, which
# dies with the call.
_owned_elem(x) = x
_owned_elem(A::AbstractArray) = (A isa DLStridedArray || _strided_memory(A)) ? to_dlpack(A) : A
_owned_elem(b::_StrCodeUnits) = b  # bytes, not a tensor
# a view of a Julia array exports the array; a borrowed view (a callback's argument) is
# copied: the caller's memory is only valid until the callback returns
_owned_elem(tv::TensorView) =
    tv.parent isa AbstractArray ? to_dlpack(tv.parent) : to_dlpack(copy(unsafe_array(tv)))

TVMArray(xs) = _require_global("ffi.Array")((_owned_elem(x) for x in xs)...)::TVMArray
TVMArray() = _require_global("ffi.Array")()::TVMArray
TVMList(xs) = _require_global("ffi.List")((_owned_elem(x) for x in xs)...)::TVMList
TVMList() = _require_global("ffi.List")()::TVMList

_seq_cell(a::TVMArray) =
    unsafe_load(Ptr{LibAnyFFI.TVMFFISeqCell}(_live_handle(a) + LibAnyFFI.OBJECT_HEADER_SIZE))
# An ffi.Array is immutable: its cell is read in place. An ffi.List may be changed by another
# thread at any time (clear/append free or move its elements): read it only through the
# library's functions, which take the container's lock and return an owned value.
Base.length(a::TVMArray) = Int(_seq_cell(a).size)
Base.length(l::TVMList) = Int(_require_global("ffi.ListSize")(l))
Base.size(a::_Seq) = (length(a),)
Base.getindex(::TVMList, i::Bool) = _bool_index(i)
Base.getindex(::TVMArray, i::Bool) = _bool_index(i)
Base.setindex!(::TVMList, v, i::Bool) = _bool_index(i)
Base.insert!(::TVMList, i::Bool, v) = _bool_index(i)
Base.deleteat!(::TVMList, i::Bool) = _bool_index(i)

# The library's IndexError: a List index out of range when the library looked.
_index_error(e) = e isa TVMError && e.kind == "IndexError"

# A List call at index `i` (1-based) that another thread may have made out of range since it
# was checked: the library's IndexError is the BoundsError the check would have raised.
function _list_at(f, l::TVMList, i::Integer, args...)
    try
        return f(l, i - 1, args...)
    catch e
        _index_error(e) ? throw(BoundsError(l, i)) : rethrow()
    end
end

function Base.getindex(l::TVMList, i::Integer)
    1 <= i <= typemax(Int64) || throw(BoundsError(l, i))  # (ListGetItem takes an int)
    return _list_at(_require_global("ffi.ListGetItem"), l, i)
end
function Base.getindex(a::TVMArray, i::Integer)
    c = _seq_cell(a)
    1 <= i <= c.size || throw(BoundsError(a, i))
    return GC.@preserve a _from_any_borrowed(unsafe_load(Ptr{TVMFFIAny}(c.data), i))
end
Base.iterate(a::_Seq, i::Int = 1) = i > length(a) ? nothing : (a[i], i + 1)
Base.keys(a::_Seq) = Base.OneTo(length(a))
Base.eachindex(a::_Seq) = Base.OneTo(length(a))
Base.ndims(::_Seq) = 1
Base.Vector(a::_Seq) = collect(a)
Base.pairs(a::_Seq) = Iterators.Pairs(a, keys(a))
Base.eltype(::Type{<:_Seq}) = Any
Base.firstindex(::_Seq) = 1
Base.lastindex(a::_Seq) = length(a)
Base.collect(a::_Seq) = Any[x for x in a]
function Base.show(io::IO, a::_Seq)
    _released(a) && return print(io, nameof(typeof(a)), "(<released>)")
    _show_once(io, a) do io
        print(io, nameof(typeof(a)), "([")
        for (i, x) in enumerate(a)
            i > 1 && print(io, ", ")
            show(io, x)
        end
        print(io, "])")
    end
end

# Shows a container through `f(io)` unless it is already being shown further out (a container
# that holds itself): then a marker, as Base prints for a Vector that contains itself. Element
# wrappers are new objects each time, so the containers on the way are kept by handle.
function _show_once(f, io::IO, x)
    h = UInt(x.handle)
    d = 1
    if io isa IOContext
        for (k, v) in io.dict
            if k === :anyffi_showing
                v === h && return print(io, "#= circular reference @-$d =#")
                d += 1
            end
        end
    end
    return f(IOContext(io, :anyffi_showing => h))
end

function Base.setindex!(l::TVMList, v, i::Integer)
    1 <= i <= length(l) || throw(BoundsError(l, i))
    _list_at(_require_global("ffi.ListSetItem"), l, i, _owned_elem(v))
    return l
end
Base.push!(l::TVMList, v) = (_require_global("ffi.ListAppend")(l, _owned_elem(v)); l)
# The last element at the moment of the pop: the library pops by index, so a list another
# thread shortens between the length and the pop is read again (a push in between leaves the
# same list as the pop before it would).
function Base.pop!(l::TVMList)
    listpop = _require_global("ffi.ListPop")
    while true
        n = length(l)
        n == 0 && throw(ArgumentError("TVMList must be non-empty"))
        try
            return listpop(l, n - 1)
        catch e
            _index_error(e) || rethrow()
        end
    end
end
function Base.insert!(l::TVMList, i::Integer, v)
    1 <= i <= length(l) + 1 || throw(BoundsError(l, i))
    _list_at(_require_global("ffi.ListInsert"), l, i, _owned_elem(v))
    return l
end
function Base.deleteat!(l::TVMList, i::Integer)
    1 <= i <= length(l) || throw(BoundsError(l, i))
    _list_at(_require_global("ffi.ListErase"), l, i)
    return l
end
Base.empty!(l::TVMList) = (_require_global("ffi.ListClear")(l); l)
Base.append!(l::TVMList, xs) = (foreach(x -> push!(l, x), collect(xs)); l)
# One library call (a read of l[1] then an erase returned one element to two threads and lost
# the next one)
function Base.popfirst!(l::TVMList)
    try
        return _require_global("ffi.ListPop")(l, 0)
    catch e
        _index_error(e) || rethrow()
        throw(ArgumentError("TVMList must be non-empty"))
    end
end
Base.isempty(a::_Seq) = length(a) == 0
Base.pushfirst!(l::TVMList, v) = insert!(l, 1, v)
# ranges give a new container of the same kind, as for a Vector
function Base.getindex(a::_Seq, r::AbstractUnitRange{<:Integer})
    isempty(r) || (checkbounds(Bool, 1:length(a), r) || throw(BoundsError(a, r)))
    xs = Any[a[i] for i in r]
    return a isa TVMList ? TVMList(xs) : TVMArray(xs)
end
Base.copy(a::TVMArray) = a  # immutable
Base.copy(l::TVMList) = TVMList(collect(l))
Base.Vector{T}(a::_Seq) where {T} = T[x for x in a]
Base.convert(::Type{Vector}, a::_Seq) = collect(a)
Base.convert(::Type{Vector{T}}, a::_Seq) where {T} = Vector{T}(a)
TVMArray(a::TVMArray) = a
TVMList(l::TVMList) = TVMList(collect(l))  # a new List: a shallow copy

# --- ffi.Map / ffi.Dict ----------------------------------------------------------------------

"""
    TVMMap(d::AbstractDict)   /   TVMMap(k1 => v1, k2 => v2, ...)
    TVMMap(handle::Ptr{Cvoid}; borrowed::Bool)

An immutable `ffi.Map` (type index 72): `length`, `getindex` (`KeyError` when missing),
`haskey`, `get`, `keys`, `values`, iteration over `key => value` pairs. Julia `AbstractDict`s
pass as `ffi.Map`.
"""
@_object_wrapper TVMMap

"""
    TVMDict(d::AbstractDict)   /   TVMDict(k1 => v1, ...)
    TVMDict(handle::Ptr{Cvoid}; borrowed::Bool)

A mutable `ffi.Dict` (type index 76): as `TVMMap`, plus `setindex!`, `delete!`, `empty!`.
"""
@_object_wrapper TVMDict

const _AnyMap = Union{TVMMap,TVMDict}
_prefix(::TVMMap) = "ffi.Map"
_prefix(::TVMDict) = "ffi.Dict"
_mapfn(m::_AnyMap, op::String) = _require_global(string(_prefix(m), op))

_flatten(ps) = (_owned_elem(x) for p in ps for x in (first(p), last(p)))
TVMMap(d::AbstractDict) = _require_global("ffi.Map")(_flatten(d)...)::TVMMap
TVMMap(ps::Pair...) = _require_global("ffi.Map")(_flatten(ps)...)::TVMMap
TVMDict(d::AbstractDict) = _require_global("ffi.Dict")(_flatten(d)...)::TVMDict
TVMDict(ps::Pair...) = _require_global("ffi.Dict")(_flatten(ps)...)::TVMDict

Base.length(m::_AnyMap) = Int(_mapfn(m, "Size")(m))
Base.isempty(m::_AnyMap) = length(m) == 0
# A key the library cannot hold (a Symbol, a Set) is in no map: a lookup with it is a miss, as a
# Julia Dict's lookup of a key of another type, not the ArgumentError of passing it.
function Base.haskey(m::_AnyMap, k)
    try
        return _mapfn(m, "Count")(m, k) != 0
    catch e
        _unpassable(e) && return false
        rethrow()
    end
end
_unpassable(e) = e isa ArgumentError && startswith(e.msg, "AnyFFI: cannot pass a value of type")
# (a Dict may lose the key between the two calls, on another thread: the lookup's KeyError
# then reads as the key missing, as it would have a moment earlier)
function _get_item(m::_AnyMap, k, missing_key)
    try
        return _mapfn(m, "GetItem")(m, k)
    catch e
        e isa TVMError && e.kind == "KeyError" && return missing_key()
        rethrow()
    end
end
function Base.getindex(m::_AnyMap, k)
    haskey(m, k) || throw(KeyError(k))
    return _get_item(m, k, () -> throw(KeyError(k)))
end
Base.get(m::_AnyMap, k, default) = haskey(m, k) ? _get_item(m, k, () -> default) : default
Base.get(f::Base.Callable, m::_AnyMap, k) = haskey(m, k) ? _get_item(m, k, f) : f()
Base.keytype(::Type{<:_AnyMap}) = Any
Base.valtype(::Type{<:_AnyMap}) = Any
Base.keytype(m::_AnyMap) = keytype(typeof(m))
Base.valtype(m::_AnyMap) = valtype(typeof(m))
TVMMap(ps::AbstractVector{<:Pair}) = TVMMap(ps...)
TVMDict(ps::AbstractVector{<:Pair}) = TVMDict(ps...)
TVMMap(m::_AnyMap) = m isa TVMMap ? m : TVMMap(collect(m))
TVMDict(m::_AnyMap) = TVMDict(collect(m))  # a new Dict (mutable): a shallow copy
Base.copy(m::TVMMap) = m  # immutable
Base.copy(d::TVMDict) = TVMDict(collect(d))
Base.eltype(::Type{<:_AnyMap}) = Pair{Any,Any}

# Iteration through `ffi.MapForwardIterFunctor`: it(0) key, it(1) value, it(2) advance.
function Base.iterate(m::TVMMap)
    length(m) == 0 && return nothing
    it = _mapfn(m, "ForwardIterFunctor")(m)
    return (it(0) => it(1)), (it, 1)
end
function Base.iterate(m::TVMMap, st)  # a Map never changes
    it, n = st
    (n < length(m) && it(2)) || return nothing
    return (it(0) => it(1)), (it, n + 1)
end
# A Dict is walked from a copy of its pairs: the library's iterator ends early when the loop
# sets a key's value (a set may move the key to the end, as in the official library), which
# `for (k, v) in d; d[k] = f(v); end` does as for a Julia Dict. Adding or removing keys in the
# loop is an InvalidStateException.
function Base.iterate(m::TVMDict)
    len = length(m)
    len == 0 && return nothing
    it = _mapfn(m, "ForwardIterFunctor")(m)
    pairs = Pair{Any,Any}[]
    sizehint!(pairs, len)
    try
        while true
            push!(pairs, it(0) => it(1))
            it(2) || break
        end
    catch e
        # another thread added or removed keys while the pairs were read
        (e isa TVMError && occursin("changed during iteration", e.message)) || rethrow()
        throw(InvalidStateException("TVMDict changed size during iteration", :modified))
    end
    return iterate(m, (pairs, 0, len))
end
function Base.iterate(m::TVMDict, st::Tuple{Vector{Pair{Any,Any}},Int,Int})
    pairs, n, len = st
    length(m) == len || throw(InvalidStateException(
        "TVMDict changed size during iteration ($len -> $(length(m)) entries)", :modified))
    n < length(pairs) || return nothing
    return pairs[n + 1], (pairs, n + 1, len)
end
# deepcopy of the mutable containers: new containers of deep-copied elements (object.jl)
function Base.deepcopy_internal(l::TVMList, d::IdDict)
    key = _copy_key(l)  # l[i] returns a new wrapper each time: key on the object itself
    haskey(d, key) && return d[key]::TVMList
    c = TVMList()
    d[key] = c  # a list that contains itself stays cyclic in the copy
    for x in l
        push!(c, Base.deepcopy_internal(x, d))
    end
    return c
end
function Base.deepcopy_internal(m::TVMDict, d::IdDict)
    key = _copy_key(m)
    haskey(d, key) && return d[key]::TVMDict
    c = TVMDict()
    d[key] = c
    for (k, v) in m
        c[Base.deepcopy_internal(k, d)] = Base.deepcopy_internal(v, d)
    end
    return c
end
# An Array or a Map never changes, but what it holds may (a TVMList, a TVMDict): deepcopy
# rebuilds it from deep-copied elements, as for a Julia tuple of vectors. It cannot exist
# before its elements, so a cycle back to it (through a List or Dict, which are registered
# before their elements are copied) makes the inner copy first, which is then the copy.
function Base.deepcopy_internal(a::TVMArray, d::IdDict)
    key = _copy_key(a)
    haskey(d, key) && return d[key]::TVMArray
    xs = Any[Base.deepcopy_internal(x, d) for x in a]
    haskey(d, key) && return d[key]::TVMArray
    return d[key] = TVMArray(xs)
end
function Base.deepcopy_internal(m::TVMMap, d::IdDict)
    key = _copy_key(m)
    haskey(d, key) && return d[key]::TVMMap
    ps = Pair{Any,Any}[Base.deepcopy_internal(k, d) => Base.deepcopy_internal(v, d) for (k, v) in m]
    haskey(d, key) && return d[key]::TVMMap
    return d[key] = TVMMap(ps...)
end

Base.keys(m::_AnyMap) = Any[first(p) for p in m]
Base.values(m::_AnyMap) = Any[last(p) for p in m]
function Base.Dict(m::_AnyMap)
    d = Dict{Any,Any}(p for p in m)
    # the library keeps apart keys a Julia Dict takes for one (1 and 1.0, equal containers)
    length(d) == length(m) || throw(ArgumentError(
        "Dict($(nameof(typeof(m)))): its $(length(m)) keys are $(length(d)) keys to a Julia Dict " *
        "(keys such as 1 and 1.0, or two equal containers, are one key there)"))
    return d
end
function Base.show(io::IO, m::_AnyMap)
    _released(m) && return print(io, nameof(typeof(m)), "(<released>)")
    _show_once(io, m) do io
        print(io, nameof(typeof(m)), "(")
        for (i, (k, v)) in enumerate(m)
            i > 1 && print(io, ", ")
            show(io, k)
            print(io, " => ")
            show(io, v)
        end
        print(io, ")")
    end
end

Base.setindex!(d::TVMDict, v, k) = (_require_global("ffi.DictSetItem")(d, _owned_elem(k), _owned_elem(v)); d)
function Base.delete!(d::TVMDict, k)  # (a missing key, or one no map can hold: nothing to do)
    try
        _require_global("ffi.DictErase")(d, k)
    catch e
        _unpassable(e) || rethrow()
    end
    return d
end
function Base.pop!(d::TVMDict, k)
    v = d[k]  # KeyError when missing
    delete!(d, k)
    return v
end
Base.pop!(d::TVMDict, k, default) = haskey(d, k) ? pop!(d, k) : default
Base.get!(d::TVMDict, k, default) = haskey(d, k) ? d[k] : (d[k] = default; d[k])
Base.get!(f::Base.Callable, d::TVMDict, k) = haskey(d, k) ? d[k] : (d[k] = f(); d[k])
Base.empty!(d::TVMDict) = (_require_global("ffi.DictClear")(d); d)

# Containers compare by content, with each other and with Julia vectors and dicts (as the
# official packages do; other objects compare by identity), and hash as what they equal.
# `isequal` compares elements with `isequal` (NaN equals NaN, 0.0 is not -0.0), as for Julia
# vectors and dicts, so that it agrees with `hash` (Dict and Set keys).
_seq_equal(a, b, eq) = length(a) == length(b) && all(eq(x, y) for (x, y) in zip(a, b))
# (the same object is equal to itself without a walk; released ones are no object: an error)
_same_object(a, b) = a.handle == b.handle != C_NULL
Base.:(==)(a::_Seq, b::_Seq) = _same_object(a, b) || _seq_equal(a, b, ==)
Base.:(==)(a::_Seq, b::AbstractVector) = _seq_equal(a, b, ==)
Base.:(==)(b::AbstractVector, a::_Seq) = a == b
Base.isequal(a::_Seq, b::_Seq) = _same_object(a, b) || _seq_equal(a, b, isequal)
Base.isequal(a::_Seq, b::AbstractVector) = _seq_equal(a, b, isequal)
Base.isequal(b::AbstractVector, a::_Seq) = isequal(a, b)
Base.hash(a::_Seq, h::UInt) = hash(collect(a), h)
# a shape equals an Array or List of the same ints (as it equals the vector), isequal to neither
Base.:(==)(s::TVMShape, a::Union{TVMArray,TVMList}) = collect(s) == a
Base.:(==)(a::Union{TVMArray,TVMList}, s::TVMShape) = s == a
Base.isequal(::TVMShape, ::Union{TVMArray,TVMList}) = false
Base.isequal(::Union{TVMArray,TVMList}, ::TVMShape) = false
# Maps: the same number of entries, each key of the FFI map found in the other by that one's own
# rules (a Julia Dict's `isequal`, the library's for an FFI map) with an equal value. Not through
# `Dict(m)`, which merges keys the library keeps apart (1 and 1.0).
const _NO_VALUE = Symbol("#anyffi no value#")
function _map_equal(a::_AnyMap, b, eq)
    length(a) == length(b) || return false
    for (k, v) in a
        w = _lookup(b, k)
        w === _NO_VALUE && return false
        eq(v, w) || return false
    end
    return true
end
_lookup(b::AbstractDict, k) = get(b, k, _NO_VALUE)
_lookup(b::_AnyMap, k) = haskey(b, k) ? _get_item(b, k, () -> _NO_VALUE) : _NO_VALUE
Base.:(==)(a::_AnyMap, b::_AnyMap) = _same_object(a, b) || _map_equal(a, b, ==)
Base.:(==)(a::_AnyMap, b::AbstractDict) = _map_equal(a, b, ==)
Base.:(==)(b::AbstractDict, a::_AnyMap) = a == b
Base.isequal(a::_AnyMap, b::_AnyMap) = _same_object(a, b) || _map_equal(a, b, isequal)
Base.isequal(a::_AnyMap, b::AbstractDict) = _map_equal(a, b, isequal)
Base.isequal(b::AbstractDict, a::_AnyMap) = isequal(a, b)
# as Base hashes an AbstractDict (order-free), so that a map hashes as the Dict it equals
function Base.hash(m::_AnyMap, h::UInt)
    hv = Base.hasha_seed
    for (k, v) in m
        hv ⊻= hash(k, hash(v))
    end
    return hash(hv, h)
end

# Key of an object in a deepcopy IdDict: an isbits tuple, so equal handles are `===`.
# The wrapper type is part of the key: two wrappers of one object with different types (a
# TVMList and a TVMObject over the same handle) each get a copy of their own type.
_copy_key(x::AbstractTVMObject) = (:AnyFFI_object, typeof(x), UInt(_live_handle(x)))
