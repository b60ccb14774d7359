# Modules: a shared library built here against include/anyffi/c_api.h, loaded through
# ffi.ModuleLoadFromFile. Skipped until the library registers the module globals (or when no
# C compiler is available).
@testset "modules" begin
    if !skip_unless("module tests", "ffi.ModuleLoadFromFile", "ffi.ModuleGetFunction")
        cc = Sys.which("cc") === nothing ? Sys.which("gcc") : Sys.which("cc")
        if cc === nothing
            println("SKIP module tests: no C compiler (cc/gcc) on PATH")
            push!(SKIPPED, "module tests: no C compiler")
            @test_skip false
        else
            root = normpath(joinpath(@__DIR__, "..", "..", ".."))
            dir = mktempdir()
            src = joinpath(dir, "jlmod.c")
            write(src, """
                #include "anyffi/c_api.h"
                int __tvm_ffi_add_one(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* out) {
                  (void)self;
                  if (n != 1 || args[0].type_index != kTVMFFIInt) {
                    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_one: expected one int");
                    return -1;
                  }
                  out->type_index = kTVMFFIInt; out->small_str_len = 0;
                  out->value.v_int64 = args[0].value.v_int64 + 1;
                  return 0;
                }
                """)
            so = joinpath(dir, "jlmod.so")
            libdir = dirname(AnyFFI.library_path())
            run(`$cc -shared -fPIC -I$(joinpath(root, "include")) -o $so $src -L$libdir -ltvm_ffi`)
            m = load_module(so)
            @test m isa TVMModule && type_index(m) == 73
            f = get_function(m, "add_one")
            @test f isa TVMFunction && f(41) == 42
            @test m["add_one"](1) == 2 && m.add_one(2) == 3
            @test get_function(m, "no_such_function") === nothing
            @test_throws KeyError m["no_such_function"]
            e = catch_tvm(() -> f("x"))
            @test e.kind == "TypeError" && occursin("expected one int", e.message)
            if have("ffi.ModuleGetKind")
                @test AnyFFI.module_kind(m) == "library"
            end
            if have("ffi.ModuleImportModule", "ffi.ModuleClearImports", "ffi.ModuleInspectSource")
                m2 = load_module(so)
                @test isempty(AnyFFI.module_imports(m))
                AnyFFI.import_module!(m, m2)
                imps = AnyFFI.module_imports(m)
                @test length(imps) == 1 && imps[1] isa TVMModule && imps[1].handle == m2.handle
                @test get_function(m, "add_one"; query_imports = true)(1) == 2
                e = catch_tvm(() -> AnyFFI.import_module!(m2, m))
                @test e.kind == "RuntimeError" && occursin("Cyclic dependency", e.message)
                @test AnyFFI.clear_imports!(m) === m && isempty(AnyFFI.module_imports(m))
                @test AnyFFI.inspect_source(m) == "" && AnyFFI.write_formats(m) == String[]
                @test AnyFFI.property_mask(m) == 3
                e = catch_tvm(() -> AnyFFI.write_to_file(m, joinpath(dir, "m.o")))
                @test e.kind == "RuntimeError" && occursin("does not support WriteToFile", e.message)
            end
            e = catch_tvm(() -> load_module(joinpath(dir, "missing.so")))
            @test e isa TVMError
        end
    end
end
