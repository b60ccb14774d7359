"""PyTorch interop: DLPack both ways, and the operator library against torch's own operators.

Skipped where torch is not installed (``./test`` does not install it: several GB). To run it:
``python3 -m venv .venv-torch && .venv-torch/bin/pip install torch numpy pytest``, then
``ANYFFI_LIBRARY=target/release/libtvm_ffi.so .venv-torch/bin/python -m pytest bindings/python/tests``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import anyffi
from conftest import needs_global

torch = pytest.importorskip("torch")
F = torch.nn.functional
ops_needed = needs_global("ops.add", "runtime.empty")


def _torch(x):
    return torch.from_dlpack(x)


# --- DLPack ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dt",
    [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool],
)
def test_from_torch_every_dtype_zero_copy(dt):
    x = torch.arange(12).reshape(3, 4).to(dt)
    t = anyffi.from_dlpack(x)
    assert t.shape == (3, 4)
    assert t.strides == (4, 1)
    assert t.data_ptr == x.data_ptr()
    assert str(t.dtype) == {
        torch.float32: "float32",
        torch.float64: "float64",
        torch.float16: "float16",
        torch.bfloat16: "bfloat16",
        torch.int8: "int8",
        torch.int32: "int32",
        torch.int64: "int64",
        torch.uint8: "uint8",
        torch.bool: "bool",
    }[dt]
    back = _torch(t)
    assert back.dtype == dt
    assert back.data_ptr() == x.data_ptr()
    assert torch.equal(back, x)


def test_torch_strided_views_keep_their_strides():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for v in (base.t(), base[:, ::2], base[1:3, 2:5], base.reshape(2, 2, 6).permute(2, 0, 1)):
        t = anyffi.from_dlpack(v)
        assert t.shape == tuple(v.shape)
        assert t.strides == tuple(v.stride())
        assert t.data_ptr == v.data_ptr()
        np.testing.assert_array_equal(t.numpy(), v.numpy())
        assert torch.equal(_torch(t), v)


def test_torch_sees_writes_through_anyffi_and_back():
    x = torch.zeros(2, 3)
    t = anyffi.from_dlpack(x)
    t.numpy()[1, 2] = 7.0
    assert x[1, 2] == 7.0
    y = _torch(t)
    y[0, 0] = -1.0
    assert x[0, 0] == -1.0


@needs_global("runtime.empty")
def test_torch_keeps_anyffi_tensor_alive():
    # an ffi.Tensor made by runtime.empty, exported to torch, outlives the Python handle
    import gc

    t = anyffi.runtime.empty((64,), "float32")
    y = _torch(t)
    y.fill_(3.0)
    del t
    gc.collect()
    _ = [np.ones(1024) for _ in range(100)]
    assert float(y.sum()) == 192.0


def test_torch_tensor_as_argument_and_in_callbacks(t):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    seen = {}

    def cb(v):
        seen["shape"] = v.shape
        seen["ptr"] = v.data_ptr
        seen["sum"] = float(_torch(v).sum())

    t.apply(cb, x)
    assert seen == {"shape": (2, 3), "ptr": x.data_ptr(), "sum": 15.0}
    out = t.echo(x)
    assert torch.equal(_torch(out), x)
    assert _torch(out).data_ptr() == x.data_ptr()


def test_torch_tensor_into_containers_is_owned():
    import gc

    arr = anyffi.Array([torch.arange(4, dtype=torch.float32) * 2])
    gc.collect()
    _ = [torch.ones(4) for _ in range(100)]
    np.testing.assert_array_equal(arr[0].numpy(), [0, 2, 4, 6])


def test_torch_refusals_are_clear():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(Exception) as e:
        anyffi.from_dlpack(x)
    assert "grad" in str(e.value)  # torch's own reason comes through
    z = torch.ones(2, dtype=torch.complex64).conj()
    with pytest.raises(Exception):
        anyffi.from_dlpack(z)


# --- the operator library against torch -------------------------------------------------------

TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2)}
DTYPES = list(TOL)


def _close(got, want, dt, atol=None, rtol=None):
    a, r = TOL[dt]
    got = _torch(got).to(torch.float64)
    torch.testing.assert_close(got, want.to(torch.float64), atol=atol or a, rtol=rtol or r)


def _rand(*shape, dt=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed + 7 * len(shape))
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dt)


@ops_needed
@pytest.mark.parametrize("dt", DTYPES)
def test_add_and_swiglu_match_torch(dt):
    a, b = _rand(37, 129, dt=dt), _rand(37, 129, dt=dt, seed=1)
    _close(anyffi.ops.add(a, b), a.double() + b.double(), dt)
    g, u = _rand(300, 65, dt=dt, scale=4), _rand(300, 65, dt=dt, seed=2)
    _close(anyffi.ops.swiglu(g, u), F.silu(g.double()) * u.double(), dt)


@ops_needed
@pytest.mark.parametrize("dt", DTYPES)
def test_rms_norm_matches_torch(dt):
    x, w = _rand(17, 1000, dt=dt), _rand(1000, dt=dt, seed=3)
    want = F.rms_norm(x.double(), (1000,), w.double(), eps=1e-6)
    _close(anyffi.ops.rms_norm(x, w, 1e-6), want, dt)


@ops_needed
@pytest.mark.parametrize("dt", DTYPES)
def test_linear_matches_torch(dt):
    for m, k, n in ((1, 300, 77), (9, 64, 33), (40, 129, 65)):
        x, w, b = _rand(m, k, dt=dt), _rand(n, k, dt=dt, seed=4), _rand(n, dt=dt, seed=5)
        want = F.linear(x.double(), w.double(), b.double())
        scale = math.sqrt(k)
        a, r = TOL[dt]
        _close(anyffi.ops.linear(x, w, b), want, dt, atol=a * scale * 4, rtol=r * 4)
        _close(anyffi.ops.linear(x, w), F.linear(x.double(), w.double()), dt, atol=a * scale * 4, rtol=r * 4)


@ops_needed
def test_gemm_matches_torch_baddbmm():
    a, b, c = _rand(3, 20, 30), _rand(3, 30, 11, seed=1), _rand(3, 20, 11, seed=2)
    out = c.clone()
    anyffi.ops.gemm(a, b, alpha=0.5, beta=2.0, out=out)
    torch.testing.assert_close(out, torch.baddbmm(c, a, b, alpha=0.5, beta=2.0), atol=1e-4, rtol=1e-5)


@ops_needed
@pytest.mark.parametrize("dt", DTYPES)
def test_embedding_and_argmax_match_torch(dt):
    w = _rand(50, 24, dt=dt)
    idx = torch.tensor([3, 0, 49, 3, 17], dtype=torch.int64)
    assert torch.equal(_torch(anyffi.ops.embedding(idx, w)), F.embedding(idx, w))
    v = _rand(1000, dt=dt)
    v[10] = v[500] = 100  # ties: the first index wins, as torch.argmax
    i, m = anyffi.ops.argmax(v)
    assert int(_torch(i)[0]) == int(torch.argmax(v)) == 10
    assert _torch(m)[0] == v[10]


def _rope_reference(x, pos, theta):
    seq, nh, d = x.shape
    h = d // 2
    j = torch.arange(h, dtype=torch.float64)
    # the reference recipe: the angle rounded to f32 (division form), then sin/cos
    den = torch.tensor([np.float32(theta) ** np.float32(2 * k / d) for k in range(h)], dtype=torch.float32)
    ang = (pos.to(torch.float32)[:, None] / den[None, :]).to(torch.float64)
    del j
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    a, b = x.double()[..., :h], x.double()[..., h:]
    return torch.cat([a * c - b * s, b * c + a * s], dim=-1)


@ops_needed
@pytest.mark.parametrize("dt", DTYPES)
def test_rope_matches_rotate_half(dt):
    x = _rand(11, 4, 64, dt=dt)
    pos = torch.tensor([0, 1, 2, 5, 8, 13, 100, 1000, 4095, 7, 3], dtype=torch.int64)
    _close(anyffi.ops.rope(x, pos, 10000.0), _rope_reference(x, pos, 10000.0), dt, atol=TOL[dt][0] * 10)


def _attention_reference(q, k, v, scale):
    seq, nh, d = q.shape
    total, nkv, _ = k.shape
    g = nh // nkv
    kk = k.double().repeat_interleave(g, dim=1).permute(1, 0, 2)
    vv = v.double().repeat_interleave(g, dim=1).permute(1, 0, 2)
    qq = q.double().permute(1, 0, 2)
    # query i sees the keys up to total - seq + i (a KV cache ending at the queries)
    mask = torch.ones(seq, total, dtype=torch.bool).tril(diagonal=total - seq)
    out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, scale=scale)
    return out.permute(1, 0, 2)


@ops_needed
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("seq,total,nh,nkv,d", [(1, 300, 12, 2, 128), (5, 5, 4, 4, 32), (7, 40, 6, 3, 64)])
def test_self_attention_matches_sdpa(dt, seq, total, nh, nkv, d):
    q, k, v = _rand(seq, nh, d, dt=dt), _rand(total, nkv, d, dt=dt, seed=1), _rand(total, nkv, d, dt=dt, seed=2)
    scale = 1 / math.sqrt(d)
    _close(anyffi.ops.self_attention(q, k, v, scale), _attention_reference(q, k, v, scale), dt, atol=TOL[dt][0] * 4)


@ops_needed
def test_ops_write_into_torch_outputs():
    a, b = _rand(8, 8), _rand(8, 8, seed=1)
    out = torch.empty(8, 8)
    r = anyffi.ops.add(a, b, out=out)
    assert r is out
    torch.testing.assert_close(out, a + b)
    # a strided torch output
    big = torch.zeros(8, 16)
    anyffi.ops.rearrange(a, out=big[:, ::2])
    assert torch.equal(big[:, ::2], a)
    assert torch.equal(big[:, 1::2], torch.zeros(8, 8))


@ops_needed
def test_ops_refuse_mixed_torch_dtypes_by_name():
    a, b = _rand(4, 4), _rand(4, 4).to(torch.float16)
    with pytest.raises(TypeError) as e:
        anyffi.ops.add(a, b)
    assert "ops.add" in str(e.value) and "b" in str(e.value)
