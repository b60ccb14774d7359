# Objects: handle lifetime (c_api.h: Basic object API; spec §2.2, §3).
#
# Every wrapper owns exactly one strong reference. Its constructor takes `borrowed::Bool` with
# no default, so each call site states where the reference came from:
#   borrowed = false  the handle is a new reference we adopt   (call results, *out params,
#                     TVMFFIFunctionGetGlobal, TVMFFIErrorMoveFromRaised)
#   borrowed = true   someone else keeps theirs; we IncRef      (callback arguments, container
#                     elements, fields read in place)
# The finalizer is one DecRef and nothing else (no printing, no locks, no allocation).

"""
    AbstractTVMObject

Supertype of the wrappers of reference-counted FFI objects (`TVMObject`, `TVMFunction`,
`TVMTensor`, `TVMShape`, `TVMArray`, `TVMList`, `TVMMap`, `TVMDict`, `TVMModule`). Each holds
one strong reference in its `handle` field, released by its finalizer.
"""
abstract type AbstractTVMObject end

# The only thing finalizers do: give our reference back.
# Takes the handle out of `x` in one atomic exchange: `release!` on two threads at once, or
# `release!` racing the finalizer, gave the reference back twice with a read and a store
# (session 21 audit). A lock would not do: finalizers may not take locks.
@inline function _take_handle!(x)::Ptr{Cvoid}
    T = typeof(x)
    GC.@preserve x begin
        p = Ptr{UInt}(pointer_from_objref(x) + fieldoffset(T, Base.fieldindex(T, :handle)))
        old = Base.llvmcall("""
            %ptr = inttoptr i64 %0 to i64*
            %old = atomicrmw xchg i64* %ptr, i64 0 acq_rel
            ret i64 %old
            """, UInt, Tuple{Ptr{UInt}}, p)
    end
    return Ptr{Cvoid}(old)
end

function _release_handle!(x)
    h = _take_handle!(x)
    h != C_NULL && TVMFFIObjectDecRef(h)
    return nothing
end

"""
    release!(x)

Give an object's reference back now instead of at garbage collection; `x` is unusable after.
"""
release!(x::Union{AbstractTVMObject,TVMError}) = _release_handle!(x)

"""
    TVMObject(handle::Ptr{Cvoid}; borrowed::Bool)

A reference to an FFI object of any type (those without a more specific wrapper: reflected
objects, `ffi.OpaquePyObject`, user types).
"""
mutable struct TVMObject <: AbstractTVMObject
    handle::Ptr{Cvoid}
    function TVMObject(handle::Ptr{Cvoid}; borrowed::Bool)
        handle == C_NULL && throw(ArgumentError("TVMObject: NULL handle"))
        borrowed && TVMFFIObjectIncRef(handle)
        return finalizer(_release_handle!, new(handle))
    end
end

# Shared by every object wrapper: `T(handle; borrowed)` with the same adopt/IncRef rule. A
# docstring written before `@_object_wrapper T` documents T.
macro _object_wrapper(T)
    name = string(T)
    quote
        Base.@__doc__ mutable struct $(esc(T)) <: AbstractTVMObject
            handle::Ptr{Cvoid}
            function $(esc(T))(handle::Ptr{Cvoid}; borrowed::Bool)
                handle == C_NULL && throw(ArgumentError(string($name, ": NULL handle")))
                borrowed && TVMFFIObjectIncRef(handle)
                return finalizer(_release_handle!, new(handle))
            end
        end
    end
end

# `deepcopy`: Julia's default copies the `handle` field as plain bits, i.e. a second wrapper of
# the same reference without an IncRef or a finalizer, which dangles once the original is
# collected. A deep copy of an FFI value is a new wrapper holding its own reference to the same
# object: Array, Map, Shape, String-like values, functions, modules and reflected objects are
# immutable or identity-bearing (as `deepcopy` of a Julia function returns it). The mutable
# containers (`TVMList`, `TVMDict`) are copied element by element (containers.jl), and a
# `TVMTensor`, whose memory may be anyone's, is an error (tensor.jl).
function Base.deepcopy_internal(x::AbstractTVMObject, d::IdDict)
    key = _copy_key(x)
    haskey(d, key) && return d[key]::typeof(x)
    y = typeof(x)(_live_handle(x); borrowed = true)
    d[key] = y
    return y
end

_live_handle(x) = (h = x.handle; h == C_NULL && throw(ArgumentError("$(typeof(x)): object was released")); h)

"""`type_index(x)`: the object's runtime type index (e.g. 68 for a function)."""
type_index(x::Union{AbstractTVMObject,TVMError}) = Int(LibAnyFFI.object_type_index(_live_handle(x)))

"""`type_key(x)`: the object's registered type key (e.g. `"ffi.Function"`)."""
type_key(x::Union{AbstractTVMObject,TVMError}) = type_key(type_index(x))
function type_key(ti::Integer)
    info = TVMFFIGetTypeInfo(Int32(ti))
    info == C_NULL && return "<unknown type $ti>"
    return _string(unsafe_load(info).type_key)
end

"""`use_count(x)`: the object's strong reference count (for tests and debugging)."""
use_count(x::Union{AbstractTVMObject,TVMError}) = LibAnyFFI.object_strong_count(_live_handle(x))

Base.:(==)(a::AbstractTVMObject, b::AbstractTVMObject) = a.handle == b.handle
Base.hash(a::AbstractTVMObject, h::UInt) = hash(a.handle, hash(:AbstractTVMObject, h))

function Base.show(io::IO, x::TVMObject)
    if x.handle == C_NULL
        print(io, "TVMObject(<released>)")
    else
        print(io, "TVMObject(", type_key(x), " @ ", repr(UInt(x.handle)), ")")
    end
end

# --- Keep-alive registry for Julia values that C holds (callbacks, exported arrays) ----------
#
# A Julia function or array handed to C (TVMFFIFunctionCreate, a DLPack export) is referenced
# only through a raw pointer to a `_KeepAlive` box, so the box must be rooted. C releases it by
# calling a deleter, which may run inside a finalizer (an object's last DecRef) or in the middle
# of our own code. The deleter therefore never touches the registry: it clears the box (plain
# stores) and bumps an atomic counter; dead boxes are swept out the next time a box is added
# (outside any finalizer, under a lock). Deleters run on the thread that drops the last
# reference, which the library guarantees is a thread that called in.

mutable struct _KeepAlive
    value::Any
    alive::Bool
end

const KEEPALIVE = IdDict{_KeepAlive,Nothing}()
const KEEPALIVE_LOCK = ReentrantLock()
const KEEPALIVE_DEAD = Threads.Atomic{Int}(0)

function _keepalive!(value)
    box = _KeepAlive(value, true)
    lock(KEEPALIVE_LOCK)
    try
        dead = KEEPALIVE_DEAD[]
        if dead >= 64 && dead >= length(KEEPALIVE) >> 2
            n0 = length(KEEPALIVE)
            filter!(kv -> first(kv).alive, KEEPALIVE)
            Threads.atomic_sub!(KEEPALIVE_DEAD, n0 - length(KEEPALIVE))
        end
        KEEPALIVE[box] = nothing
    finally
        unlock(KEEPALIVE_LOCK)
    end
    return box
end

# Called from deleters (possibly inside a finalizer): stores only.
@inline function _mark_dead!(box::_KeepAlive)
    if box.alive
        box.alive = false
        box.value = nothing
        Threads.atomic_add!(KEEPALIVE_DEAD, 1)
    end
    return nothing
end

"""Number of Julia values (callbacks, exported arrays) the library still references."""
live_callbacks() = lock(() -> count(kv -> first(kv).alive, KEEPALIVE), KEEPALIVE_LOCK)
