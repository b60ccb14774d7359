# Objects: handle lifetime (c_api.h: Basic object API; spec §2.2, §3).
#
# Every wrapper owns exactly one strong reference. Its constructor takes `borrowed::Bool` with
# no default, so each call site states where the reference came from:
#   borrowed = false  the handle is a new reference we adopt   (call results, *out params,
#                     TVMFFIFunctionGetGlobal, TVMFFIErrorMoveFromRaised)
#   borrowed = true   someone else keeps theirs; we IncRef      (callback arguments, container
#                     elements, fields read in place)
# The finalizer gives the reference back (one DecRef, deferred to the last call holding the
# object, see _pin!) and nothing else (no printing, no locks, no allocation).

"""
    AbstractTVMObject

Supertype of the wrappers of reference-counted FFI objects (`TVMObject`, `TVMFunction`,
`TVMTensor`, `TVMShape`, `TVMArray`, `TVMList`, `TVMMap`, `TVMDict`, `TVMModule`). Each holds
one strong reference in its `handle` field, released by its finalizer.
"""
abstract type AbstractTVMObject end

# The only thing finalizers do: give our reference back, now or (while calls on other threads
# pass the object) when the last of those calls returns.
#
# Calls hold the wrapper's reference for their duration ("pins"): `finalize(t)` or `release!(t)`
# on one thread while another thread's call passes `t` gave the reference back under the call,
# which then used a freed object (session 21 audit). Every wrapper has a `pins` word: bit 63
# says released, the low bits count the calls in flight. A call pins each object argument
# after converting it (`_pin!`, one atomic add) and unpins it when its keeps are released (one
# atomic sub); `release!` sets the released bit (one atomic or) and gives the reference back
# only if no call holds the object; otherwise the last unpin does. Exactly one party sees the
# word become "released, no pins", and the handle is taken out with one atomic exchange
# besides, so the reference goes back once. A pin that finds the object released undoes itself
# and fails: the call raises "object was released". An IncRef per argument (what the Python
# binding does under the GIL) would not be sound here: with no GIL, the object can be freed
# between reading the handle and the IncRef. Atomics only: finalizers may not take locks.
const _RELEASED = UInt(1) << 63

# (generated: Julia 1.5 computed `fieldoffset(T, fieldindex(T, f))` with two C calls each time)
@generated _field_offset(::T, ::Val{f}) where {T,f} = UInt(fieldoffset(T, Base.fieldindex(T, f)))
@inline _field_ptr(x, v::Val) = Ptr{UInt}(pointer_from_objref(x) + _field_offset(x, v))

# `_atomic_<op>!(p, v)`: one `atomicrmw <op>` (acq_rel) on the word at `p`, returning the old value.
# The IR keeps typed pointers (`i64*`) on purpose: LLVM's parser reads them in both pointer modes
# and in every version Julia has used (checked with llvm-as 14, 16 with and without opaque
# pointers, and 19, which Julia 1.12+ builds on), while `ptr` fails in typed-pointer mode (Julia
# up to 1.10). The same holds for `_frame_address` (function.jl).
for op in (:xchg, :add, :sub, :or)
    ir = """
        %ptr = inttoptr i64 %0 to i64*
        %old = atomicrmw $op i64* %ptr, i64 %1 acq_rel
        ret i64 %old
        """
    @eval @inline $(Symbol(:_atomic_, op, :!))(p::Ptr{UInt}, v::UInt) =
        Base.llvmcall($ir, UInt, Tuple{Ptr{UInt},UInt}, p, v)
end

@inline _atomic_cas!(p::Ptr{UInt}, cmp::UInt, new::UInt) = Base.llvmcall("""
    %ptr = inttoptr i64 %0 to i64*
    %r = cmpxchg i64* %ptr, i64 %1, i64 %2 acq_rel acquire
    %old = extractvalue { i64, i1 } %r, 0
    ret i64 %old
    """, UInt, Tuple{Ptr{UInt},UInt,UInt}, p, cmp, new)

# Takes the handle out of `x` in one atomic exchange (a read and a store gave a reference back
# twice when two threads released one wrapper; session 21 audit).
@inline _take_handle!(x)::Ptr{Cvoid} =
    GC.@preserve x Ptr{Cvoid}(_atomic_xchg!(_field_ptr(x, Val(:handle)), UInt(0)))

# Give the reference back (only once the released bit is set and no call holds it).
@inline function _give_back!(x)
    h = _take_handle!(x)
    h != C_NULL && TVMFFIObjectDecRef(h)
    return nothing
end

function _release_handle!(x)
    old = GC.@preserve x _atomic_or!(_field_ptr(x, Val(:pins)), _RELEASED)
    old == 0 && _give_back!(x)  # not released before, and no call holds it
    return nothing
end

# A call's hold on an object argument: false (and nothing held) when it was released.
@inline function _pin!(x)::Bool
    old = GC.@preserve x _atomic_add!(_field_ptr(x, Val(:pins)), UInt(1))
    old & _RELEASED == 0 && return true
    _unpin!(x)
    return false
end
@inline function _unpin!(x)
    old = GC.@preserve x _atomic_sub!(_field_ptr(x, Val(:pins)), UInt(1))
    old == _RELEASED | UInt(1) && _give_back!(x)  # released while held, and ours was the last hold
    return nothing
end
_released(x) = getfield(x, :pins) & _RELEASED != 0 || x.handle == C_NULL

"""
    release!(x)

Give an object's reference back now instead of at garbage collection; `x` is unusable after.
Calls already running on other threads with `x` as an argument keep it until they return.
"""
release!(x::Union{AbstractTVMObject,TVMError}) = _release_handle!(x)

"""
    TVMObject(handle::Ptr{Cvoid}; borrowed::Bool)

A reference to an FFI object of any type (those without a more specific wrapper: reflected
objects, `ffi.OpaquePyObject`, user types).
"""
mutable struct TVMObject <: AbstractTVMObject
    handle::Ptr{Cvoid}
    pins::UInt  # calls holding it, and the released bit (see _pin!)
    function TVMObject(handle::Ptr{Cvoid}; borrowed::Bool)
        handle == C_NULL && throw(ArgumentError("TVMObject: NULL handle"))
        borrowed && TVMFFIObjectIncRef(handle)
        return finalizer(_release_handle!, new(handle, UInt(0)))
    end
end

# Shared by every object wrapper: `T(handle; borrowed)` with the same adopt/IncRef rule. A
# docstring written before `@_object_wrapper T` documents T.
macro _object_wrapper(T)
    name = string(T)
    quote
        Base.@__doc__ mutable struct $(esc(T)) <: AbstractTVMObject
            handle::Ptr{Cvoid}
            pins::UInt
            function $(esc(T))(handle::Ptr{Cvoid}; borrowed::Bool)
                handle == C_NULL && throw(ArgumentError(string($name, ": NULL handle")))
                borrowed && TVMFFIObjectIncRef(handle)
                return finalizer(_release_handle!, new(handle, UInt(0)))
            end
        end
    end
end

# `deepcopy`: Julia's default copies the `handle` field as plain bits, i.e. a second wrapper of
# the same reference without an IncRef or a finalizer, which dangles once the original is
# collected. A deep copy of an FFI value is a new wrapper holding its own reference to the same
# object: Shape, String-like values, functions, modules and reflected objects are immutable
# or identity-bearing (as `deepcopy` of a Julia function returns it). The containers are
# copied element by element (containers.jl: a List or Dict always, an Array or Map rebuilt as
# what it holds may be mutable), and a `TVMTensor`, whose memory may be anyone's, is an error
# (tensor.jl).
function Base.deepcopy_internal(x::AbstractTVMObject, d::IdDict)
    key = _copy_key(x)
    haskey(d, key) && return d[key]::typeof(x)
    y = typeof(x)(_live_handle(x); borrowed = true)
    d[key] = y
    return y
end

_live_handle(x) = (h = x.handle; (h == C_NULL || getfield(x, :pins) & _RELEASED != 0) && throw(_released_error(x)); h)
@noinline _released_error(x) = ArgumentError("$(typeof(x)): object was released")

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
    if _released(x)
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
