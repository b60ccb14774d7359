# Calls with 0 to 11 arguments in both directions, callbacks, and the global registry.

function positional(xs...)  # digits in argument order: checks that order is preserved
    acc = 0
    for i in 1:length(xs)
        acc += xs[i] * 10^(i - 1)
    end
    return acc
end

struct Scale  # a callable struct
    k::Int
end
(s::Scale)(x) = s.k * x

# A vector whose `strides` runs a hook (and then reports that it has none): converting it as an
# argument runs user code after the arguments before it were converted.
struct HookVector <: AbstractVector{Float32}
    hook::Function
end
Base.size(::HookVector) = (2,)
Base.getindex(::HookVector, i::Int) = Float32(i)
Base.strides(h::HookVector) = (h.hook(); throw(MethodError(strides, (h,))))
@testset "functions" begin
    @testset "calls with 0..11 arguments" begin
        cb = TVMFunction(positional)
        count_args = TVMFunction((xs...) -> length(xs))
        for n in 0:11
            args = ntuple(i -> i % 10, n)
            @test NOP(args...) === nothing                   # Julia -> Rust
            @test count_args(args...) == n                   # Julia -> C -> Julia
            @test cb(args...) == positional(args...)         # order preserved
            @test APPLY(count_args, args...) == n            # Rust -> Julia
            @test APPLY(cb, args...) == positional(args...)
            mixed = ntuple(i -> (1, 2.5, "str", nothing, true, Float32[1, 2], cpu())[mod1(i, 7)], n)
            @test count_args(mixed...) == n
            @test APPLY(count_args, mixed...) == n
        end
        @test APPLY(count_args, (1:11)...) == 11
    end

    @testset "calls with a million arguments (splatted collections)" begin
        # a Vararg{Any,N} specialisation per N compiled in quadratic time (10^4 arguments: 17 s)
        # and segfaulted Julia's compiler at 10^6: TVMArray(xs), a Vector{Any} or Dict argument,
        # a callback returning a long vector all splat their elements
        n = 1_000_000
        xs = collect(Any, 1:n)
        @test length(TVMArray(xs)) == n
        @test length(TVMList(xs)) == n
        @test ECHO(xs)[n] == n
        @test length(TVMMap(Dict(i => i for i in 1:n))) == n
        @test NOP(1:n...) === nothing
        @test type_index(call_any(NOP, xs...)) == Int(LibAnyFFI.kTVMFFINone)
        @test length(APPLY(() -> xs)) == n
        @test TVMFunction((a...) -> length(a))(xs...) == n
        @test TVMFunction((a...) -> a[end])(1:40...) == 40   # just past the tuple path
    end

    @testset "callbacks see the converted arguments" begin
        seen = Any[]
        rec = TVMFunction((xs...) -> (append!(seen, xs); length(xs)))
        A = rand(Float32, 3, 2)
        APPLY(rec, 1, 2.0, true, nothing, "s", "a longer string", codeunits("bytes"), DLDataType(Float16), cuda(1), A)
        @test seen[1:9] == Any[1, 2.0, true, nothing, "s", "a longer string", Vector{UInt8}(codeunits("bytes")), DLDataType(Float16), cuda(1)]
        @test seen[10] isa TensorView && size(seen[10]) == (3, 2) && unsafe_array(seen[10]) == A
        @test seen[10].parent === A     # the caller's own view (ARG_VIEWS): it keeps A alive
        empty!(seen)
        f = TVMFunction(x -> x)
        APPLY(rec, f, TVMShape(2, 3))
        @test seen[1] == f && seen[2] isa TVMShape && seen[2] == [2, 3]
    end

    @testset "callback results" begin
        for x in (1, 2.5, true, nothing, "short", "a longer result string", DLDataType(Int8), cpu(),
                  big(2)^100, Ptr{Cvoid}(UInt(0x10)))
            @test APPLY(() -> x) == x
        end
        @test APPLY(() -> codeunits("returned bytes")) == Vector{UInt8}(codeunits("returned bytes"))
        # a Julia array returned from a callback becomes an ffi.Tensor over its memory (no copy)
        A = rand(Float64, 4, 3)
        t = APPLY(() -> A)
        @test t isa TVMTensor && size(t) == (4, 3) && pointer(t) == pointer(A) && from_dlpack(t) == A
        # functions returned from callbacks, and called from Rust
        adder = APPLY(() -> TVMFunction(x -> x + 10))
        @test adder(5) == 15 && APPLY(adder, 1) == 11
        @test APPLY(() -> (x -> 2x))(21) == 42           # a plain Julia function is wrapped
        # Julia functions as arguments are wrapped for the call
        @test APPLY(x -> x * 3, 7) == 21
    end

    @testset "registry" begin
        name = "anyffi.julia_test.square"
        f = register_global_func(name, x -> x * x)
        @test f isa TVMFunction
        g = get_global_func(name)
        @test g(7) == 49 && g == f
        @test name in list_global_func_names()
        @test "anyffi.testing.nop" in list_global_func_names()
        e = catch_tvm(() -> register_global_func(name, x -> x))
        @test e isa TVMError && occursin("already registered", e.message)
        register_global_func(name; override = true) do x
            x + 1
        end
        @test get_global_func(name)(7) == 8
        @test AnyFFI.global_func_metadata(name) == ""
        @test remove_global_func(name) == true
        @test get_global_func(name) === nothing
        @test remove_global_func(name) == false
        @test !(name in list_global_func_names())
        @test get_global_func("no.such.function") === nothing
        # a TVMFunction registers as itself
        h = register_global_func("anyffi.julia_test.add_one_alias", ADD_ONE)
        @test h == ADD_ONE && get_global_func("anyffi.julia_test.add_one_alias")(1) == 2
        remove_global_func("anyffi.julia_test.add_one_alias")
        # callable structs
        @test TVMFunction(Scale(3))(4) == 12
    end

    @testset "function object lifetime" begin
        f = TVMFunction(x -> x)
        n = use_count(f)
        churn(f) = (for _ in 1:100; ECHO(f); APPLY(f, 1); end; nothing)
        churn(f)
        GC.gc(); GC.gc()
        @test use_count(f) == n
        @test occursin("TVMFunction", repr(f))
        AnyFFI.release!(f)
        @test_throws ArgumentError f(1)
    end

    @testset "a call holds its object arguments until it returns" begin
        # release! of an argument while the call runs (here from inside the call; another
        # thread's finalize(t) in the threads test): the call keeps it until it returns, and
        # calls after the release raise (the call held nothing: the object went under it)
        base = TVMShape(1, 2)
        n0 = use_count(base)
        for mode in 1:3  # a call of a few arguments, call_any, a call of more than 32
            t = TVMShape(base.handle; borrowed = true)
            inside = Ref(-1)
            released_inside = Ref(false)
            cb = (xs...) -> begin
                AnyFFI.release!(t)
                inside[] = use_count(base)
                released_inside[] = try
                    NOP(t); false
                catch e
                    e isa ArgumentError && occursin("object was released", sprint(showerror, e))
                end
                foreach(x -> x isa TVMShape && AnyFFI.release!(x), xs)
                nothing
            end
            mode == 1 && APPLY(cb, t)
            mode == 2 && call_any(APPLY, cb, t)
            mode == 3 && APPLY(cb, t, ntuple(_ -> 0, 40)...)
            @test inside[] == n0 + 2          # base, t (held by the call), the callback's own
            @test released_inside[]
            @test use_count(base) == n0       # t's reference went back when the call returned
            @test_throws ArgumentError NOP(t)
            @test_throws ArgumentError APPLY(x -> x, 1, t)
        end
        # released while a later argument converts (user code: an array type's `strides`):
        # the call does not start
        for mode in 1:2
            t = TVMShape(base.handle; borrowed = true)
            called = Ref(false)
            cb = (xs...) -> (called[] = true; nothing)
            hook = HookVector(() -> AnyFFI.release!(t))
            @test_throws ArgumentError (mode == 1 ? APPLY(cb, t, hook) : call_any(APPLY, cb, t, hook))
            @test !called[] && use_count(base) == n0
        end
        # a later argument that fails to convert leaves no hold behind; a released one undoes
        # the holds already taken
        t = TVMShape(base.handle; borrowed = true)
        @test_throws ArgumentError NOP(t, 1 => 2)
        dead = TVMShape(base.handle; borrowed = true)
        AnyFFI.release!(dead)
        @test_throws ArgumentError NOP(t, dead)
        @test use_count(base) == n0 + 1
        AnyFFI.release!(t)
        @test use_count(base) == n0
        # TVMErrors pass as objects too
        e = catch_tvm(() -> RAISE("ValueError", "held"))
        AnyFFI.release!(e)
        @test_throws ArgumentError NOP(e)
    end

    @testset "registration refuses what cannot be called" begin
        @test_throws ArgumentError register_global_func("anyffi.test.not_callable", 5)
        @test_throws ArgumentError register_global_func("", x -> x)
        @test ECHO(pi) == Float64(pi) && ECHO(1 // 4) == 0.25
        @test repr(DLDataType(200, 8, 1)) == "DLDataType(\"code200_8\")"
    end
end
