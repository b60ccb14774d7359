# TVMError and the error protocol in both directions (c_api.h: Error API; spec §1.1, §5.3).
#
# C -> Julia: a non-zero return code means an `ffi.Error` waits in the thread's TLS slot;
# `check_call` moves it out and throws it as a `TVMError` (kind, message, backtrace kept).
# Julia -> C: the callback trampoline (function.jl) catches every Julia exception, turns it into
# an `ffi.Error` whose kind comes from `error_kind` below, raises it and returns -1. A Julia
# exception never unwinds through Rust frames.

"""
    TVMError(kind, message; backtrace = "")
    TVMError(handle::Ptr{Cvoid}; borrowed::Bool)

An `ffi.Error` as a Julia exception: `kind` (`"ValueError"`, `"TypeError"`, ...), `message`,
and `backtrace` (the library's format, most recent call first). Errors that come from the
library keep their object handle, so rethrowing one from a callback re-raises the same object.
Throw `TVMError(kind, msg)` from a Julia callback to choose the kind its caller sees.
"""
mutable struct TVMError <: Exception
    kind::String
    message::String
    backtrace::String
    handle::Ptr{Cvoid}  # owned ffi.Error, or C_NULL for errors made in Julia
    pins::UInt          # calls holding it, and the released bit (object.jl, _pin!)

    function TVMError(kind::AbstractString, message::AbstractString; backtrace::AbstractString = "")
        return new(String(kind), String(message), String(backtrace), C_NULL, UInt(0))
    end
    function TVMError(handle::Ptr{Cvoid}; borrowed::Bool)
        handle == C_NULL && throw(ArgumentError("TVMError: NULL handle"))
        cell = unsafe_load(Ptr{LibAnyFFI.TVMFFIErrorCell}(handle + LibAnyFFI.OBJECT_HEADER_SIZE))
        borrowed && TVMFFIObjectIncRef(handle)
        e = new(_string(cell.kind), _string(cell.message), _string(cell.backtrace), handle, UInt(0))
        return finalizer(_release_handle!, e)
    end
end

# deepcopy: its own reference to the same ffi.Error (the default copied the handle without one)
function Base.deepcopy_internal(e::TVMError, d::IdDict)
    haskey(d, e) && return d[e]::TVMError
    y = e.handle == C_NULL ? TVMError(e.kind, e.message; backtrace = e.backtrace) :
        TVMError(e.handle; borrowed = true)
    d[e] = y
    return y
end

_string(b::TVMFFIByteArray) = b.data == C_NULL ? "" : unsafe_string(b.data, b.size)

function Base.showerror(io::IO, e::TVMError)
    print(io, "TVMError: ", e.kind, ": ", e.message)
    if !isempty(e.backtrace)
        print(io, "\nFFI backtrace (most recent call first):\n", rstrip(e.backtrace))
    end
end
Base.show(io::IO, e::TVMError) = print(io, "TVMError(", repr(e.kind), ", ", repr(e.message), ")")

"""
    check_call(rc)

After a C call: 0 is success; otherwise move the raised error out of TLS and throw it as a
`TVMError`. A non-zero code with no error raised is reported as an `InternalError`, never
ignored.
"""
@inline check_call(rc::Integer) = rc == 0 ? nothing : throw(_fetch_error(rc))

@noinline function _fetch_error(rc::Integer)
    h = TVMFFIErrorMoveFromRaised()
    h == C_NULL && return TVMError("InternalError",
        "an FFI call returned $rc but raised no error (no error in the thread's TLS slot)")
    e = TVMError(h; borrowed = false)
    # an interrupt (Ctrl-C in a Julia callback, a KeyboardInterrupt in a Python one) stays an
    # interrupt: code that stops on `InterruptException` sees one
    if e.kind == "KeyboardInterrupt"
        release!(e)
        return InterruptException()
    end
    return e
end

"""
    error_kind(e) -> String

The `ffi.Error` kind a Julia exception becomes when it leaves a Julia callback:

| Julia exception                                                        | kind           |
|------------------------------------------------------------------------|----------------|
| `TVMError`                                                             | its own `kind` |
| `ArgumentError`, `DomainError`, `InexactError`, `OverflowError`, `DimensionMismatch` | `ValueError` |
| `MethodError`, `TypeError`, `UndefKeywordError`                        | `TypeError`    |
| `BoundsError`                                                          | `IndexError`   |
| `KeyError`                                                             | `KeyError`     |
| `StackOverflowError`                                                   | `RecursionError` |
| `InterruptException` (comes back from a call as an `InterruptException`) | `KeyboardInterrupt` |
| `OutOfMemoryError`                                                     | `MemoryError`  |
| anything else (`ErrorException` from `error(...)`, ...)                | `RuntimeError` |
"""
error_kind(e::TVMError) = e.kind
error_kind(::Union{ArgumentError,DomainError,InexactError,OverflowError,DimensionMismatch}) = "ValueError"
error_kind(::Union{MethodError,TypeError,UndefKeywordError}) = "TypeError"
error_kind(::BoundsError) = "IndexError"
error_kind(::KeyError) = "KeyError"
error_kind(::StackOverflowError) = "RecursionError"
error_kind(::InterruptException) = "KeyboardInterrupt"
error_kind(::OutOfMemoryError) = "MemoryError"
error_kind(::Any) = "RuntimeError"

error_message(e::TVMError) = e.message
error_message(e::Union{ErrorException,ArgumentError}) = e.msg
error_message(::StackOverflowError) = "StackOverflowError: the callback overflowed its task's stack"
error_message(e::Exception) = sprint(showerror, e)
error_message(e) = string("non-exception value thrown: ", repr(e))

# Julia frames in the library's backtrace format, most recent first, up to the trampoline.
# Frames are looked up one at a time and the walk stops at the trampoline: `stacktrace(bt)`
# symbolised the whole stack below it too (~25 ms per callback exception). At most
# `max_frames` are written (a stack overflow made ~40,000 lines).
function _format_backtrace(bt; max_frames::Int = 64)
    io = IOBuffer()
    n = 0
    for ip in bt
        for fr in _lookup_frames(ip)
            fr.from_c && continue
            fr.func === :_safe_call_trampoline && return String(take!(io))
            if n == max_frames
                print(io, "  ... (more frames)\n")
                return String(take!(io))
            end
            print(io, "  File \"", fr.file, "\", line ", fr.line, ", in ", fr.func, "\n")
            n += 1
        end
    end
    return String(take!(io))
end

# `StackTraces.lookup` of a frame in the system image reads its debug information each time
# (~4 ms on Julia 1.5: an `error("...")` in a callback costs 4.6 ms, 100x a `throw`); code
# addresses are never reused, so the frames of an address are cached (bounded).
const FRAME_CACHE = Dict{Any,Vector{Base.StackTraces.StackFrame}}()
const FRAME_CACHE_LOCK = ReentrantLock()
function _lookup_frames(ip)
    fr = lock(() -> get(FRAME_CACHE, ip, nothing), FRAME_CACHE_LOCK)
    fr === nothing || return fr
    fr = Base.StackTraces.lookup(ip)
    lock(FRAME_CACHE_LOCK) do
        length(FRAME_CACHE) >= 4096 && empty!(FRAME_CACHE)
        FRAME_CACHE[ip] = fr
    end
    return fr
end

# New ffi.Error object (+1), or C_NULL when the library cannot make one.
function _new_error_handle(kind::String, msg::String, bt::String)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    rc = GC.@preserve kind msg bt begin
        TVMFFIErrorCreate(Ref(TVMFFIByteArray(pointer(kind), sizeof(kind))),
                          Ref(TVMFFIByteArray(pointer(msg), sizeof(msg))),
                          Ref(TVMFFIByteArray(pointer(bt), sizeof(bt))), out)
    end
    return rc == 0 ? out[] : C_NULL
end

# Raise `e` (caught in a callback) as the thread's FFI error. Never throws.
function _raise_julia_exception(@nospecialize(e), bt)
    try
        if e isa TVMError && e.handle != C_NULL
            TVMFFIErrorSetRaised(e.handle)  # the slot takes its own reference
            return
        end
        kind = error_kind(e)::String
        msg = error_message(e)::String
        trace = e isa TVMError && !isempty(e.backtrace) ? e.backtrace : _format_backtrace(bt)
        h = _new_error_handle(kind, msg, trace)
        if h == C_NULL
            TVMFFIErrorSetRaisedFromCStr(kind, replace(msg, '\0' => ' '))
        else
            TVMFFIErrorSetRaised(h)
            TVMFFIObjectDecRef(h)
        end
    catch
        # Formatting failed (e.g. a broken showerror method): still raise something.
        TVMFFIErrorSetRaisedFromCStr("RuntimeError", "Julia callback failed (and formatting its error failed too)")
    end
    return
end

# Handle of a TVMError as an object to pass to C (+1 new one made when it has none; one
# compare-and-swap, so two threads passing a new error at once do not both install one).
# A released error has none to pass (`release!`: unusable after).
function _error_handle!(e::TVMError)
    h = e.handle
    h == C_NULL || return h
    e.pins & _RELEASED == 0 || throw(_released_error(e))
    h = _new_error_handle(e.kind, e.message, e.backtrace)
    h == C_NULL && throw(TVMError("InternalError", "TVMFFIErrorCreate failed"))
    old = GC.@preserve e _atomic_cas!(_field_ptr(e, Val(:handle)), UInt(0), UInt(h))
    if old != 0  # another thread's came first
        TVMFFIObjectDecRef(h)
        return Ptr{Cvoid}(old)
    end
    finalizer(_release_handle!, e)
    return h
end
