# Conversions for every type index, both directions (echo returns its argument as an owned
# value; call_any shows the raw type index that came back).
@testset "conversions" begin
    L = LibAnyFFI
    raw_ti(x) = type_index(call_any(ECHO, x))

    @testset "POD: None, Int, Bool, Float, OpaquePtr, DataType, Device (0-6)" begin
        @test ECHO(nothing) === nothing && raw_ti(nothing) == 0
        for x in (0, 1, -1, typemax(Int64), typemin(Int64))
            @test ECHO(x) === x
        end
        @test raw_ti(1) == 1
        @test ECHO(Int8(-5)) === Int64(-5) && ECHO(UInt32(7)) === Int64(7) && ECHO(UInt64(9)) === Int64(9)
        @test ECHO(true) === true && ECHO(false) === false && raw_ti(true) == 2
        @test ECHO(2.5) === 2.5 && ECHO(1.5f0) === 1.5 && ECHO(Float16(0.5)) === 0.5 && raw_ti(1.0) == 3
        @test ECHO(Inf) === Inf && isnan(ECHO(NaN))
        @test ECHO(BFloat16(2.0f0)) === 2.0
        @test ECHO(Ptr{Cvoid}(UInt(0x1234))) === Ptr{Cvoid}(UInt(0x1234)) && raw_ti(C_NULL) == 4
        @test ECHO(C_NULL) === C_NULL
        for dt in (DLDataType(Float32), DLDataType(BFloat16), DLDataType("int8x4"), DLDataType(Bool))
            @test ECHO(dt) === dt
        end
        @test raw_ti(DLDataType(Float32)) == 5
        # element types pass as their dtypes
        for T in (Float32, BFloat16, Int64, Bool, ComplexF64)
            @test ECHO(T) === DLDataType(T)
        end
        @test raw_ti(Float16) == 5
        for d in (cpu(), cuda(3), DLDevice(:rocm, 1), DLDevice(13, 7))
            @test ECHO(d) === d
        end
        @test raw_ti(cpu()) == 6
    end

    @testset "DLTensorPtr (7)" begin
        A = Float32[1 2; 3 4]
        tv = ECHO(A)
        @test tv isa TensorView{2} && tv.parent === A  # our own view comes back, keeping A
        # call_any returns the value unconverted, and our view of A dies with the call: an
        # owned ffi.Tensor (70) over A's memory comes back instead of the raw DLTensor*
        @test raw_ti(A) == 70
        a = call_any(ECHO, A)
        GC.gc()
        t = take_value(a)
        @test t isa TVMTensor && from_dlpack(t) == A
        @test size(tv) == (2, 2) && strides(tv) == (1, 2) && eltype(tv) == Float32
    end

    @testset "strings: RawStr (8), SmallStr (11), Str (65)" begin
        for s in ("", "a", "abcdefg", "abcdefgh", "héllo wörld", "x"^1000, "nul\0inside", "a longer\0one with NUL")
            @test ECHO(s) == s
        end
        @test raw_ti("abcdefg") == 11           # <= 7 bytes: inline
        @test raw_ti("abcdefgh") == 65          # lent as RawStr (8), returned as an ffi.String
        @test ECHO(SubString("xxhello worldxx", 3, 13)) == "hello world"
        @test ECHO(:sym) == "sym" && ECHO('c') == "c"
        v = AnyFFI._arg("a longer string")[1]
        @test v.type_index == 8 && ECHO(TVMAnyView(v)) == "a longer string"
        @test get_global_func("ffi.String")("ffi string") == "ffi string"
    end

    @testset "bytes: ByteArrayPtr (9), SmallBytes (12), Bytes (66)" begin
        for s in ("", "ab", "abcdefg", "abcdefgh", "\0\x01\xff binary \0")
            @test ECHO(codeunits(s)) == Vector{UInt8}(codeunits(s))
        end
        @test raw_ti(codeunits("abc")) == 12
        @test raw_ti(codeunits("abcdefghij")) == 66
        @test AnyFFI._arg(codeunits("abcdefghij"))[1].type_index == 9
        @test get_global_func("ffi.Bytes")(codeunits("some bytes")) == Vector{UInt8}(codeunits("some bytes"))
    end

    @testset "ObjectRValueRef (10)" begin
        s = TVMShape(4, 5)
        slot = Ref(s.handle)
        LibAnyFFI.TVMFFIObjectIncRef(s.handle)          # the reference the slot holds
        n0 = use_count(s)
        r = GC.@preserve slot ECHO(TVMAnyView(L.TVMFFIAny(L.kTVMFFIObjectRValueRef, 0,
                UInt64(UInt(Base.unsafe_convert(Ptr{Ptr{Cvoid}}, slot))))))
        @test r isa TVMShape && r == s && collect(r) == [4, 5]
        @test slot[] == C_NULL                           # moved out of the slot
        @test use_count(s) == n0                         # ...into r, not copied
        # a Julia callback sees an RValueRef argument as a borrowed object
        seen = Ref{Any}(nothing)
        cb = TVMFunction(x -> (seen[] = x; nothing))
        slot2 = Ref(s.handle)
        GC.@preserve slot2 s cb(TVMAnyView(L.TVMFFIAny(L.kTVMFFIObjectRValueRef, 0,
                UInt64(UInt(Base.unsafe_convert(Ptr{Ptr{Cvoid}}, slot2))))))
        @test seen[] == s && slot2[] == s.handle
    end

    @testset "Unchanged (13) and other POD indices" begin
        u = ECHO(TVMAnyView(L.TVMFFIAny(L.kTVMFFIUnchanged, 0, 0)))
        @test u isa TVMAnyView && type_index(u) == 13
    end

    @testset "objects: Error (67), Function (68), Shape (69), Tensor (70), Opaque (74), BigInt (78)" begin
        e = ECHO(TVMError("ValueError", "as a value"))
        @test e isa TVMError && e.kind == "ValueError" && e.message == "as a value" && type_index(e) == 67
        # other Julia exceptions as values: ffi.Error with the kind they would be thrown with
        e = ECHO(KeyError(:k))
        @test e isa TVMError && e.kind == "KeyError" && occursin("k", e.message) && type_index(e) == 67
        e = ECHO(ArgumentError("bad"))
        @test e isa TVMError && e.kind == "ValueError" && e.message == "bad"
        a = TVMArray([BoundsError([1], 2), 1])
        @test a[1] isa TVMError && a[1].kind == "IndexError"
        f = TVMFunction(x -> x + 1)
        g = ECHO(f)
        @test g isa TVMFunction && g == f && g(1) == 2 && type_index(g) == 68 && type_key(g) == "ffi.Function"
        s = TVMShape(1, 2, 3)
        @test ECHO(s) == s && type_index(s) == 69 && type_key(s) == "ffi.Shape"
        t = TVMTensor(rand(Float32, 3))
        @test ECHO(t) == t && type_index(t) == 70 && type_key(t) == "ffi.Tensor"
        for x in (big(2)^63, -big(2)^63 - 1, big(2)^200 + 12345, -big(3)^100, Int128(2)^100, typemax(UInt64))
            @test ECHO(x) == x
        end
        @test raw_ti(big(2)^64) == 78
        @test ECHO(big(5)) === Int64(5)                  # normalised to Int when it fits
        @test raw_ti(big(5)) == 1
        # ffi.OpaquePyObject (74): the one opaque kind the C API makes; a generic TVMObject here
        deleted = Ref(false)
        handle_box = Ref(0)
        out = Ref{Ptr{Cvoid}}(C_NULL)
        create = LibAnyFFI.dlsym_optional(:TVMFFIObjectCreateOpaque)
        if create != C_NULL
            del = @cfunction(p -> (unsafe_store!(Ptr{Int}(p), 42); nothing), Cvoid, (Ptr{Cvoid},))
            rc = GC.@preserve handle_box ccall(create, Cint, (Ptr{Cvoid}, Int32, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
                Base.unsafe_convert(Ptr{Int}, handle_box), L.kTVMFFIOpaquePyObject, del, out)
            @test rc == 0
            o = TVMObject(out[]; borrowed = false)
            @test type_index(o) == 74 && type_key(o) == "ffi.OpaquePyObject"
            o2 = ECHO(o)
            @test o2 isa TVMObject && o2 == o && use_count(o) == 2
            AnyFFI.release!(o2)
            @test use_count(o) == 1
            GC.@preserve handle_box AnyFFI.release!(o)
            @test handle_box[] == 42                     # its deleter ran
        end
    end

    @testset "TVMAny / TVMAnyView, take_value / copy_value" begin
        s = TVMShape(7)
        a = TVMAny(s)
        @test type_index(a) == 69 && use_count(s) == 2
        v = TVMAnyView(a)
        c = copy_value(v)
        @test c == s && use_count(s) == 3
        AnyFFI.release!(c)
        @test copy_value(a) == s
        x = take_value(a)
        @test x == s && type_index(a) == 0 && take_value(a) === nothing
        @test_throws ArgumentError take_value(v)
        @test take_value(TVMAny(42)) == 42
        @test take_value(TVMAny("a long owned string")) == "a long owned string"
        @test take_value(call_any(ADD_ONE, 1)) == 2
        r = call_any(ECHO, "xyzxyzxyz")
        @test type_index(r) == 65 && copy_value(r) == "xyzxyzxyz" && take_value(r) == "xyzxyzxyz"
        @test ECHO(TVMAny(3.5)) == 3.5
        str = "borrowed raw str"
        b = GC.@preserve str TVMAny(L.TVMFFIAny(L.kTVMFFIRawStr, 0, UInt64(UInt(pointer(str)))); borrowed = true)
        @test type_index(b) in (11, 65) && take_value(b) == "borrowed raw str"
    end

    @testset "unsupported values" begin
        @test_throws ArgumentError NOP(Core.svec(1))
        @test_throws ArgumentError NOP(String)  # a type with no dtype (element types pass as theirs)
    end
end
