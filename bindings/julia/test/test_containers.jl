# Containers. ffi.Shape is in the core; Array/List/Map/Dict need the container globals (spec §8)
# and are skipped until the library registers them.
@testset "containers" begin
    @testset "ffi.Shape" begin
        s = TVMShape(2, 3, 4)
        @test length(s) == 3 && size(s) == (3,) && s[1] == 2 && s[end] == 4
        @test collect(s) == [2, 3, 4] && Tuple(s) == (2, 3, 4) && s == (2, 3, 4)
        @test [x for x in s] == [2, 3, 4] && eltype(TVMShape) == Int64
        @test_throws BoundsError s[4]
        @test TVMShape((5, 6)) == [5, 6] && TVMShape([7]) == (7,) && length(TVMShape()) == 0
        @test repr(s) == "TVMShape((2, 3, 4))"
        @test TVMShape(2, 3, 4) == s && TVMShape(2, 3) != s && hash(TVMShape(2, 3, 4)) == hash(s)
        e = catch_tvm(() -> get_global_func("ffi.Shape")(1, "x"))
        @test e isa TVMError
    end

    @testset "ffi.Array" begin
        if !skip_unless("ffi.Array tests", "ffi.Array")
            a = TVMArray([1, "two", 3.0, nothing, TVMShape(1, 2)])
            @test a isa TVMArray && type_index(a) == 71 && length(a) == 5
            @test a[1] == 1 && a[2] == "two" && a[3] == 3.0 && a[4] === nothing && a[5] == [1, 2]
            @test collect(a)[1:4] == Any[1, "two", 3.0, nothing]
            @test_throws BoundsError a[6]
            @test length(TVMArray()) == 0
            # tuples and non-numeric vectors pass as ffi.Array
            @test ECHO((1, 2, 3)) isa TVMArray && collect(ECHO((1, 2, 3))) == [1, 2, 3]
            @test collect(ECHO(["a", "b"])) == ["a", "b"]
            @test collect(APPLY(() -> (1, "x"))) == Any[1, "x"]
            nested = TVMArray(((1, 2), (3, (4, 5))))
            @test collect(nested[2][2]) == [4, 5]
            seen = APPLY(x -> x isa TVMArray && length(x) == 2 && x[2] == "b", ("a", "b"))
            @test seen === true
            if have("ffi.ArraySize")
                @test get_global_func("ffi.ArraySize")(a) == 5
            end
        end
    end

    @testset "ffi.List" begin
        if !skip_unless("ffi.List tests", "ffi.List", "ffi.ListAppend", "ffi.ListSetItem", "ffi.ListPop")
            l = TVMList([1, 2])
            @test l isa TVMList && type_index(l) == 75 && collect(l) == [1, 2]
            push!(l, "three")
            @test length(l) == 3 && l[3] == "three"
            l[1] = 10
            @test l[1] == 10
            @test pop!(l) == "three" && length(l) == 2
            if have("ffi.ListInsert", "ffi.ListErase", "ffi.ListClear")
                insert!(l, 1, 0)
                @test collect(l) == [0, 10, 2]
                deleteat!(l, 2)
                @test collect(l) == [0, 2]
                empty!(l)
                @test isempty(l)
            end
        end
    end

    @testset "ffi.Map" begin
        if !skip_unless("ffi.Map tests", "ffi.Map", "ffi.MapSize", "ffi.MapGetItem", "ffi.MapCount",
                        "ffi.MapForwardIterFunctor")
            m = TVMMap(Dict("a" => 1, "b" => "two", 3 => 4.5))
            @test m isa TVMMap && type_index(m) == 72 && length(m) == 3
            @test m["a"] == 1 && m["b"] == "two" && m[3] == 4.5
            @test haskey(m, "a") && !haskey(m, "zz") && get(m, "zz", :default) == :default
            @test_throws KeyError m["zz"]
            @test Set(keys(m)) == Set(Any["a", "b", 3]) && length(values(m)) == 3
            @test Dict(m) == Dict{Any,Any}("a" => 1, "b" => "two", 3 => 4.5)
            @test length(collect(m)) == 3
            big_ = TVMMap(Dict(i => i^2 for i in 1:50))      # dense layout
            @test length(big_) == 50 && big_[7] == 49 && sum(last, collect(big_)) == sum(i^2 for i in 1:50)
            @test ECHO(Dict("k" => "v")) isa TVMMap
            @test APPLY(x -> x["k"], Dict("k" => "v")) == "v"
            @test length(TVMMap()) == 0 && isempty(collect(TVMMap()))
        end
    end

    @testset "ffi.Dict" begin
        if !skip_unless("ffi.Dict tests", "ffi.Dict", "ffi.DictSize", "ffi.DictGetItem", "ffi.DictCount",
                        "ffi.DictSetItem", "ffi.DictErase", "ffi.DictForwardIterFunctor")
            d = TVMDict("x" => 1)
            @test d isa TVMDict && type_index(d) == 76 && d["x"] == 1
            d["y"] = 2
            @test length(d) == 2 && d["y"] == 2
            delete!(d, "x")
            @test !haskey(d, "x") && length(d) == 1
            if have("ffi.DictClear")
                empty!(d)
                @test isempty(d)
            end
        end
    end

    @testset "arrays kept by containers are owned" begin
        if !skip_unless("container ownership tests", "ffi.Array", "ffi.Map", "ffi.List",
                        "ffi.ListAppend", "ffi.Dict", "ffi.DictSetItem")
            # a container keeps its elements after the call: a Julia array in it must be an
            # ffi.Tensor over its memory, not the call's borrowed DLTensor* view
            churn() = (GC.gc(); [rand(64) for _ in 1:200])
            A = Float32[1 2 3; 4 5 6]
            a = TVMArray([A])
            m = TVMMap("k" => [1, 2, 3])
            l = TVMList()
            push!(l, [1.0, 2.0])
            d = TVMDict()
            d["x"] = Int32[7, 8]
            e = ECHO(Any[[1, 2, 3]])
            r = APPLY(() -> Any[[4.0, 5.0]])
            junk = churn()
            @test a[1] isa TVMTensor && from_dlpack(a[1]) == A
            @test m["k"] isa TVMTensor && from_dlpack(m["k"]) == [1, 2, 3]
            @test from_dlpack(l[1]) == [1.0, 2.0] && from_dlpack(d["x"]) == Int32[7, 8]
            @test from_dlpack(e[1]) == [1, 2, 3] && from_dlpack(r[1]) == [4.0, 5.0]
            @test length(junk) == 200
            @test TVMArray([codeunits("abcdefghij")])[1] == Vector{UInt8}("abcdefghij")  # bytes stay bytes
        end
    end

    @testset "strided wrappers pass as tensors, N-d non-strided arrays are refused" begin
        M = reshape(Float32.(1:12), 3, 4)
        for X in (transpose(M), M', view(PermutedDimsArray(M, (2, 1)), :, 1:2))
            tv = ECHO(X)
            @test tv isa TensorView && size(tv) == size(X) && unsafe_array(tv) == X
        end
        @test_throws ArgumentError ECHO(reshape(view(M, 1:2:3, :), 2, 4))
        @test_throws ArgumentError ECHO(Any[1 2; 3 4])
        @test ECHO(1:3) isa TVMArray && ECHO(1:3) == [1, 2, 3]  # a range: an ffi.Array of its elements
    end

    @testset "collection methods" begin
        a = TVMArray([10, 20, 30])
        @test keys(a) == 1:3 && eachindex(a) == 1:3 && ndims(a) == 1 && Vector(a) == [10, 20, 30]
        @test findfirst(==(20), a) == 2
        if have("ffi.ListErase")
            l = TVMList([1, 2])
            append!(l, [3, 4])
            @test popfirst!(l) == 1 && collect(l) == [2, 3, 4]
        end
        if have("ffi.DictErase")
            d = TVMDict("a" => 1)
            @test pop!(d, "a") == 1 && isempty(d) && pop!(d, "zz", 0) == 0
            @test_throws KeyError pop!(d, "zz")
            @test get!(d, "b", 2) == 2 && d["b"] == 2 && get!(d, "b", 3) == 2
        end
    end

    @testset "containers compare and hash by content" begin
        @test TVMArray([1, 2]) == TVMArray([1, 2]) && TVMArray([1, 2]) == [1, 2] && [1, 2] == TVMArray([1, 2])
        @test hash(TVMArray([1, 2])) == hash(TVMArray([1, 2])) == hash([1, 2])
        @test TVMArray([1, 2]) != TVMArray([1, 3]) && TVMList([1]) == TVMArray([1])
        @test TVMMap("a" => 1) == TVMMap("a" => 1) && TVMMap("a" => 1) == Dict("a" => 1)
        @test hash(TVMMap("a" => 1)) == hash(TVMMap("a" => 1)) && TVMMap("a" => 1) != TVMMap("a" => 2)
        @test TVMShape(1, 2) in Set([(1, 2)])
    end

    @testset "shape isequal/hash agree" begin
        s = TVMShape(1, 2)
        @test s == [1, 2] && s == (1, 2) && isequal(s, (1, 2)) && !isequal(s, [1, 2])
        @test (1, 2) in Set([s]) && !([1, 2] in Set([s]))
        # isequal is element-wise isequal, as for the tuple (it was ==: (0,) isequal (-0.0,))
        @test TVMShape(0) == (-0.0,) && !isequal(TVMShape(0), (-0.0,))
        @test isequal(TVMShape(1, 2), TVMShape(1, 2))
    end

    @testset "isequal agrees with hash: NaN, -0.0" begin
        # isequal fell back to ==: [0.0] isequal [-0.0] with different hashes, [NaN] not
        # isequal to itself (a Dict key not found again)
        @test TVMList([0.0]) == TVMList([-0.0]) && !isequal(TVMList([0.0]), TVMList([-0.0]))
        @test isequal(TVMList([NaN]), TVMList([NaN])) && isequal(TVMArray([NaN]), [NaN])
        @test !isequal(TVMArray([0.0]), [-0.0]) && isequal([NaN], TVMList([NaN]))
        k = TVMList([NaN])
        d = Dict{Any,Int}(k => 1)
        @test haskey(d, TVMList([NaN])) && haskey(d, [NaN])
        for (x, y) in ((TVMList([1.0, NaN]), TVMList([1.0, NaN])), (TVMMap("a" => NaN), TVMMap("a" => NaN)),
                       (TVMMap("a" => NaN), Dict("a" => NaN)), (TVMList([0.0]), TVMList([-0.0])),
                       (TVMMap("a" => 0.0), Dict("a" => -0.0)))
            @test !isequal(x, y) || hash(x) == hash(y)  # isequal implies equal hashes
        end
        @test isequal(TVMMap("a" => NaN), Dict("a" => NaN)) && !isequal(TVMMap("a" => 0.0), TVMMap("a" => -0.0))
        @test hash(TVMMap("a" => 1, "b" => 2)) == hash(Dict("a" => 1, "b" => 2))
        @test hash(TVMDict("b" => 2, "a" => 1)) == hash(Dict("a" => 1, "b" => 2))
    end

    @testset "maps compare entry by entry, not through a Julia Dict" begin
        # Dict(m) merged 1 and 1.0 (and equal list keys): a 2-entry map equalled a 1-entry Dict
        m = TVMDict(1 => "a", 1.0 => "b")
        @test length(m) == 2 && m != Dict(1 => "b") && m != Dict(1 => "a")
        @test_throws ArgumentError Dict(m)
        k1, k2 = TVMList([1]), TVMList([1])
        mm = TVMMap(k1 => "a", k2 => "b")
        @test length(mm) == 2 && mm != Dict([1] => "b")
        @test TVMMap("a" => 1, "b" => 2) == Dict("b" => 2, "a" => 1) == TVMDict("a" => 1, "b" => 2)
        @test TVMMap("a" => 1) != Dict("a" => 1, "b" => 2) && TVMMap("a" => 1) != TVMMap("b" => 1)
        @test TVMMap() == Dict() && isequal(TVMDict(), Dict())
    end

    @testset "deepcopy of an Array or Map copies the containers inside" begin
        # an Array or Map was shared (immutable), with the Lists and Dicts it holds
        a = TVMArray([TVMList([1])])
        b = deepcopy(a)
        push!(b[1], 2)
        @test length(a[1]) == 1 && length(b[1]) == 2
        m = TVMMap("k" => TVMList([1]))
        m2 = deepcopy(m)
        push!(m2["k"], 2)
        @test length(m["k"]) == 1 && m2 == Dict("k" => [1, 2])
        l = TVMList([TVMArray([TVMDict("x" => 1)])])
        l2 = deepcopy(l)
        l2[1][1]["x"] = 2
        @test l[1][1]["x"] == 1
        # a cycle through an Array: the copy has the same shape
        c = TVMList([0])
        arr = TVMArray([c])
        c[1] = arr
        c2 = deepcopy(c)
        @test c2[1][1].handle == c2.handle && c2.handle != c.handle
        @test deepcopy(TVMArray([1, "s", 2.5])) == [1, "s", 2.5]
    end

    @testset "show of a container that holds itself" begin
        l = TVMList([1])
        push!(l, l)
        @test repr(l) == "TVMList([1, #= circular reference @-1 =#])"
        d = TVMDict("a" => 1)
        d["s"] = d
        @test occursin("circular reference", repr(d))
        @test repr(TVMList([1, "x", TVMList([2])])) == "TVMList([1, \"x\", TVMList([2])])"
        @test repr(TVMMap("a" => 1)) == "TVMMap(\"a\" => 1)"
        empty!(l)  # (break the cycle for the collector)
        delete!(d, "s")
    end

    @testset "Bool is no index" begin
        l = TVMList([10, 20])
        @test_throws ArgumentError l[true]
        @test_throws ArgumentError TVMArray([1])[true]
        @test_throws ArgumentError TVMShape(5, 6)[false]
        @test_throws ArgumentError (l[true] = 1)
        @test_throws ArgumentError insert!(l, true, 1)
        @test_throws ArgumentError deleteat!(l, true)
        @test collect(l) == [10, 20]
    end

    @testset "more of Base's collection methods" begin
        l = TVMList([1, 2, 3, 4])
        @test l[2:3] isa TVMList && collect(l[2:3]) == [2, 3] && isempty(l[3:2])
        @test TVMArray([1, 2, 3])[1:2] isa TVMArray && TVMArray([1, 2, 3])[1:2] == [1, 2]
        @test_throws BoundsError l[0:2]
        @test_throws BoundsError l[3:5]
        c = copy(l)
        push!(c, 5)
        @test length(l) == 4 && length(c) == 5 && TVMList(l).handle != l.handle
        pushfirst!(l, 0)
        @test collect(l) == 0:4
        @test Vector{Int}(TVMArray([1, 2])) == [1, 2] && convert(Vector, TVMList([1])) == Any[1]
        s = TVMShape(2, 3)
        @test keys(s) == 1:2 && eachindex(s) == 1:2 && ndims(s) == 1 && TVMShape(s) === s
        d = TVMDict("a" => 1)
        @test !haskey(d, :sym) && get(d, :sym, 0) == 0 && delete!(d, :sym) === d && pop!(d, Set(), 7) == 7
        @test !haskey(TVMMap("a" => 1), :sym)
        @test get(() -> 9, d, "zz") == 9 && get(() -> 9, d, "a") == 1
        @test get!(() -> 5, d, "b") == 5 && d["b"] == 5 && get!(() -> 6, d, "b") == 5
        @test keytype(d) == Any && valtype(TVMMap("a" => 1)) == Any
        @test TVMMap(["x" => 1, "y" => 2]) == Dict("x" => 1, "y" => 2)
        d2 = copy(d)
        d2["c"] = 3
        @test !haskey(d, "c") && TVMDict(d) == d && TVMDict(d).handle != d.handle
        m = TVMMap("a" => 1)
        @test copy(m) === m && TVMMap(m) === m && TVMMap(d) == d
        # a shape equals an Array of the same ints, as both equal the vector
        @test TVMShape(2, 3) == TVMArray([2, 3]) && TVMList([2, 3]) == TVMShape(2, 3)
        @test !isequal(TVMShape(2, 3), TVMArray([2, 3])) && TVMShape(2, 3) != TVMArray([2, 4])
        # two released wrappers are not the same object (both handles were NULL: ==)
        x, y = TVMList([1]), TVMList([2])
        AnyFFI.release!(x); AnyFFI.release!(y)
        @test_throws ArgumentError x == y
    end

    @testset "pop!/popfirst! against another thread" begin
        # popfirst! read l[1] and then erased index 0 (two calls): two threads could both
        # return one element and lose the next; pop! raised a raw IndexError
        for pops in ((popfirst!, popfirst!), (pop!, pop!), (popfirst!, pop!))
            l = TVMList(collect(1:2000))
            got = [Int[] for _ in 1:2]
            Threads.@threads for t in 1:2
                while true
                    v = try
                        pops[t](l)
                    catch e
                        e isa ArgumentError || rethrow()
                        break
                    end
                    push!(got[t], v)
                end
            end
            @test sort(vcat(got...)) == 1:2000 && isempty(l)
        end
        @test_throws ArgumentError popfirst!(TVMList())
        @test_throws ArgumentError pop!(TVMList())
    end
end
