# Functions: calling ffi.Function objects, Julia callbacks, the global registry
# (c_api.h: Function API; spec §5 calling convention, §6 registry).
#
# Calls: the arguments become a stack tuple of TVMFFIAny views (`_arg`, any.jl), the result a
# zero-initialised TVMFFIAny; both are passed by `Ref` straight to `ccall`, and everything the
# views point into is GC-preserved until the call returns. Temporaries made for the call
# (strings with NUL bytes, functions made from Julia functions, containers) are released
# right after it.
#
# Callbacks: one static `@cfunction` trampoline (made in `__init__`) serves every Julia
# callable. `self` is a pointer to the callable's `_KeepAlive` box (object.jl), which stays
# rooted until the library calls the deleter. The trampoline catches every Julia exception and
# raises it as an ffi.Error (error.jl, `error_kind`); nothing unwinds through Rust. The library
# calls callbacks and deleters only on the thread that called into it, which is a Julia thread.

"""
    TVMFunction(f)                                 # an ffi.Function that calls a Julia callable
    TVMFunction(handle::Ptr{Cvoid}; borrowed::Bool)

A reference to an `ffi.Function` (type index 68). Call it as `f(args...)`: arguments are
converted as described in `any.jl` (Julia arrays as borrowed DLTensor views, no copy) and the
result is converted back to a Julia value; an error raised inside becomes a `TVMError`.
"""
@_object_wrapper TVMFunction

const TRAMPOLINE = Ref{Ptr{Cvoid}}(C_NULL)
const CALLBACK_DELETER = Ref{Ptr{Cvoid}}(C_NULL)

TVMFunction(f::TVMFunction) = f
function TVMFunction(f)
    # a value with no call methods would only fail when the library calls it
    f isa Base.Callable || !isempty(methods(f)) ||
        throw(ArgumentError("TVMFunction: $(typeof(f)) is not callable"))
    box = _keepalive!(f)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    rc = TVMFFIFunctionCreate(pointer_from_objref(box), TRAMPOLINE[], CALLBACK_DELETER[], out)
    if rc != 0
        _mark_dead!(box)
        check_call(rc)
    end
    return TVMFunction(out[]; borrowed = false)
end

function Base.show(io::IO, f::TVMFunction)
    _released(f) ? print(io, "TVMFunction(<released>)") :
        print(io, "TVMFunction(@ ", repr(UInt(f.handle)), ")")
end

# --- Calling ---------------------------------------------------------------------------------

@inline function (f::TVMFunction)()
    h = _live_handle(f)
    argv = Ref(ANY_NONE)  # never read (0 arguments); a valid pointer all the same
    result = Ref(ANY_NONE)
    rc = GC.@preserve f ccall(LibAnyFFI.PTR_TVMFFIFunctionCall[], Cint,
                              (Ptr{Cvoid}, Ref{TVMFFIAny}, Int32, Ref{TVMFFIAny}),
                              h, argv, Int32(0), result)
    rc == 0 || throw(_fetch_error(rc))
    return _from_any_owned(result[])
end

# Calls with up to this many arguments are specialised on their number (the views in a stack
# tuple); longer ones (a splatted collection: `f(xs...)`, `TVMArray(xs)`, `TVMMap(d)`) put
# them in a vector. A `Vararg{Any,N}` specialisation compiles in time quadratic in N (10,000
# arguments: 17 s, again for each new N) and segfaults Julia's compiler near N = 10^6.
const MAX_TUPLE_ARGS = 32

@inline function (f::TVMFunction)(args...)
    # (a separate call, not `args = map(...)`: rebinding `args` made every call type-unstable)
    _has_array(args...) && _stores_args(f) && return _call_args(f, map(_owned_elem, args))
    return _call_args(f, args)
end
@inline _call_args(f::TVMFunction, args::Tuple) =
    length(args) <= MAX_TUPLE_ARGS ? _call_tuple(f, args...) : _call_vec(f, args)

# Built-in globals that keep their arguments (containers and their setters).
const STORING_GLOBALS = ("ffi.Array", "ffi.List", "ffi.Map", "ffi.Dict", "ffi.ListAppend",
                         "ffi.ListInsert", "ffi.ListSetItem", "ffi.DictSetItem")
# (by dispatch, folded at compile time: `any` over a tuple of mixed types boxed each element,
# nop(1, 2.5, true) 11 -> 43 ns)
@inline _is_array(::Union{AbstractArray,TensorView}) = true
@inline _is_array(::Any) = false
@inline _has_array(args...) = any(map(_is_array, args))
# Their handles, looked up once (GLOBAL_CACHE keeps the functions, so a handle is never
# reused); `__init__` resets it. A lookup per call (a lock and a Dict per name) made every call
# with an array 40x slower (nop(::Vector) 25 -> 990 ns).
const STORING_HANDLES = Ptr{Cvoid}[]
const STORING_READY = Threads.Atomic{Bool}(false)
@noinline function _find_storing_handles()
    lock(GLOBAL_CACHE_LOCK) do
        STORING_READY[] && return
        empty!(STORING_HANDLES)
        for name in STORING_GLOBALS
            g = _global(name)
            g === nothing || push!(STORING_HANDLES, g.handle)
        end
        STORING_READY[] = true
    end
    return nothing
end
@inline function _stores_args(f::TVMFunction)
    STORING_READY[] || _find_storing_handles()
    h = _live_handle(f)
    for s in STORING_HANDLES
        s == h && return true
    end
    return false
end

@inline function _call_tuple(f::TVMFunction, args::Vararg{Any,N}) where {N}
    h = _live_handle(f)
    conv = map(_arg, args)
    argv = Ref(map(first, conv))
    keeps = map(last, conv)
    _hold_args(args, keeps)
    map(_register_view, keeps)  # (unrolled: `foreach` over a tuple of mixed keeps boxes them)
    result = Ref(ANY_NONE)
    rc = GC.@preserve f args keeps ccall(LibAnyFFI.PTR_TVMFFIFunctionCall[], Cint,
                                         (Ptr{Cvoid}, Ref{NTuple{N,TVMFFIAny}}, Int32, Ref{TVMFFIAny}),
                                         h, argv, Int32(N), result)
    return _call_result(rc, result[], keeps)
end

@inline _release_keeps(keeps) = foreach(_release_keep, keeps)
@inline _release_keeps(keeps::Tuple{}) = nothing
@inline _release_keeps(keeps::Tuple) = (_release_keep(first(keeps)); _release_keeps(Base.tail(keeps)))

# The result of a call (error code `rc`, result slot `r`) as a Julia value; the call's
# temporaries `keeps` are released either way.
@inline function _call_result(rc::Cint, r::TVMFFIAny, keeps)
    if rc != 0
        _release_keeps(keeps)
        throw(_fetch_error(rc))
    end
    r.type_index == kTVMFFIDLTensorPtr && return _tensor_result_released(r, keeps)
    out = _from_any_owned(r)
    _release_keeps(keeps)
    return out
end
# A DLTensor* result is a borrowed view. When it is one of our own argument views (echo), give
# that view back: it keeps its array alive. Otherwise copy the metadata (see TensorView); that
# can fail (more than MAX_NDIM dimensions), and the argument views leave ARG_VIEWS all the same.
@inline function _tensor_result_released(r::TVMFFIAny, keeps)
    p = any_ptr(r)
    tv = _echoed_view(p, keeps)
    tv === nothing || (_release_keeps(keeps); return tv)
    return _foreign_result_view(p, keeps)
end
# The call's own argument view at `p` (a function that returned its argument), or nothing.
@inline function _echoed_view(p::Ptr{Cvoid}, keeps)
    for k in keeps
        k isa TensorView && pointer_from_objref(k) == p && return k
    end
    return nothing
end
@noinline function _foreign_result_view(p::Ptr{Cvoid}, keeps)
    tv = try
        TensorView(Ptr{DLTensor}(p))
    catch
        _release_keeps(keeps)
        rethrow()
    end
    _release_keeps(keeps)
    return tv
end

# The arguments of a call as vectors of views and of what keeps them valid (calls too long for
# a stack tuple, and `call_any`), held (`_hold_args`); on a failure, earlier temporaries go to
# their finalizers.
function _arg_vectors(args::Tuple)
    n = length(args)
    anys = Vector{TVMFFIAny}(undef, n)
    keeps = Vector{Any}(undef, n)
    for i in 1:n
        anys[i], keeps[i] = _arg(args[i])
    end
    _hold_args(args, keeps)
    return anys, keeps
end

@noinline function _call_vec(f::TVMFunction, args::Tuple)
    h = _live_handle(f)
    anys, keeps = _arg_vectors(args)
    foreach(_register_view, keeps)
    result = Ref(ANY_NONE)
    rc = GC.@preserve f args keeps anys result TVMFFIFunctionCall(
        h, Ptr{Cvoid}(pointer(anys)), length(anys), Base.unsafe_convert(Ptr{Cvoid}, result))
    return _call_result(rc, result[], keeps)
end

"""
    call_any(f::TVMFunction, args...) -> TVMAny

Call `f` and return its result unconverted, as an owned `TVMAny` (see `take_value`,
`copy_value`). A `DLTensor*` result is a borrowed view, valid only as long as its producer
keeps it.
"""
function call_any(f::TVMFunction, args...)
    h = _live_handle(f)
    # the container globals keep their arguments: owned tensors, as for f(args...)
    _has_array(args...) && _stores_args(f) && (args = map(_owned_elem, args))
    # vectors, not tuples: a tuple of a million views (`call_any(f, xs...)`) never compiled
    anys, keeps = _arg_vectors(args)
    foreach(_register_view, keeps)
    result = Ref(ANY_NONE)
    rc = GC.@preserve f args keeps anys TVMFFIFunctionCall(
        h, isempty(anys) ? C_NULL : Ptr{Cvoid}(pointer(anys)), length(anys),
        Base.unsafe_convert(Ptr{Cvoid}, result))
    r = result[]
    if rc == 0 && r.type_index == kTVMFFIDLTensorPtr
        # one of our own argument views (echo) dies with this call: hand back an owned tensor
        # over the same memory instead (found without converting the result: a foreign
        # DLTensor* stays unconverted, and nothing here can throw before the release)
        k = _echoed_view(any_ptr(r), keeps)
        if k !== nothing && k.parent isa AbstractArray
            out = try
                TVMAny(to_dlpack(k.parent))
            finally
                _release_keeps(keeps)
            end
            return out
        end
    end
    _release_keeps(keeps)
    check_call(rc)
    return TVMAny(r; borrowed = false)
end

# --- Argument views seen by callbacks --------------------------------------------------------

# Per thread, the TensorViews of Julia arrays that calls running on it pass as arguments (a
# stack: nested calls push on top). A callback receiving the DLTensor* of one of them gets that
# very view, whose `parent` keeps the caller's array alive: what the callback keeps of it
# (`unsafe_array`, `to_dlpack`, an element of a container) stays valid after the call, also when
# the caller's array was a temporary. A DLTensor* of a foreign caller gets a borrowed view,
# closed when the callback returns (`_close_view!`). Registered after a call's arguments are
# converted, removed when its temporaries are released.
const ARG_VIEWS = Vector{Vector{Any}}()  # per thread: the slots (`nothing` when free)
const ARG_VIEWS_TOP = Int[]               # per thread: how many slots are in use
# (fixed slots and a count rather than push!/deleteat!, each a C call in Julia 1.5)

@inline _register_view(::Any) = nothing
# (views of Julia arrays only; `=== nothing` is a pointer compare, `isa AbstractArray` a
# subtype walk)
@inline _owns_memory(tv::TensorView) = (p = tv.parent; p !== nothing && !(p isa _ClosedView))
@inline function _register_view(tv::TensorView)
    _owns_memory(tv) || return nothing
    tid = Threads.threadid()
    v = @inbounds ARG_VIEWS[tid]
    n = @inbounds(ARG_VIEWS_TOP[tid]) + 1
    n > length(v) && _grow_views!(v, n)
    @inbounds v[n] = tv
    @inbounds ARG_VIEWS_TOP[tid] = n
    return nothing
end

@noinline _grow_views!(v::Vector{Any}, n::Int) = (append!(v, fill(nothing, n)); nothing)

@inline function _unregister_view(tv::TensorView)
    _owns_memory(tv) || return nothing
    tid = Threads.threadid()
    v = @inbounds ARG_VIEWS[tid]
    n = @inbounds ARG_VIEWS_TOP[tid]
    @inbounds for i in n:-1:1
        if v[i] === tv
            for j in i:n-1
                v[j] = v[j + 1]
            end
            v[n] = nothing
            ARG_VIEWS_TOP[tid] = n - 1
            break
        end
    end
    return nothing
end

# The view for a DLTensor* argument of a callback (see ARG_VIEWS).
function _dltensor_arg_view(p::Ptr{Cvoid})
    tid = Threads.threadid()
    v = ARG_VIEWS[tid]
    for i in ARG_VIEWS_TOP[tid]:-1:1
        tv = v[i]
        pointer_from_objref(tv) == p && return tv::TensorView
    end
    return TensorView(Ptr{DLTensor}(p))
end

# --- The callback trampoline -----------------------------------------------------------------

@inline _cb_arg(args::Ptr{TVMFFIAny}, i::Integer) = _from_any_borrowed(unsafe_load(args, i))

"""
Most Julia callbacks one thread may have active at once (callback -> FFI call -> callback ...).
Deeper nesting raises an error instead of overflowing the stack: a stack overflow inside the
library's frames cannot be recovered (Julia's handler then deadlocks or aborts the process).
"""
const MAX_CALLBACK_DEPTH = Ref(1000)

"""
Bytes of stack a Julia callback must find left on its task to start (at most a quarter of the
task's stack is asked for). With less, the callback raises a `RecursionError` instead of
running: callbacks that each recurse deeply in Julia overflow the stack before
`MAX_CALLBACK_DEPTH` nested calls, and the error a callback raises needs stack of its own
(formatting, and compiling what formats it the first time).
"""
const CALLBACK_STACK_RESERVE = Ref(1 << 20)

# Callback nesting depth, kept per task with a per-thread fast path (all sized in `__init__`):
# CALLBACK_DEPTH[tid] is the depth of STACK_TASK[tid], the task that last entered or left a
# callback on the thread; when another task does, `_switch_task!` files the old task's depth
# (if it is inside callbacks, suspended: a callback that yields) in SUSPENDED_DEPTHS[tid] and
# takes out the new one's. So tasks interleaving on a thread count apart (1000 tasks waiting
# inside callbacks are not recursion), at a pointer compare per entry and exit. A task does
# not move between threads in Julia 1.5 (see the README for 1.7+).
const CALLBACK_DEPTH = Int[]
const SUSPENDED_DEPTHS = IdDict{Any,Int}[]

# Per thread (sized in `__init__`): the task whose depth and stack are described, its stack's
# lowest address and size (0 and 0 when the runtime cannot tell, which turns the stack check
# off). The task is held, so the slot cannot describe a collected task's successor at the same
# address.
const STACK_TASK = Any[]
const STACK_BASE = UInt[]
const STACK_SIZE = UInt[]

@inline _frame_address() = Base.llvmcall(("declare i8* @llvm.frameaddress(i32)",
    "%1 = call i8* @llvm.frameaddress(i32 0)\n%2 = ptrtoint i8* %1 to i64\nret i64 %2"),
    UInt64, Tuple{})

# Bytes the running task (the one in `tid`'s slot) must have left below this frame to start a
# callback: `CALLBACK_STACK_RESERVE`, or a quarter of its stack when that is less.
@inline _stack_needed(tid::Int) = min(UInt(CALLBACK_STACK_RESERVE[]), STACK_SIZE[tid] >> 2)
# (stacks grow down; an unknown stack, base and size 0, always has enough)
@inline _stack_left(tid::Int) = _frame_address() - STACK_BASE[tid] >= _stack_needed(tid)

@noinline function _switch_task!(tid::Int, t::Task)
    old = STACK_TASK[tid]
    saved = SUSPENDED_DEPTHS[tid]
    old === nothing || CALLBACK_DEPTH[tid] == 0 || (saved[old] = CALLBACK_DEPTH[tid])
    CALLBACK_DEPTH[tid] = pop!(saved, t, 0)
    base, size = UInt(0), UInt(0)
    try
        n = Ref{Csize_t}(0)
        owner = Ref{Cint}(0)
        p = ccall(:jl_task_stack_buffer, Ptr{Cvoid}, (Any, Ref{Csize_t}, Ref{Cint}), t, n, owner)
        # the running task's stack holds this frame; anything else is not a description of it
        if p != C_NULL && UInt(p) < _frame_address() < UInt(p) + n[]
            base, size = UInt(p), UInt(n[])
        end
    catch  # a runtime without `jl_task_stack_buffer`: the depth limit alone guards
    end
    STACK_TASK[tid] = t
    STACK_BASE[tid] = base
    STACK_SIZE[tid] = size
    return nothing
end

# The running task's slot on its thread (switched to it when another task used it last).
@inline function _task_slot()
    tid = Threads.threadid()
    t = current_task()
    STACK_TASK[tid] === t || _switch_task!(tid, t)
    return tid
end

function _safe_call_trampoline(self::Ptr{Cvoid}, args::Ptr{TVMFFIAny}, n::Int32,
                               result::Ptr{TVMFFIAny})::Cint
    tid = _task_slot()
    d = CALLBACK_DEPTH[tid]
    d < MAX_CALLBACK_DEPTH[] || return _callbacks_too_deep()
    _stack_left(tid) || return _stack_too_short(tid, d)
    CALLBACK_DEPTH[tid] = d + 1
    # one `try` (a setjmp, ~10 ns): the depth is decremented on both paths, not in a `finally`;
    # the slot is looked up again, as other tasks may have run callbacks here meanwhile
    try
        _call_callback(self, args, n, result)
        CALLBACK_DEPTH[_task_slot()] -= 1
        return Cint(0)
    catch e
        CALLBACK_DEPTH[_task_slot()] -= 1
        _raise_julia_exception(e, catch_backtrace())
        return Cint(-1)
    end
end

@noinline function _callbacks_too_deep()::Cint
    _raise_recursion_error(
        "AnyFFI: Julia callbacks nested more than $(MAX_CALLBACK_DEPTH[]) deep on one task " *
        "(unbounded recursion through the FFI?); AnyFFI.MAX_CALLBACK_DEPTH[] sets the limit")
end

@noinline function _stack_too_short(tid::Int, depth::Int)::Cint
    _raise_recursion_error(
        "AnyFFI: a Julia callback nested $depth deep found less than " *
        "$(_stack_needed(tid) >> 10) KiB of its task's stack left (deep recursion through " *
        "the FFI?); AnyFFI.CALLBACK_STACK_RESERVE[] sets the reserve")
end

function _raise_recursion_error(msg::String)::Cint
    try
        throw(TVMError("RecursionError", msg))
    catch e
        _raise_julia_exception(e, catch_backtrace())
    end
    return Cint(-1)
end

function _call_callback(self::Ptr{Cvoid}, args::Ptr{TVMFFIAny}, n::Int32, result::Ptr{TVMFFIAny})
    f = (unsafe_pointer_to_objref(self)::_KeepAlive).value
    if n == 0
        _store_result!(result, f())
    elseif n == 1
        a1 = _cb_arg(args, 1)
        try
            _store_result!(result, f(a1))
        finally
            _close_view!(a1)
        end
    elseif n == 2
        a1, a2 = _cb_arg(args, 1), _cb_arg(args, 2)
        try
            _store_result!(result, f(a1, a2))
        finally
            _close_view!(a1); _close_view!(a2)
        end
    else
        av = Any[_cb_arg(args, i) for i in 1:n]
        try
            _store_result!(result, f(av...))
        finally
            foreach(_close_view!, av)
        end
    end
    return nothing
end

# Behind a function barrier, so the dynamically typed `ret` costs one dispatch and the
# 16-byte result is not boxed on the way back.
_store_result!(result::Ptr{TVMFFIAny}, ret) = (unsafe_store!(result, _to_owned_any(ret)); nothing)

# Called by the library when the last reference to a callback's function object goes; may run
# inside a finalizer (see _mark_dead!).
function _callback_deleter(self::Ptr{Cvoid})::Cvoid
    self == C_NULL || _mark_dead!(unsafe_pointer_to_objref(self)::_KeepAlive)
    return
end

# --- The global registry ---------------------------------------------------------------------

_bytearray(s::String) = TVMFFIByteArray(pointer(s), sizeof(s))

"""
    get_global_func(name) -> Union{TVMFunction,Nothing}

The global function registered as `name` (a new reference), or `nothing`.
"""
function get_global_func(name::AbstractString)
    s = String(name)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve s check_call(TVMFFIFunctionGetGlobal(Ref(_bytearray(s)), out))
    return out[] == C_NULL ? nothing : TVMFunction(out[]; borrowed = false)
end

"""
    register_global_func(name, f; override = false) -> TVMFunction
    register_global_func(name; override = false) do args...  ...  end

Register a Julia callable (or a `TVMFunction`) as the global function `name`. Registering an
existing name fails with a `TVMError` unless `override = true`. The registry keeps its own
reference; the Julia callable stays alive until the entry is removed or overridden.
"""
function register_global_func(name::AbstractString, f; override::Bool = false)
    isempty(name) && throw(ArgumentError("register_global_func: the name is empty"))
    fn = TVMFunction(f)
    s = String(name)
    GC.@preserve s fn check_call(TVMFFIFunctionSetGlobal(Ref(_bytearray(s)), fn.handle, override))
    return fn
end
register_global_func(f::Function, name::AbstractString; override::Bool = false) =
    register_global_func(name, f; override = override)

"""
    remove_global_func(name) -> Bool

Remove a global function (`ffi.FunctionRemoveGlobal`); `false` if there was none.
"""
remove_global_func(name::AbstractString) = _require_global("ffi.FunctionRemoveGlobal")(String(name))::Bool

"""
    list_global_func_names() -> Vector{String}

Names of every registered global function (`ffi.FunctionListGlobalNamesFunctor`).
"""
function list_global_func_names()
    names_of = _require_global("ffi.FunctionListGlobalNamesFunctor")()::TVMFunction
    n = names_of(-1)::Int64
    return String[names_of(i)::String for i in 0:n-1]
end

"""
    global_func_metadata(name) -> String

The metadata JSON of a global function (`ffi.GetGlobalFuncMetadata`; `""` when none).
"""
global_func_metadata(name::AbstractString) = _require_global("ffi.GetGlobalFuncMetadata")(String(name))::String
