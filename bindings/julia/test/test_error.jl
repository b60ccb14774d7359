# Errors both ways: library errors come back as TVMError (kind, message, backtrace); Julia
# exceptions leave callbacks as ffi.Errors whose kind follows `AnyFFI.error_kind`.
@testset "errors" begin
    @testset "library errors -> TVMError" begin
        for kind in ("ValueError", "TypeError", "IndexError", "KeyError", "RuntimeError", "MyCustomError")
            e = catch_tvm(() -> RAISE(kind, "message of $kind"))
            @test e isa TVMError && e.kind == kind && e.message == "message of $kind"
            @test occursin("File \"", e.backtrace)
            @test e.handle != C_NULL && type_key(e) == "ffi.Error"
        end
        e = catch_tvm(() -> ADD_ONE("not an int"))
        @test e.kind == "TypeError"
        e = catch_tvm(() -> ADD_ONE(typemax(Int64)))
        @test e.kind == "ValueError" && occursin("overflow", e.message)
        e = catch_tvm(() -> ECHO())
        @test e.kind == "TypeError"
        e = catch_tvm(() -> get_global_func("ffi.Shape")(1, "x"))
        @test e.kind == "ValueError" || e.kind == "TypeError"
        msg = sprint(showerror, catch_tvm(() -> RAISE("ValueError", "shown")))
        @test startswith(msg, "TVMError: ValueError: shown") && occursin("backtrace", msg)
        @test repr(TVMError("KeyError", "k")) == "TVMError(\"KeyError\", \"k\")"
        @test TVMError("X", "y") isa Exception
        @test_throws ArgumentError TVMError(C_NULL; borrowed = false)
    end

    @testset "Julia exceptions -> error kinds (through Rust: apply)" begin
        cases = [
            (() -> throw(ArgumentError("arg")), "ValueError", "arg"),
            (() -> throw(DomainError(-1, "dom")), "ValueError", "dom"),
            (() -> Int8(1000), "ValueError", "InexactError"),
            (() -> throw(DimensionMismatch("dims")), "ValueError", "dims"),
            (() -> throw(MethodError(+, ("a",))), "TypeError", "MethodError"),
            (() -> Base.typeassert(1, String), "TypeError", "TypeError"),
            (() -> [1, 2, 3][10], "IndexError", "BoundsError"),
            (() -> Dict(1 => 2)[3], "KeyError", "KeyError"),
            (() -> error("plain error"), "RuntimeError", "plain error"),
            (() -> throw(TVMError("CustomKind", "custom message")), "CustomKind", "custom message"),
            (() -> throw(42), "RuntimeError", "42"),
            (() -> throw(OutOfMemoryError()), "MemoryError", "OutOfMemoryError"),
        ]
        for (f, kind, needle) in cases
            e = catch_tvm(() -> APPLY(f))
            @test e isa TVMError && e.kind == kind && occursin(needle, e.message)
            # and directly: Julia -> C -> Julia callback
            e2 = catch_tvm(() -> TVMFunction(f)())
            @test e2 isa TVMError && e2.kind == kind
        end
        e = catch_tvm(() -> APPLY(() -> error("where")))
        @test occursin("File \"", e.backtrace)           # Julia frames, library format
        # an interrupt in a callback is a KeyboardInterrupt to the library, and comes back out
        # of the call as an InterruptException (also through nested callbacks and from the
        # library's own raise of that kind)
        for f in (() -> APPLY(() -> throw(InterruptException())),
                  () -> APPLY(() -> APPLY(() -> throw(InterruptException()))),
                  () -> TVMFunction(() -> throw(InterruptException()))(),
                  () -> RAISE("KeyboardInterrupt", "from elsewhere"))
            @test try f(); false catch ex; ex isa InterruptException end
        end
        seen = Ref("")
        APPLY(() -> try APPLY(() -> throw(InterruptException())) catch ex
                        seen[] = string(typeof(ex)) end)
        @test seen[] == "InterruptException"
    end

    @testset "errors pass through nested callbacks unchanged" begin
        # Rust -> Julia -> Rust error -> Julia callback rethrows -> Rust -> Julia
        inner = catch_tvm(() -> RAISE("IndexError", "deep"))
        e = catch_tvm(() -> APPLY(() -> RAISE("IndexError", "deep")))
        @test e.kind == "IndexError" && e.message == "deep"
        e = catch_tvm(() -> APPLY(() -> APPLY(() -> throw(KeyError(:k)))))
        @test e.kind == "KeyError"
        # a caught TVMError rethrown from a callback re-raises the same ffi.Error object
        caught = catch_tvm(() -> RAISE("ValueError", "same object"))
        e = catch_tvm(() -> APPLY(() -> throw(caught)))
        @test e.handle == caught.handle
        # a callback that catches a library error and returns normally
        @test APPLY(() -> (catch_tvm(() -> RAISE("ValueError", "x")).kind)) == "ValueError"
    end

    @testset "a callback whose result cannot be converted" begin
        e = catch_tvm(() -> APPLY(() -> Core.svec(1)))
        @test e isa TVMError && e.kind == "ValueError"
    end

    @testset "unbounded recursion through callbacks is an error, not a crash" begin
        g(n) = APPLY(g, n + 1)
        e = catch_tvm(() -> g(0))
        @test e isa TVMError && e.kind == "RecursionError"
        e = fetch(@async catch_tvm(() -> g(0)))   # a task's smaller stack
        @test e isa TVMError && e.kind == "RecursionError"
        h(n) = n == 0 ? 0 : APPLY(h, n - 1) + 1
        @test h(500) == 500
    end

    @testset "callbacks that each use much stack stop before the stack overflows" begin
        # each level recurses `per` frames in Julia before calling back in: the stack runs out
        # far below MAX_CALLBACK_DEPTH (this crashed or hung the process before the reserve)
        burn(k, n, per) = k == 0 ? APPLY(m -> burn(per, m, per), n + 1) : burn(k - 1, n, per) + 1
        for per in (200, 1000)
            e = catch_tvm(() -> burn(per, 0, per))
            @test e isa TVMError && e.kind == "RecursionError"
            @test occursin("CALLBACK_STACK_RESERVE", e.message)
            e = fetch(@async catch_tvm(() -> burn(per, 0, per)))   # a task's 4 MiB stack
            @test e isa TVMError && e.kind == "RecursionError"
        end
        # a task with a small stack of its own: a quarter of it is the reserve
        t = Task(() -> catch_tvm(() -> burn(50, 0, 50)), 256 * 1024)
        schedule(t)
        e = fetch(t)
        @test e isa TVMError && e.kind == "RecursionError"
        @test occursin("less than 64 KiB", e.message)
        # a stack overflow inside one callback comes back as a RecursionError
        deep(n) = deep(n + 1) + 1
        e = catch_tvm(() -> APPLY(x -> deep(0), 1))
        @test e isa TVMError && e.kind == "RecursionError"
        @test startswith(e.message, "StackOverflowError")
        e = fetch(@async catch_tvm(() -> APPLY(x -> deep(0), 1)))
        @test e isa TVMError && e.kind == "RecursionError"
        # the per-thread bookkeeping is back to zero, and shallow nesting works as before
        @test AnyFFI.CALLBACK_DEPTH[Threads.threadid()] == 0
        @test APPLY(n -> APPLY(m -> m + 1, n), 1) == 2
    end

    @testset "tasks waiting inside callbacks count apart" begin
        # more tasks than MAX_CALLBACK_DEPTH suspended inside a callback on one thread at once
        # (a callback that waits): not recursion (they read as 1000 nested calls before)
        n = AnyFFI.MAX_CALLBACK_DEPTH[] + 100
        go = Channel{Nothing}(n)
        entered = Threads.Atomic{Int}(0)
        tasks = [@async APPLY(i) do k
                     Threads.atomic_add!(entered, 1)
                     take!(go)
                     k + 1
                 end for i in 1:n]
        while entered[] < n && !any(istaskdone, tasks)
            yield()
        end
        @test entered[] == n
        foreach(_ -> put!(go, nothing), 1:n)
        @test [fetch(t) for t in tasks] == 2:n+1
        # the depth limit still holds within one task, also after tasks interleaved
        g(n) = APPLY(g, n + 1)
        e = fetch(@async catch_tvm(() -> g(0)))
        @test e isa TVMError && e.kind == "RecursionError" && occursin("1000 deep", e.message)
        # two tasks nesting alternately: each counts its own levels
        ch = [Channel{Int}(1) for _ in 1:2]
        depth_seen = zeros(Int, 2)
        nest(who, level) = level == 5 ? (depth_seen[who] = AnyFFI.CALLBACK_DEPTH[AnyFFI._task_slot()]) :
            APPLY(l -> (yield(); nest(who, l)), level + 1)
        t1 = @async nest(1, 0)
        t2 = @async nest(2, 0)
        fetch(t1); fetch(t2)
        @test depth_seen == [5, 5]
        @test AnyFFI.CALLBACK_DEPTH[AnyFFI._task_slot()] == 0
        # tasks recursing without bound, yielding at every level: each stops at its own limit
        # (on any thread), and every slot and saved depth is back to nothing after
        deep_yield(n) = APPLY(m -> (yield(); deep_yield(m)), n + 1)
        kinds = fetch.([Threads.@spawn(catch_tvm(() -> deep_yield(0))) for _ in 1:4])
        @test all(e -> e isa TVMError && e.kind == "RecursionError" &&
                       occursin("1000 deep", e.message), kinds)
        @test all(==(0), AnyFFI.CALLBACK_DEPTH) && all(isempty, AnyFFI.SUSPENDED_DEPTHS)
    end

    @testset "callback backtraces look frames up once" begin
        # StackTraces.lookup of a system-image frame takes ~4 ms on Julia 1.5, so frames are
        # cached by address (AnyFFI.FRAME_CACHE); the backtrace reads the same through it
        boom(x) = error("boom")
        raise() = catch_tvm(() -> APPLY(boom, 1))
        raise()  # compiled
        empty!(AnyFFI.FRAME_CACHE)
        e = raise()
        @test occursin("in error", e.backtrace) && occursin("in boom", e.backtrace)
        n = length(AnyFFI.FRAME_CACHE)
        @test n > 0
        @test raise().backtrace == e.backtrace
        @test length(AnyFFI.FRAME_CACHE) == n   # the same frames again: nothing new looked up
    end
end
