# Modules: ffi.Module (73), loaded from shared libraries through `ffi.ModuleLoadFromFile`
# (spec §8 "Modules"). Everything goes through the documented built-in globals, so this file
# works as soon as the library registers them.

"""
    TVMModule(handle::Ptr{Cvoid}; borrowed::Bool)

An `ffi.Module` (type index 73). `get_function(m, name)` (or `m[name]`, or `m.name`) returns
its functions as `TVMFunction`s.
"""
@_object_wrapper TVMModule

"""
    load_module(path; keep_alive = true) -> TVMModule

Load a shared library built against the TVM FFI headers (functions exported as
`__tvm_ffi_<name>`) with `ffi.ModuleLoadFromFile`. Like Python's `tvm_ffi.load_module`, the
module is added to the process-lifetime set (`ffi.ModuleGlobalsAdd`) unless
`keep_alive = false`, so functions taken from it stay valid.
"""
function load_module(path::AbstractString; keep_alive::Bool = true)
    m = _require_global("ffi.ModuleLoadFromFile")(String(path))::TVMModule
    if keep_alive
        add = _global("ffi.ModuleGlobalsAdd")
        add === nothing || add(m)
    end
    return m
end

"""
    get_function(m::TVMModule, name; query_imports = false) -> Union{TVMFunction,Nothing}

The module's function `name`, or `nothing` (`ffi.ModuleGetFunction`).
"""
get_function(m::TVMModule, name::AbstractString; query_imports::Bool = false) =
    _require_global("ffi.ModuleGetFunction")(m, String(name), query_imports)

function Base.getindex(m::TVMModule, name::AbstractString)
    f = get_function(m, name)
    f === nothing && throw(KeyError(name))
    return f
end

# m.add_one(1) as in Python; `handle` stays the field.
function Base.getproperty(m::TVMModule, s::Symbol)
    s === :handle && return getfield(m, :handle)
    return m[String(s)]
end
Base.propertynames(m::TVMModule) = (:handle,)

"""`implements_function(m, name)`: whether the module has `name` (`ffi.ModuleImplementsFunction`)."""
implements_function(m::TVMModule, name::AbstractString; query_imports::Bool = false) =
    _require_global("ffi.ModuleImplementsFunction")(m, String(name), query_imports)::Bool

"""`module_kind(m)`: the module's kind, e.g. `"library"` (`ffi.ModuleGetKind`)."""
module_kind(m::TVMModule) = _require_global("ffi.ModuleGetKind")(m)

"""`import_module!(m, other)`: make `other`'s functions reachable from `m` (`ffi.ModuleImportModule`)."""
import_module!(m::TVMModule, other::TVMModule) = (_require_global("ffi.ModuleImportModule")(m, other); m)

"""`module_imports(m)`: the modules `m` imports (its `imports_` field, an `ffi.Array` at offset 24)."""
function module_imports(m::TVMModule)
    h = _live_handle(m)
    arr = TVMArray(unsafe_load(Ptr{Ptr{Cvoid}}(h + 24)); borrowed = true)
    return TVMModule[x for x in arr]
end

"""`clear_imports!(m)`: drop every import of `m` (`ffi.ModuleClearImports`)."""
clear_imports!(m::TVMModule) = (_require_global("ffi.ModuleClearImports")(m); m)

"""`inspect_source(m, format = "")`: the module's source in `format`, `""` when it has none."""
inspect_source(m::TVMModule, format::AbstractString = "") =
    _require_global("ffi.ModuleInspectSource")(m, String(format))::String

"""`write_formats(m)`: the formats `write_to_file` accepts for `m` (`ffi.ModuleGetWriteFormats`)."""
write_formats(m::TVMModule) = String[x for x in _require_global("ffi.ModuleGetWriteFormats")(m)]

"""`write_to_file(m, path, format = "")`: write the module (`ffi.ModuleWriteToFile`); library modules cannot."""
write_to_file(m::TVMModule, path::AbstractString, format::AbstractString = "") =
    (_require_global("ffi.ModuleWriteToFile")(m, String(path), String(format)); nothing)

"""`property_mask(m)`: 1 binary-serializable, 2 runnable, 4 compilation-exportable (`ffi.ModuleGetPropertyMask`)."""
property_mask(m::TVMModule) = Int(_require_global("ffi.ModuleGetPropertyMask")(m))

function Base.show(io::IO, m::TVMModule)
    h = getfield(m, :handle)
    h == C_NULL ? print(io, "TVMModule(<released>)") : print(io, "TVMModule(@ ", repr(UInt(h)), ")")
end
