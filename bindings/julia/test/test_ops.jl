# Runtime and operators on Julia arrays, against references computed in Julia (semantics and
# tolerances of spec runtime-and-ops.md §2). Skipped until the library registers `runtime.*` /
# `ops.*`.
#
# Ops want compact row-major tensors. A logical (m, n) tensor is a Julia array of size (n, m)
# presented through `rowmajor` (a PermutedDimsArray: size (m, n), strides (n, 1), no copy), so
# the references below index it with the op's own (row, column) order.

rm_rand(::Type{T}, dims...) where {T} = rowmajor(T.(rand(Float32, reverse(dims)...)))
rm_zeros(::Type{T}, dims...) where {T} = rowmajor(zeros(T, reverse(dims)...))
f32(A) = Float32.(Float32.(collect(A)))
const OP_DTYPES = (Float32, Float16, BFloat16)
# (atol, rtol) per dtype; `loose` for ops with reductions (linear, rms_norm, attention, swiglu)
tol(::Type{Float32}; loose = false) = (1e-5, 1e-5)
tol(::Type{Float16}; loose = false) = (1e-3, 1e-3)
tol(::Type{BFloat16}; loose = false) = loose ? (1e-2, 1e-2) : (1e-3, 1e-3)
# values of `out` (rounded to T) against a Float32 reference rounded once to T
function close_to(out, ref::AbstractArray, ::Type{T}; loose = false) where {T}
    atol, rtol = tol(T; loose = loose)
    r = Float32.(T.(ref))
    o = f32(out)
    return size(o) == size(r) && all(abs.(o .- r) .<= atol .+ rtol .* abs.(r))
end

function op_testset(body, name::String)
    @testset "$name" begin
        skip_unless("$name tests", name) || body(get_global_func(name))
    end
end

@testset "runtime and ops" begin
    op_testset("runtime.empty") do empty_
        t = empty_(TVMShape(2, 3), DLDataType(Float32), cpu())
        @test t isa TVMTensor && size(t) == (2, 3) && strides(t) == (3, 1) && eltype(t) == Float32
        @test device(t) == cpu()
        A = from_dlpack(t)                       # row-major memory in the tensor's index order
        @test size(A) == (2, 3) && A isa PermutedDimsArray
        A .= [1 2 3; 4 5 6]
        @test parent(A) == Float32[1 4; 2 5; 3 6]
        @test Array(t) == Float32[1 2 3; 4 5 6]
        # more dimensions than Julia compiles tuple code for in reasonable time (1,000: 5 s
        # of compiling, then an error from unsafe_wrap): an ArgumentError up front
        big = empty_(TVMShape(ones(Int, 1000)...), DLDataType(Float32), cpu())
        @test_throws ArgumentError from_dlpack(big)
        dlp = Ptr{LibAnyFFI.DLTensor}(AnyFFI._live_handle(big) + LibAnyFFI.OBJECT_HEADER_SIZE)
        @test_throws ArgumentError TensorView(dlp)   # a callback's DLTensor* argument
        @test ndims(from_dlpack(empty_(TVMShape(ones(Int, 64)...), DLDataType(Float32), cpu()))) == 64
    end

    op_testset("runtime.device_count") do device_count
        @test device_count(Int(LibAnyFFI.kDLCPU)) >= 1
    end

    op_testset("ops.add") do add
        for T in OP_DTYPES, dims in ((2, 3), (64, 128))
            a, b, c = rm_rand(T, dims...), rm_rand(T, dims...), rm_zeros(T, dims...)
            add(c, a, b)
            @test close_to(c, f32(a) .+ f32(b), T)
        end
        # a TVMTensor operand works too
        a, b, c = rm_rand(Float32, 4, 4), rm_rand(Float32, 4, 4), rm_zeros(Float32, 4, 4)
        add(TVMTensor(c), a, TVMTensor(b))
        @test close_to(c, f32(a) .+ f32(b), Float32)
        e = catch_tvm(() -> add(rm_zeros(Float32, 2, 3), rm_rand(Float32, 2, 3), rm_rand(Float32, 3, 2)))
        @test e isa TVMError
    end

    op_testset("ops.argmax") do argmax_
        for T in OP_DTYPES, n in (4, 4096)
            vals = T.(rand(Float32, n))
            idx, val = zeros(Int64, 1), zeros(T, 1)
            argmax_(idx, val, vals)
            v = f32(vals)
            @test idx[1] == argmax(v) - 1 || Float32(val[1]) == maximum(v)
        end
        idx, val = zeros(Int64, 1), zeros(Float32, 1)
        argmax_(idx, val, Float32[1, 3, 3, 2])
        @test idx[1] == 1 && val[1] == 3                 # ties: the first index
    end

    op_testset("ops.embedding") do embedding
        for T in OP_DTYPES, (n, V, d) in ((1, 2, 3), (50, 64, 32))
            weight = rm_rand(T, V, d)
            index = Int64.(rand(0:V-1, n))
            out = rm_zeros(T, n, d)
            embedding(out, index, weight)
            @test collect(out) == collect(weight)[index .+ 1, :]
        end
    end

    op_testset("ops.linear") do linear
        for T in OP_DTYPES, (m, k, n) in ((2, 4, 3), (16, 64, 32)), with_bias in (true, false)
            x = rowmajor(T.(0.1f0 .* rand(Float32, k, m)))
            w = rowmajor(T.(0.01f0 .* rand(Float32, k, n)))
            b = T.(rand(Float32, n))
            y = rm_zeros(T, m, n)
            linear(y, x, w, with_bias ? b : nothing)
            ref = f32(x) * transpose(f32(w)) .+ (with_bias ? transpose(f32(b)) : 0f0)
            @test close_to(y, ref, T; loose = true)
        end
    end

    op_testset("ops.rms_norm") do rms_norm
        for T in OP_DTYPES, (m, d) in ((1, 4), (32, 256))
            x, w, y = rm_rand(T, m, d), T.(rand(Float32, d)), rm_zeros(T, m, d)
            rms_norm(y, x, w, 1e-5)
            X = f32(x)
            ref = transpose(f32(w)) .* X ./ sqrt.(sum(X .^ 2; dims = 2) ./ d .+ 1f-5)
            @test close_to(y, ref, T; loose = true)
        end
    end

    op_testset("ops.swiglu") do swiglu
        for T in OP_DTYPES, dims in ((2, 3), (32, 64))
            gate, up, out = rm_rand(T, dims...), rm_rand(T, dims...), rm_zeros(T, dims...)
            swiglu(out, gate, up)
            g = f32(gate)
            @test close_to(out, f32(up) .* g ./ (1f0 .+ exp.(-g)), T; loose = true)
        end
    end

    op_testset("ops.rope") do rope
        for T in OP_DTYPES, (L, H, d, p0) in ((2, 1, 4, 0), (16, 4, 64, 100))
            x = rowmajor(T.(rand(Float32, d, H, L)))       # logical (L, H, d)
            pos = Int64.(p0 .+ (0:L-1))
            out = rowmajor(zeros(T, d, H, L))
            rope(out, x, pos, 10000.0)
            X = f32(x)
            ref = similar(X)
            h = d ÷ 2
            for i in 1:L, hh in 1:H, j in 0:h-1
                phi = Float32(pos[i]) / (10000f0^(Float32(2j) / Float32(d)))
                a, b = X[i, hh, j+1], X[i, hh, j+1+h]
                ref[i, hh, j+1] = a * cos(phi) - b * sin(phi)
                ref[i, hh, j+1+h] = b * cos(phi) + a * sin(phi)
            end
            atol, rtol = T == Float32 ? (1e-4, 1e-4) : tol(T; loose = true)
            r = Float32.(T.(ref))
            @test all(abs.(f32(out) .- r) .<= atol .+ rtol .* abs.(r))
        end
    end

    op_testset("ops.self_attention") do attention
        for T in OP_DTYPES, (L, S, nh, nkvh, d) in ((2, 2, 1, 1, 4), (5, 11, 4, 2, 8))
            q = rowmajor(T.(rand(Float32, d, nh, L)))
            k = rowmajor(T.(rand(Float32, d, nkvh, S)))
            v = rowmajor(T.(rand(Float32, d, nkvh, S)))
            out = rowmajor(zeros(T, d, nh, L))
            scale = 1 / sqrt(d)
            attention(out, q, k, v, scale)
            Q, K, V = f32(q), f32(k), f32(v)
            ref = zeros(Float32, L, nh, d)
            group = nh ÷ nkvh
            for h in 1:nh
                g = (h - 1) ÷ group + 1
                for i in 1:L
                    s = [j <= i + (S - L) ? Float32(scale) * sum(Q[i, h, :] .* K[j, g, :]) : -Inf32 for j in 1:S]
                    p = exp.(s .- maximum(s))
                    p ./= sum(p)
                    ref[i, h, :] = sum(p[j] .* V[j, g, :] for j in 1:S)
                end
            end
            @test close_to(out, ref, T; loose = true)
        end
    end

    op_testset("ops.rearrange") do rearrange
        for T in OP_DTYPES
            src = T.(rand(Float32, 3, 4))                 # column-major: strides (1, 3)
            out = rm_zeros(T, 3, 4)                       # row-major: strides (4, 1)
            rearrange(out, src)
            @test collect(out) == src
            M = T.(rand(Float32, 4, 5, 6))
            src2 = view(M, 2:3, :, 1:2:6)
            out2 = rm_zeros(T, size(src2)...)
            rearrange(out2, src2)
            @test collect(out2) == collect(src2)
        end
    end
end
