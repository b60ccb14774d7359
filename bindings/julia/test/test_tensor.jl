# Tensors: Julia arrays as borrowed DLTensor views (no copy, Julia order, column-major strides),
# every dtype, strided views, ffi.Tensor objects, DLPack round trips and lifetimes.

const ALL_ELTYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
                     Float16, Float32, Float64, ComplexF32, ComplexF64, BFloat16)
const DTYPE_NAMES = Dict(Bool => "bool", Int8 => "int8", Int16 => "int16", Int32 => "int32",
    Int64 => "int64", UInt8 => "uint8", UInt16 => "uint16", UInt32 => "uint32", UInt64 => "uint64",
    Float16 => "float16", Float32 => "float32", Float64 => "float64", ComplexF32 => "complex64",
    ComplexF64 => "complex128", BFloat16 => "bfloat16")

sample(::Type{Bool}, dims...) = rand(Bool, dims...)
sample(::Type{BFloat16}, dims...) = BFloat16.(rand(Float32, dims...))
sample(::Type{T}, dims...) where {T} = rand(T, dims...)

same_data(t, A) = from_dlpack(t) == A  # (no array left on the caller's stack)

# A vector whose `pointer` runs a hook: converting it as an argument runs user code after the
# arguments before it were converted.
struct PointerHook <: AbstractVector{Float32}
    hook::Function
end
Base.size(::PointerHook) = (2,)
Base.getindex(::PointerHook, i::Int) = Float32(i)
Base.strides(::PointerHook) = (1,)
Base.pointer(h::PointerHook) = (h.hook(); throw(ArgumentError("no memory")))

@testset "tensors" begin
    @testset "dtypes" begin
        for T in ALL_ELTYPES
            dt = DLDataType(T)
            @test julia_type(dt) == T
            T <: Complex && continue  # the library's dtype grammar has no complex names
            @test string(dt) == DTYPE_NAMES[T]
            @test DLDataType(DTYPE_NAMES[T]) == dt
        end
        @test DLDataType(ComplexF32) == DLDataType(LibAnyFFI.kDLComplex, 64, 1)
        @test DLDataType(Float32) == DLDataType(LibAnyFFI.kDLFloat, 32, 1)
        @test DLDataType(BFloat16) == DLDataType(LibAnyFFI.kDLBfloat, 16, 1)
        @test DLDataType(Float16) == DLDataType(LibAnyFFI.kDLFloat, 16, 1)
        @test string(DLDataType("float8_e4m3fn")) == "float8_e4m3fn"
        @test string(DLDataType("float32x4")) == "float32x4"
        @test_throws ArgumentError julia_type(DLDataType("float8_e5m2"))
        @test_throws ArgumentError DLDataType(String)
        e = catch_tvm(() -> DLDataType("not_a_dtype"))
        @test e.kind == "ValueError"
        @test repr(DLDataType(Float32)) == "DLDataType(\"float32\")"
        # BFloat16 is raw bits with round-to-nearest-even conversions
        @test sizeof(BFloat16) == 2 && isprimitivetype(BFloat16)
        @test Float32(BFloat16(1.5f0)) == 1.5f0
        @test reinterpret(UInt16, BFloat16(1.0f0 + 2.0f0^-8)) == 0x3f80   # tie -> even
        @test reinterpret(UInt16, BFloat16(1.0f0 + 3 * 2.0f0^-8)) == 0x3f82
        @test isnan(Float32(BFloat16(NaN32)))
        # from Float64 rounded once (through Float32 it rounded twice: this value gave 1.0)
        @test Float32(BFloat16(1 + 2.0^-8 + 2.0^-30)) == 1.0078125f0
        @test Float32(BFloat16(1 + 2.0^-8)) == 1.0f0                     # an exact tie -> even
        @test isinf(Float32(BFloat16(1e300))) && isnan(Float32(BFloat16(NaN)))
        @test Float32(BFloat16(3)) == 3.0f0 && Float32(BFloat16(Float16(0.5))) == 0.5f0
        # transpose/adjoint of a BFloat16 matrix are strided views like any other
        W = BFloat16.(Float32[1 2 3; 4 5 6])
        @test eltype(transpose(W)) == BFloat16 && transpose(W)[3, 2] == W[2, 3] && W'[1, 2] == W[2, 1]
        @test from_dlpack(TVMTensor(transpose(W))) == transpose(W)
        # compared, hashed and classified as floats are
        v = BFloat16.(Float32[3, -1, 7, 2])
        @test maximum(v) == BFloat16(7f0) && argmax(v) == 3 && sort(v) == BFloat16.(Float32[-1, 2, 3, 7])
        @test BFloat16(1f0) < BFloat16(2f0) && BFloat16(2f0) <= BFloat16(2f0) && !(BFloat16(NaN32) < BFloat16(1f0))
        nan = BFloat16(NaN32)
        @test isequal(nan, nan) && nan != nan && length(Set([nan, nan, BFloat16(0f0), BFloat16(-0f0)])) == 3
        @test hash(BFloat16(1.5f0)) == hash(1.5f0)
        @test isinf(typemax(BFloat16)) && typemin(BFloat16) < BFloat16(-1f30) && isfinite(BFloat16(1f0))
        @test Float16(BFloat16(0.5f0)) === Float16(0.5)
        # devices
        @test string(cpu()) == "cpu:0" && string(cuda(2)) == "cuda:2"
        @test DLDevice("cuda:1") == cuda(1) && DLDevice(:cpu) == cpu()
        @test repr(cuda(1)) == "DLDevice(\"cuda:1\")"
        @test_throws ArgumentError DLDevice(:nosuchdevice)
    end

    @testset "arrays as DLTensor views: every dtype, through Rust and back into Julia" begin
        for T in ALL_ELTYPES
            A = sample(T, 3, 4)
            tv = ECHO(A)
            @test tv isa TensorView && tv.parent === A && tv.dtype == DLDataType(T)
            @test size(tv) == (3, 4) && strides(tv) == (1, 3) && eltype(tv) == T
            @test pointer(tv) == pointer(A)
            # a Julia callback receives a borrowed view of the same memory
            got = APPLY(v -> (v isa TensorView && eltype(v) == T && size(v) == (3, 4) &&
                              strides(v) == (1, 3) && pointer(v) == pointer(A) &&
                              unsafe_array(v) == A), A)
            @test got === true
            # and can write through it (no copy anywhere)
            if T <: Union{Integer,AbstractFloat} && T !== Bool
                B = zeros(T, 5)
                APPLY(v -> (unsafe_array(v)[2] = one(T); nothing), B)
                @test B[2] == one(T)
            end
        end
    end

    @testset "a callback's borrowed view, kept or returned, becomes an ffi.Tensor" begin
        A = Float32[1 2 3; 4 5 6]
        kept = Any[]
        APPLY(v -> (push!(kept, TVMArray([v]), to_dlpack(v)); nothing), A)
        r = APPLY(v -> v, A)  # a callback returning its argument view
        GC.gc(); GC.gc()
        churn = [rand(64) for _ in 1:2000]  # reuse whatever the views' memory was
        for t in (kept[1][1], kept[2], r)
            @test t isa TVMTensor
            @test size(t) == (2, 3) && strides(t) == (1, 2)
            @test pointer(t) == pointer(A)
            @test Array(t) == A
        end
        @test isempty(churn) == false
    end

    @testset "contiguous and strided arrays keep their strides" begin
        M = reshape(Float32.(1:60), 3, 4, 5)
        cases = [
            (M, (3, 4, 5), (1, 3, 12)),
            (view(M, 2:3, :, 1), (2, 4), (1, 3)),
            (view(M, 1, :, :), (4, 5), (3, 12)),
            (view(M, :, 1:2:4, 2:2:5), (3, 2, 2), (1, 6, 24)),
            (view(vec(M), 1:7:60), (9,), (7,)),
            (PermutedDimsArray(M, (3, 1, 2)), (5, 3, 4), (12, 1, 3)),
            (rowmajor(M), (5, 4, 3), (12, 3, 1)),
            (transpose(view(M, :, :, 1)) |> collect, (4, 3), (1, 4)),
            (reshape(view(vec(M), 1:24), 4, 6), (4, 6), (1, 4)),
            (fill(1.5f0), (), ()),
            (Float32[], (0,), (1,)),
        ]
        for (A, sz, st) in cases
            tv = TensorView(A)
            @test size(tv) == sz && strides(tv) == st
            @test APPLY(v -> size(v) == sz && strides(v) == st && pointer(v) == pointer(A), A) === true
            if length(A) > 0
                @test APPLY(v -> collect(unsafe_array(v)) == collect(A), A)
            end
        end
        @test_throws ArgumentError TensorView(1:3)               # a range is not strided memory
        @test TVMTensor(view(M, :, 2, :)) isa TVMTensor
    end

    @testset "TVMTensor and from_dlpack (no copy, same index order)" begin
        for T in ALL_ELTYPES
            A = sample(T, 4, 3)
            t = TVMTensor(A)
            @test t isa TVMTensor && type_index(t) == 70
            @test size(t) == (4, 3) && strides(t) == (1, 4) && eltype(t) == T && ndims(t) == 2
            @test dtype(t) == DLDataType(T) && device(t) == cpu() && length(t) == 12
            B = from_dlpack(t)
            @test B isa Array{T,2} && B == A && pointer(B) == pointer(A)
            @test Array(t) == A && pointer(Array(t)) != pointer(A)
        end
        # other layouts come back in the tensor's index order, over the same memory
        M = reshape(Float64.(1:24), 2, 3, 4)
        for V in (rowmajor(M), PermutedDimsArray(M, (2, 3, 1)), view(M, :, 1:2:3, :),
                  view(M, 2, :, 2:3), view(M, 1:1, 2:3, 1:2:4), view(vec(M), 2:5:24))
            t = TVMTensor(V)
            B = from_dlpack(t)
            @test size(B) == size(V) && B == V
            @test pointer(t) == pointer(V)
        end
        @test from_dlpack(TVMTensor(view(M, :, 1:2:3, :))) isa StridedView   # strides (1, 4, 6)
        B = from_dlpack(TVMTensor(rowmajor(M)))
        @test B isa PermutedDimsArray && parent(B) isa Array && pointer(parent(B)) == pointer(M)
        z = from_dlpack(TVMTensor(fill(2.0)))
        @test size(z) == () && z[] == 2.0
        @test size(from_dlpack(TVMTensor(zeros(Float32, 0, 3)))) == (0, 3)
        @test from_dlpack(M) === M
        @test occursin("float64[2, 3, 4]", repr(TVMTensor(M)))
    end

    @testset "DLPack round trips through the C API" begin
        A = rand(Float32, 5, 6)
        t = TVMTensor(A)
        n = use_count(t)
        p = AnyFFI.to_dlpack_versioned(t)               # a managed tensor holding a reference
        @test use_count(t) == n + 1
        t2 = from_dlpack(p)                             # adopted by a new ffi.Tensor
        @test pointer(t2) == pointer(A) && size(t2) == (5, 6) && strides(t2) == (1, 5)
        @test same_data(t2, A)
        AnyFFI.release!(t2)
        GC.gc()
        @test use_count(t) == n
        q = AnyFFI.to_dlpack_legacy(t)
        t3 = from_dlpack(q)
        @test pointer(t3) == pointer(A) && use_count(t) == n + 1
        AnyFFI.release!(t3)
        @test use_count(t) == n
        # require_contiguous: a column-major matrix is not compact row-major
        p = AnyFFI.to_dlpack_versioned(t)
        e = catch_tvm(() -> from_dlpack(p; require_contiguous = true))
        @test e isa TVMError && occursin("contiguous", e.message)
        # not adopted on failure: free it through its own deleter
        del = unsafe_load(p).deleter
        ccall(del, Cvoid, (Ptr{Cvoid},), p)
        @test use_count(t) == n
        # a row-major presentation is compact
        r = TVMTensor(rowmajor(A))
        p = AnyFFI.to_dlpack_versioned(r)
        r2 = from_dlpack(p; require_contiguous = true)
        @test size(r2) == (6, 5) && from_dlpack(r2) == rowmajor(A)
    end

    @testset "lifetimes: arrays, tensors and views outlive each other safely" begin
        B = let
            A = collect(Float32, 1:1000)
            from_dlpack(TVMTensor(A))                   # B keeps the tensor, the tensor keeps A
        end
        for _ in 1:3
            GC.gc()
            x = [rand(1000) for _ in 1:100]             # churn the allocator
        end
        @test B == collect(Float32, 1:1000)
        # echo of a Julia array: the returned view keeps the array
        tv = ECHO(rand(Float32, 100))
        GC.gc()
        @test length(unsafe_array(tv)) == 100
        # the library's view of a Julia array (an ffi.Tensor from a callback) keeps it alive
        t = APPLY(() -> collect(Int32, 1:10))
        GC.gc(); GC.gc()
        @test from_dlpack(t) == 1:10
        # a Vector under an exported tensor cannot be resized (its memory would move under the
        # tensor): Julia refuses, as for any reshaped vector
        v = collect(Float32, 1:8)
        tv8 = TVMTensor(v)
        @test_throws ErrorException resize!(v, 10^6)
        @test_throws ErrorException push!(v, 9f0)
        @test from_dlpack(tv8) == 1:8 && pointer(from_dlpack(tv8)) == pointer(v)
    end

    @testset "strided arrays returned from callbacks are owned" begin
        junk() = (for _ in 1:3; x = [fill(7.0, 8) for _ in 1:100_000]; end; GC.gc(); GC.gc())
        r = APPLY(() -> transpose(Float64[1 2 3; 4 5 6]))
        junk()
        @test r isa TVMTensor && collect(from_dlpack(r)) == [1 4; 2 5; 3 6]
        r = APPLY(() -> view(transpose(reshape(Float64.(1:24), 4, 6)), 1:3, :))
        junk()
        @test r isa TVMTensor && collect(from_dlpack(r)) == transpose(reshape(Float64.(1:24), 4, 6))[1:3, :]
        a = TVMAny(Float64[1 2; 3 4]')
        junk()
        @test type_index(a) == 70 && collect(from_dlpack(copy_value(a))) == [1 3; 2 4]
    end

    @testset "deepcopy of views copies the data, or refuses borrowed memory" begin
        # a TensorView of a Julia array: a view of a deep copy of the array. The default copied
        # the fields: `data` still pointed at the original array and `shape`/`strides` into the
        # original view (dangling once it is collected).
        M = reshape(Float32.(1:24), 2, 3, 4)
        for V in (Float32[1, 2, 3], M, view(M, :, 1:2:3, :), rowmajor(M))
            tv = TensorView(V)
            tv2 = deepcopy(tv)
            P = unsafe_array(tv2)
            @test P == V && P !== V && size(tv2) == size(tv) && strides(tv2) == strides(tv)
            @test pointer(tv2) == pointer(P) != pointer(V)
            base = pointer_from_objref(tv2)
            @test tv2.shape == Ptr{Int64}(base + 48) && tv2.strides == Ptr{Int64}(base + 48 + 8 * ndims(tv2))
        end
        A = Float32[1, 2, 3]
        tv2 = deepcopy(TensorView(A))
        unsafe_array(tv2) .= 10
        @test A == [1, 2, 3]
        if have("ops.add")  # C reads the copy through its DLTensor
            out = zeros(Float32, 3)
            get_global_func("ops.add")(out, tv2, tv2)
            @test out == [20, 20, 20]
        end
        pair = (tv2, tv2)
        c = deepcopy(pair)
        @test c[1] === c[2] && c[1] !== tv2
        # a borrowed view (memory someone else owns): an ArgumentError, as for TVMTensor
        t = TVMTensor(A)
        bv = TensorView(Ptr{LibAnyFFI.DLTensor}(AnyFFI._live_handle(t) + LibAnyFFI.OBJECT_HEADER_SIZE))
        msg = try deepcopy(bv); "copied" catch e; sprint(showerror, e) end
        @test occursin("deepcopy(::TensorView)", msg) && occursin("copy(unsafe_array(v))", msg)
        # a StridedView copies its elements (as deepcopy of any array): the default copied the
        # pointer, or deep-copied its owner (a TVMTensor: an error about tensors)
        for sv in (from_dlpack(TVMTensor(view(M, :, 1:2:3, :))),
                   from_dlpack(TVMTensor(view(vec(M), 24:-5:1))))
            @test sv isa StridedView
            c = deepcopy(sv)
            @test c isa typeof(sv) && c == sv && pointer(c) != pointer(sv)
            c[1] = -1
            @test sv[1] != -1
        end
    end

    @testset "a String's memory never passes as a tensor" begin
        # Strings are immutable, and a tensor argument may be written (an op's output): views,
        # reshapes and reinterpretations of codeunits(s) were tensors over the String's memory
        s = "x"^16
        sub = SubString(s, 2, 13)
        for A in (view(codeunits(s), 1:8), reinterpret(Float32, codeunits(s)),
                  reshape(codeunits(s), 4, 4), transpose(codeunits(s)), rowmajor(reshape(codeunits(s), 4, 4)),
                  view(codeunits(sub), 1:4), reinterpret(Int8, codeunits(sub)))
            for f in (NOP, x -> TensorView(x), x -> TVMTensor(x), x -> TVMList([x]), x -> APPLY(() -> x))
                e = try
                    f(A); nothing
                catch err
                    err
                end
                msg = e === nothing ? "" : sprint(showerror, e)
                @test (e isa ArgumentError || (e isa TVMError && e.kind == "ValueError")) &&
                      occursin("String", msg) && occursin("Vector{UInt8}(s)", msg)
            end
        end
        if have("ops.add")
            out = reinterpret(Float32, view(codeunits(s), 1:16))
            @test_throws ArgumentError get_global_func("ops.add")(out, ones(Float32, 4), ones(Float32, 4))
        end
        @test s == "x"^16 && sub == "x"^12
        # codeunits of a String or a SubString pass as bytes (a copy when kept)
        @test ECHO(codeunits(sub)) == Vector{UInt8}(sub) && ECHO(codeunits(s)) == Vector{UInt8}(s)
        @test ECHO(codeunits(SubString(s, 2, 4))) == Vector{UInt8}("xxx")
        @test APPLY(() -> codeunits(sub)) == Vector{UInt8}(sub)
        @test collect(TVMList([codeunits(sub)])) == [Vector{UInt8}(sub)]
    end

    @testset "a view of an array resized since is refused, not passed stale" begin
        # a callback keeps the view of its caller's vector; the vector is resized afterwards
        # (its memory moves): passing the kept view again gave C the freed memory
        v = Float32[1, 2, 3]
        kept = Ref{Any}(nothing)
        APPLY(x -> (kept[] = x; nothing), v)
        tv = kept[]
        @test tv isa TensorView && parent(tv) === v
        @test NOP(tv) === nothing                      # unchanged: still fine
        resize!(v, 10_000)
        v .= 7
        for f in (NOP, ECHO, x -> APPLY(y -> nothing, 1, x), x -> call_any(NOP, x),
                  x -> NOP(x, ntuple(_ -> 0, 40)...))
            e = try
                f(tv); nothing
            catch err
                err
            end
            @test e isa ArgumentError && occursin("resized", e.msg) && occursin("TensorView(A)", e.msg)
        end
        @test size(TensorView(v)) == (10_000,) && NOP(TensorView(v)) === nothing
        t = to_dlpack(tv)                              # the array as it is now
        @test size(t) == (10_000,) && pointer(t) == pointer(v)
        @test unsafe_array(tv) === v
        # shrunk in place: the view's size is checked too
        w = rand(Float32, 4)
        tw = TensorView(w)
        resize!(w, 2)
        @test_throws ArgumentError NOP(tw)
        # resized while a later argument converts (user code): the call does not start
        u = Float32[1, 2]
        hook = PointerHook(() -> resize!(u, 10_000))
        e = try
            NOP(u, hook); nothing
        catch err
            err
        end
        @test e isa ArgumentError && occursin("resized", e.msg)
        s = TVMShape(1)
        n = use_count(s)
        @test_throws ArgumentError NOP(s, tw)          # an object held before is let go
        @test use_count(s) == n
    end

    @testset "negative strides and unaligned memory come back" begin
        v = collect(1.0:10.0)
        @test collect(from_dlpack(TVMTensor(view(v, 10:-1:1)))) == 10.0:-1:1.0
        @test APPLY(x -> sum(unsafe_array(x)), view(v, 10:-3:1)) == sum(v[10:-3:1])
        M = reshape(Float64.(1:16), 4, 4)
        @test collect(from_dlpack(TVMTensor(view(M, 4:-1:1, 3:-2:1)))) == M[4:-1:1, 3:-2:1]
        y = reinterpret(Float32, view(zeros(UInt8, 17), 2:17))
        y .= 1:4
        @test collect(from_dlpack(TVMTensor(y))) == Float32[1, 2, 3, 4]
    end
end
