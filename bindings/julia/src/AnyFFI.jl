"""
    AnyFFI

Julia bindings of anyffi's `libtvm_ffi.so` (the TVM FFI stable C ABI), through `ccall` only.
The API follows TVMFFI.jl: `get_global_func`, callable `TVMFunction`s, `register_global_func`,
refcounted `TVMObject`/`TVMTensor`, borrowed `TensorView`s of Julia arrays (no copy),
`TVMAny`/`TVMAnyView`, `TVMError <: Exception`.

The library is `ENV["ANYFFI_LIBRARY"]` when set, else the checkout's
`target/release/libtvm_ffi.so` (resolved in `__init__`). See `README.md` beside `src/` for the
ownership rules, the error-kind mapping and the array layout choice.
"""
module AnyFFI

using Libdl

# --- Low-level C bindings (not exported; `AnyFFI.LibAnyFFI.TVMFFI*`) ---
include("LibAnyFFI.jl")
using .LibAnyFFI
import .LibAnyFFI: DLDataType, DLDevice
using .LibAnyFFI: any_int64, any_float64, any_ptr, any_bool, any_dtype, any_device, dtype_bits,
    device_bits, ANY_NONE

# --- Public API, grouped by purpose ---
# values and devices
export DLDataType, DLDevice, BFloat16, julia_type, cpu, cuda
# objects and values
export AbstractTVMObject, TVMObject, TVMAny, TVMAnyView, take_value, copy_value,
    type_index, type_key, use_count
# errors
export TVMError
# functions and the global registry
export TVMFunction, get_global_func, register_global_func, remove_global_func,
    list_global_func_names, global_func_metadata, call_any
# tensors
export TVMTensor, TensorView, StridedView, from_dlpack, to_dlpack, unsafe_array, rowmajor, dtype, device
# containers
export TVMShape, TVMArray, TVMList, TVMMap, TVMDict
# modules
export TVMModule, load_module, get_function

# Advanced API, available but not exported: `LibAnyFFI` (raw C), `library_path()`,
# `release!(obj)` (drop a handle before the GC does), `to_dlpack_versioned`/`to_dlpack_legacy`
# (raw DLPack pointers), `live_callbacks()` (count of Julia callbacks C still references).

include("dtype.jl")       # DLDataType, DLDevice, BFloat16 and the Julia eltype mapping
include("error.jl")       # TVMError, check_call, Julia exception -> error kind
include("object.jl")      # AbstractTVMObject, TVMObject, handle lifetime
include("tensor.jl")      # TensorView (borrowed DLTensor*), TVMTensor, DLPack in/out
include("containers.jl")  # TVMShape, TVMArray/TVMList, TVMMap/TVMDict
include("module.jl")      # TVMModule, load_module
include("any.jl")         # Julia value <-> TVMFFIAny, TVMAny/TVMAnyView
include("function.jl")    # TVMFunction calls, the callback trampoline, the global registry

"""Path of the loaded `libtvm_ffi.so`."""
library_path() = LibAnyFFI.LIBPATH[]

function _find_library()
    p = get(ENV, "ANYFFI_LIBRARY", "")
    if !isempty(p)
        isfile(p) || error("AnyFFI: ANYFFI_LIBRARY=$p does not exist")
        return abspath(p)
    end
    p = normpath(joinpath(@__DIR__, "..", "..", "..", "target", "release", "libtvm_ffi.so"))
    isfile(p) && return p
    error("AnyFFI: libtvm_ffi.so not found. Set ANYFFI_LIBRARY, or run `cargo build --release` " *
          "in the anyffi checkout (looked for $p)")
end

function __init__()
    LibAnyFFI.load!(_find_library())
    # @cfunction pointers must be made at run time: one stored in a precompiled constant is stale.
    TRAMPOLINE[] = @cfunction(_safe_call_trampoline, Cint,
                              (Ptr{Cvoid}, Ptr{TVMFFIAny}, Int32, Ptr{TVMFFIAny}))
    CALLBACK_DELETER[] = @cfunction(_callback_deleter, Cvoid, (Ptr{Cvoid},))
    DLPACK_DELETER_VERSIONED[] = @cfunction(_dlpack_deleter_versioned, Cvoid,
                                            (Ptr{DLManagedTensorVersioned},))
    empty!(GLOBAL_CACHE)
    STORING_READY[] = false
    resize!(CALLBACK_DEPTH, Threads.nthreads())
    fill!(CALLBACK_DEPTH, 0)
    foreach(v -> (resize!(v, Threads.nthreads()); fill!(v, 0)), (STACK_BASE, STACK_SIZE))
    resize!(STACK_TASK, Threads.nthreads())
    fill!(STACK_TASK, nothing)
    empty!(SUSPENDED_DEPTHS)
    foreach(_ -> push!(SUSPENDED_DEPTHS, IdDict{Any,Int}()), 1:Threads.nthreads())
    empty!(ARG_VIEWS)
    foreach(_ -> push!(ARG_VIEWS, fill!(Vector{Any}(undef, 16), nothing)), 1:Threads.nthreads())
    resize!(ARG_VIEWS_TOP, Threads.nthreads())
    fill!(ARG_VIEWS_TOP, 0)
    return nothing
end

end # module AnyFFI
