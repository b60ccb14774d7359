# GC stress: thousands of registrations, callbacks, objects and arrays crossing the boundary,
# interleaved with full collections. Afterwards every Julia value the library held has been
# released (live_callbacks back to its baseline) and reference counts balance.

# One round; a function so that nothing it made stays on the test's stack.
function gc_round(round::Int, names::Vector{String}, shape::TVMShape)
    ok = 0
    for i in 1:150
        name = "anyffi.julia_gc.f$(round)_$i"
        k = i
        register_global_func(name, x -> x + k)              # registration (a closure)
        push!(names, name)
        ok += get_global_func(name)(1) == k + 1
        A = rand(Float32, 8)
        t = TVMTensor(A)                                   # array exported to the library
        ok += from_dlpack(t) == A
        ok += APPLY(v -> length(unsafe_array(v)), A) == 8  # view into a callback
        ok += ECHO(shape) == shape                         # objects in and out
        ok += APPLY(x -> x, shape) == shape
        ok += APPLY(() -> rand(Int32, 3)) isa TVMTensor     # arrays out of a callback
        f = TVMFunction(() -> i)                           # throwaway callbacks
        ok += f() == i
    end
    return ok
end

@testset "GC stress" begin
    GC.gc(); GC.gc()
    base_live = AnyFFI.live_callbacks()
    shape = TVMShape(1, 2)
    base_count = use_count(shape)
    names = String[]
    total = 0
    for round in 1:20
        total += gc_round(round, names, shape)
        if round % 2 == 0
            foreach(remove_global_func, names)
            empty!(names)
        end
        GC.gc(round % 3 == 0)
    end
    foreach(remove_global_func, names)
    empty!(names)
    @test total == 20 * 150 * 7
    for _ in 1:4
        GC.gc()
    end
    @test use_count(shape) == base_count
    @test AnyFFI.live_callbacks() == base_live
    @test !any(startswith("anyffi.julia_gc."), list_global_func_names())
end

# deepcopy: the default copied the handle without an IncRef or a finalizer, so the copy
# dangled once the original was collected. A function, so that nothing stays on the stack.
function deepcopy_round(shape::TVMShape)
    n = use_count(shape)
    c = deepcopy(shape)
    ok = Bool[c.handle == shape.handle, use_count(shape) == n + 1]
    AnyFFI.release!(c)
    push!(ok, use_count(shape) == n)
    inner = TVMList([3])
    l = TVMList([1, shape, inner])
    l2 = deepcopy(l)
    push!(ok, l2.handle != l.handle, l2[1] == 1, l2[2] == shape, l2[3].handle != inner.handle)
    push!(l2[3], 4)
    push!(ok, length(inner) == 1)                  # mutable containers are copied
    d = TVMDict("k" => TVMList([1]))
    d2 = deepcopy(d)
    d2["k"][1] = 9
    push!(ok, d["k"][1] == 1, d2["k"][1] == 9)
    push!(ok, deepcopy(TVMFunction(x -> x + 1))(1) == 2)
    push!(ok, try
        deepcopy(TVMTensor(rand(Float32, 2)))
        false
    catch err
        err isa ArgumentError
    end)
    e = try
        get_global_func("anyffi.testing.raise_error")("ValueError", "m")
    catch err
        err
    end
    push!(ok, e isa TVMError && deepcopy(e).handle == e.handle && deepcopy(e).message == "m")
    return ok
end

@testset "deepcopy holds its own references" begin
    shape = TVMShape(1, 2)
    n = use_count(shape)
    @test all(deepcopy_round(shape))
    for _ in 1:4
        GC.gc()
    end
    @test use_count(shape) == n
end

# Rounds of: another thread finalizes a tensor while this one calls a callback with it in a
# loop (a dict argument after it widens the window between reading its handle and the call).
# The number of rounds that ended with "object was released" (all of them, unless one crashed).
function finalize_during_calls(rounds::Int)
    A = rand(Float32, 16)
    D = Dict(i => i for i in 1:8)
    cb = TVMFunction((x, d) -> length(x))
    released = 0
    for round in 1:rounds
        t = TVMTensor(A)
        go = Threads.Atomic{Bool}(false)
        task = Threads.@spawn((while !go[]; GC.safepoint(); end; finalize(t)))
        go[] = true
        for k in 1:10^7
            try
                APPLY(cb, t, D) == 16 || break
            catch e
                (e isa ArgumentError && occursin("object was released", e.msg)) || rethrow()
                released += 1
                break
            end
            k % 1024 == 0 && yield()  # (the task may be queued behind this one)
        end
        wait(task)
        round % 500 == 0 && GC.gc(false)
    end
    return released
end

# Calls, callbacks, exports and collections from several Julia threads at once (test.sh runs
# with JULIA_NUM_THREADS=2). Each callback runs on the thread that called in.
@testset "threads" begin
    if Threads.nthreads() == 1
        println("note: threads test runs on one thread (set JULIA_NUM_THREADS=2 for the concurrent case)")
    end
    GC.gc(); GC.gc()
    base_live = AnyFFI.live_callbacks()
    ok = Threads.Atomic{Int}(0)
    wrong_thread = Threads.Atomic{Int}(0)
    Threads.@threads for i in 1:2000
        caller = Threads.threadid()
        f = TVMFunction(x -> (Threads.threadid() == caller || Threads.atomic_add!(wrong_thread, 1); x + 1))
        A = rand(Float32, 4)
        t = TVMTensor(A)
        if APPLY(f, i) == i + 1 && from_dlpack(t) == A && ECHO("string number $i") == "string number $i"
            Threads.atomic_add!(ok, 1)
        end
        i % 250 == 0 && GC.gc(false)
    end
    @test ok[] == 2000
    @test wrong_thread[] == 0
    GC.gc(); GC.gc()
    @test AnyFFI.live_callbacks() == base_live
    # release! of one wrapper on two threads at once gives its reference back once (the handle
    # is taken out in one atomic exchange)
    base = TVMShape(1, 2)
    n0 = use_count(base)
    for round in 1:2000
        w = TVMShape(base.handle; borrowed = true)
        go = Threads.Atomic{Bool}(false)
        ts = [Threads.@spawn((while !go[]; GC.safepoint(); end; AnyFFI.release!(w))) for _ in 1:2]
        go[] = true
        foreach(wait, ts)
        use_count(base) == n0 || break
    end
    @test use_count(base) == n0
    # finalize(t) on another thread while this one's calls pass t: the call that started holds
    # t, later calls raise "object was released". Before, the call held nothing and the
    # callback wrapped a freed tensor (heap corruption: an abort or a hang within 2000 rounds).
    # Every exported array comes back (no hold is left behind).
    if Threads.nthreads() >= 2
        GC.gc(); GC.gc()
        base_live = AnyFFI.live_callbacks()
        @test finalize_during_calls(2000) == 2000
        GC.gc(); GC.gc(); GC.gc()
        @test AnyFFI.live_callbacks() == base_live
    end
    # get/getindex of a Dict another thread deletes and re-inserts the key of: the default or
    # the value, never an error from the lookup that lost the key
    d = TVMDict(Dict("k$i" => i for i in 1:100))
    stop = Threads.Atomic{Bool}(false)
    w = Threads.@spawn while !stop[]; delete!(d, "k1"); d["k1"] = 1; end
    thrown = 0
    for _ in 1:20000
        try
            get(d, "k1", 0) in (0, 1) || (thrown += 1)
        catch
            thrown += 1
        end
    end
    stop[] = true; wait(w)
    @test thrown == 0
end
