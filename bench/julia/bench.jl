# Benchmarks of the Julia binding (no BenchmarkTools: there is no package registry here).
#
#   julia --project=bindings/julia bench/julia/bench.jl          (or bench/julia/run.sh)
#
# Each case runs a tight loop of `inner` calls inside a function (so the loop is compiled),
# repeated `rounds` times; the reported time is the median per-call time of the rounds (the
# minimum is printed too), and the allocation figure is `@allocated` of one call, averaged over
# a loop. Targets (issue 8): empty call <= 30 ns; one Vector{Float32} argument <= 60 ns and
# <= 160 bytes; a call that goes through a Julia callback <= 250 ns.

using AnyFFI
using Printf
using Statistics: median

const NOP = get_global_func("anyffi.testing.nop")
const ADD1 = get_global_func("anyffi.testing.add_one")
const ECHO = get_global_func("anyffi.testing.echo")
const APPLY = get_global_func("anyffi.testing.apply")
const CB0 = TVMFunction(() -> nothing)
const CBV = TVMFunction(x -> nothing)
const VEC = rand(Float32, 64)
const MAT = rand(Float32, 16, 16)
const TEN = TVMTensor(rand(Float32, 64))
const SHP = TVMShape(1, 2)

function loop(f::F, inner::Int) where {F}
    t0 = time_ns()
    for _ in 1:inner
        f()
    end
    return (time_ns() - t0) / inner
end

function allocs(f::F, inner::Int) where {F}
    f()
    return @allocated(for _ in 1:inner
        f()
    end) / inner
end

function bench(name, f; inner = 100_000, rounds = 31, target_ns = nothing, target_bytes = nothing)
    loop(f, 1000)  # compile
    GC.gc()
    loop(f, inner)  # warm up (the first rounds of an allocating loop also pay for heap growth)
    ts = [loop(f, inner) for _ in 1:rounds]
    bytes = allocs(f, 10_000)
    t = median(ts)
    ok = (target_ns === nothing || t <= target_ns) && (target_bytes === nothing || bytes <= target_bytes)
    tgt = string(target_ns === nothing ? "" : "<= $(target_ns) ns", target_bytes === nothing ? "" : ", <= $(target_bytes) B")
    @printf("%-44s %8.1f ns (min %6.1f)  %6.1f B/call  %s %s\n", name, t, minimum(ts), bytes,
            isempty(tgt) ? "" : (ok ? "ok  " : "MISS"), tgt)
    return ok
end

println("AnyFFI bench: Julia ", VERSION, ", ", Sys.CPU_NAME, ", ", Sys.CPU_THREADS, " threads; library ", AnyFFI.library_path())
results = Bool[]
push!(results, bench("empty call  nop()", () -> NOP(); target_ns = 30))
push!(results, bench("nop(Vector{Float32}) as DLTensor view", () -> NOP(VEC); target_ns = 60, target_bytes = 160))
push!(results, bench("Julia callback  cb() via TVMFunction", () -> CB0(); target_ns = 250))
bench("add_one(Int64)", () -> ADD1(1))
bench("nop(1, 2.5, true)", () -> NOP(1, 2.5, true))
bench("nop(\"short\")  (SmallStr)", () -> NOP("short"))
bench("nop(long string)  (RawStr)", () -> NOP("a string longer than seven bytes"))
bench("nop(Matrix{Float32} 16x16)", () -> NOP(MAT))
bench("echo(Vector{Float32}) -> TensorView", () -> ECHO(VEC))
bench("nop(::TVMTensor)  (object argument)", () -> NOP(TEN))
bench("nop(::TVMTensor, ::TVMShape)", () -> NOP(TEN, SHP))
bench("echo(::TVMShape) -> TVMShape", () -> ECHO(SHP))
bench("Julia callback with Vector{Float32}", () -> CBV(VEC))
bench("apply(cb)  Julia -> Rust -> Julia callback", () -> APPLY(CB0))
bench("get_global_func(\"anyffi.testing.nop\")", () -> get_global_func("anyffi.testing.nop"); inner = 10_000)
bench("TVMTensor(Vector{Float32}) (to_dlpack)", () -> TVMTensor(VEC); inner = 10_000)
println(all(results) ? "all targets met" : "some targets MISSED")
