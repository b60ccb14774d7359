"""The package on a CUDA device: DLPack with torch's CUDA tensors, the runtime wrappers, and the
operator library's CUDA kernels against torch's operators (references in float64 on the CPU).

Skipped unless torch sees a CUDA device and the loaded library's CUDA runtime finds one. Where a GPU
is present: ``ANYFFI_LIBRARY=target/release/libtvm_ffi.so python3 -m pytest bindings/python/tests/test_cuda.py``
(the NVRTC and cuBLAS libraries must be loadable: ``LD_LIBRARY_PATH``, or ``ANYFFI_NVRTC_LIBRARY`` and
``ANYFFI_CUBLAS_LIBRARY``).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import anyffi
from conftest import needs_global

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _cuda_count() -> int:
    try:
        return anyffi.runtime.device_count("cuda")
    except Exception:  # noqa: BLE001 - no driver: skipped below
        return 0


pytestmark = [
    needs_global("ops.add", "runtime.empty"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device"),
    pytest.mark.skipif(_cuda_count() == 0, reason="the library's CUDA runtime finds no device"),
]

DEV = "cuda"
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2)}
DTYPES = list(TOL)


def _rand(*shape, dt=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed + 7 * len(shape))
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dt)


def _gpu(x):
    return x.to(DEV)


def _host(t):
    """An anyffi result (or a torch CUDA tensor) back on the CPU as float64."""
    x = torch.from_dlpack(t) if not isinstance(t, torch.Tensor) else t
    assert x.device.type == "cuda"
    torch.cuda.synchronize()
    return x.cpu().to(torch.float64)


def _close(got, want, dt, atol=None, rtol=None):
    a, r = TOL[dt]
    torch.testing.assert_close(_host(got), want.to(torch.float64), atol=atol or a, rtol=rtol or r)


# --- DLPack and the runtime ---------------------------------------------------------------------


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint8, torch.bool])
def test_torch_cuda_tensor_zero_copy_both_ways(dt):
    x = torch.arange(12, device=DEV).reshape(3, 4).to(dt)
    t = anyffi.from_dlpack(x)
    assert t.device == anyffi.device("cuda", x.device.index or 0)
    assert t.shape == (3, 4) and t.strides == (4, 1)
    assert t.data_ptr == x.data_ptr()
    assert t.__dlpack_device__() == (2, x.device.index or 0)
    back = torch.from_dlpack(t)
    assert back.device == x.device and back.dtype == dt
    assert back.data_ptr() == x.data_ptr()
    assert torch.equal(back, x)


def test_cuda_tensor_numpy_is_a_clear_error():
    for dt in (torch.float32, torch.bfloat16):  # bfloat16: the ml_dtypes path when installed
        t = anyffi.from_dlpack(torch.ones(3, device=DEV, dtype=dt))
        with pytest.raises(BufferError) as e:
            t.numpy()
        assert "cuda" in str(e.value).lower()


def test_runtime_empty_to_device_and_back():
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    d = anyffi.runtime.to_device(host, "cuda:0")
    assert d.device == anyffi.device("cuda", 0)
    assert torch.equal(torch.from_dlpack(d).cpu(), torch.from_numpy(host))
    e = anyffi.runtime.empty((4, 6), "float32", "cuda:0")
    assert e.device == anyffi.device("cuda", 0)
    anyffi.runtime.copy_(e, d)
    back = anyffi.runtime.to_device(e, "cpu")
    np.testing.assert_array_equal(back.numpy(), host)
    # a permuted device view made contiguous on the device
    p = anyffi.runtime.permute(d, (1, 0))
    c = anyffi.runtime.contiguous(p)
    np.testing.assert_array_equal(anyffi.runtime.to_device(c, "cpu").numpy(), host.T)


def test_torch_keeps_anyffi_cuda_tensor_alive():
    import gc

    t = anyffi.runtime.empty((1 << 16,), "float32", "cuda:0")
    y = torch.from_dlpack(t)
    y.fill_(2.0)
    del t
    gc.collect()
    _ = [torch.ones(1 << 16, device=DEV) for _ in range(20)]
    assert float(y.sum()) == 2.0 * (1 << 16)


# --- the operator library -----------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
def test_add_and_swiglu(dt):
    a, b = _rand(37, 129, dt=dt), _rand(37, 129, dt=dt, seed=1)
    _close(anyffi.ops.add(_gpu(a), _gpu(b)), a.double() + b.double(), dt)
    g, u = _rand(300, 65, dt=dt, scale=4), _rand(300, 65, dt=dt, seed=2)
    _close(anyffi.ops.swiglu(_gpu(g), _gpu(u)), F.silu(g.double()) * u.double(), dt)
    # strided operands
    big = _rand(37, 258, dt=dt, seed=3)
    _close(anyffi.ops.add(_gpu(big)[:, ::2], _gpu(b)), big.double()[:, ::2] + b.double(), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_rms_norm(dt):
    x, w = _rand(17, 1000, dt=dt), _rand(1000, dt=dt, seed=3)
    want = F.rms_norm(x.double(), (1000,), w.double(), eps=1e-6)
    _close(anyffi.ops.rms_norm(_gpu(x), _gpu(w), 1e-6), want, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_linear(dt):
    for m, k, n in ((1, 300, 77), (9, 64, 33), (40, 129, 65), (1, 1536, 512)):
        x, w, b = _rand(m, k, dt=dt), _rand(n, k, dt=dt, seed=4), _rand(n, dt=dt, seed=5)
        a, r = TOL[dt]
        tol = dict(atol=a * math.sqrt(k) * 4, rtol=r * 4)
        # cuBLAS computes f32 products with TF32 only when asked to; we ask for full f32
        _close(anyffi.ops.linear(_gpu(x), _gpu(w), _gpu(b)), F.linear(x.double(), w.double(), b.double()), dt, **tol)
        _close(anyffi.ops.linear(_gpu(x), _gpu(w)), F.linear(x.double(), w.double()), dt, **tol)


def test_gemm_batched_alpha_beta():
    a, b, c = _rand(3, 20, 30), _rand(3, 30, 11, seed=1), _rand(3, 20, 11, seed=2)
    out = _gpu(c.clone())
    r = anyffi.ops.gemm(_gpu(a), _gpu(b), alpha=0.5, beta=2.0, out=out)
    assert r is out
    torch.testing.assert_close(_host(out), torch.baddbmm(c.double(), a.double(), b.double(), alpha=0.5, beta=2.0), atol=1e-4, rtol=1e-5)
    # transposed operand views
    at = _gpu(a.transpose(1, 2).contiguous()).transpose(1, 2)
    out2 = anyffi.ops.gemm(at, _gpu(b))
    torch.testing.assert_close(_host(out2), torch.bmm(a.double(), b.double()), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("dt", DTYPES)
def test_embedding_and_argmax(dt):
    w = _rand(50, 24, dt=dt)
    idx = torch.tensor([3, 0, 49, 3, 17], dtype=torch.int64)
    got = torch.from_dlpack(anyffi.ops.embedding(_gpu(idx), _gpu(w)))
    assert torch.equal(got.cpu(), F.embedding(idx, w))
    v = _rand(5000, dt=dt)
    v[10] = v[4000] = 100  # ties: the first index wins, as torch.argmax
    i, m = anyffi.ops.argmax(_gpu(v))
    assert int(torch.from_dlpack(i).cpu()[0]) == int(torch.argmax(v)) == 10
    assert torch.from_dlpack(m).cpu()[0] == v[10]


def test_embedding_bad_index_is_a_clear_error():
    w = _gpu(_rand(50, 24))
    with pytest.raises(IndexError) as e:
        anyffi.ops.embedding(_gpu(torch.tensor([1, 50])), w)
    assert "ops.embedding" in str(e.value)
    # the device is still usable afterwards
    _close(anyffi.ops.add(w, w), 2 * _rand(50, 24).double(), torch.float32)


def _rope_reference(x, pos, theta):
    seq, nh, d = x.shape
    h = d // 2
    den = torch.tensor([np.float32(theta) ** np.float32(2 * k / d) for k in range(h)], dtype=torch.float32)
    ang = (pos.to(torch.float32)[:, None] / den[None, :]).to(torch.float64)
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    a, b = x.double()[..., :h], x.double()[..., h:]
    return torch.cat([a * c - b * s, b * c + a * s], dim=-1)


@pytest.mark.parametrize("dt", DTYPES)
def test_rope(dt):
    x = _rand(11, 4, 64, dt=dt)
    pos = torch.tensor([0, 1, 2, 5, 8, 13, 100, 1000, 4095, 7, 3], dtype=torch.int64)
    got = anyffi.ops.rope(_gpu(x), _gpu(pos), 10000.0)
    _close(got, _rope_reference(x, pos, 10000.0), dt, atol=TOL[dt][0] * 10)


def _attention_reference(q, k, v, scale):
    seq, nh, d = q.shape
    total, nkv, _ = k.shape
    g = nh // nkv
    kk = k.double().repeat_interleave(g, dim=1).permute(1, 0, 2)
    vv = v.double().repeat_interleave(g, dim=1).permute(1, 0, 2)
    qq = q.double().permute(1, 0, 2)
    mask = torch.ones(seq, total, dtype=torch.bool).tril(diagonal=total - seq)
    return F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, scale=scale).permute(1, 0, 2)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "seq,total,nh,nkv,d", [(1, 4096, 12, 2, 128), (5, 5, 4, 4, 32), (7, 40, 6, 3, 64), (1, 3000, 12, 2, 96), (2, 700, 16, 2, 256)]
)
def test_self_attention(dt, seq, total, nh, nkv, d):
    q, k, v = _rand(seq, nh, d, dt=dt), _rand(total, nkv, d, dt=dt, seed=1), _rand(total, nkv, d, dt=dt, seed=2)
    scale = 1 / math.sqrt(d)
    got = anyffi.ops.self_attention(_gpu(q), _gpu(k), _gpu(v), scale)
    _close(got, _attention_reference(q, k, v, scale), dt, atol=TOL[dt][0] * 4)


@pytest.mark.parametrize("dt", DTYPES)
def test_self_attention_unaligned_decode(dt):
    # q, k and v one element past an aligned address: too unaligned for the grouped decode
    # kernel's vector loads, so the per-head decode kernel serves them
    q, k, v = _rand(1, 12, 128, dt=dt), _rand(2000, 2, 128, dt=dt, seed=1), _rand(2000, 2, 128, dt=dt, seed=2)

    def shifted(x):
        buf = torch.empty(x.numel() + 1, dtype=dt, device=DEV)
        y = buf[1:].view(x.shape)
        y.copy_(x)
        return y

    scale = 1 / math.sqrt(128)
    got = anyffi.ops.self_attention(shifted(q), shifted(k), shifted(v), scale)
    _close(got, _attention_reference(q, k, v, scale), dt, atol=TOL[dt][0] * 4)


def test_rearrange_into_a_strided_torch_output():
    a = _rand(8, 8)
    big = torch.zeros(8, 16, device=DEV)
    anyffi.ops.rearrange(_gpu(a), out=big[:, ::2])
    assert torch.equal(big[:, ::2].cpu(), a)
    assert torch.equal(big[:, 1::2].cpu(), torch.zeros(8, 8))


def test_driver_failures_say_what_was_asked():
    # an allocation the GPU cannot hold names its size; a copy whose pointers are on the wrong
    # sides names both and which side the driver expected where; numpy() of a GPU tensor says
    # how to get it to the CPU
    with pytest.raises(RuntimeError, match=r"cuMemAlloc of 1125899906842624 bytes on cuda:0 failed"):
        anyffi.runtime.malloc_device("cuda:0", 1 << 50)
    host = np.zeros(16, np.uint8)
    got = []

    def copy():  # on a thread of its own: the current device is per thread
        anyffi.runtime.set_device("cuda:0")
        try:
            anyffi.runtime.memcpy(host.ctypes.data, host.ctypes.data, 16, anyffi.runtime.H2D)
        except RuntimeError as e:
            got.append(str(e))

    import threading

    th = threading.Thread(target=copy)
    th.start()
    th.join()
    assert got and re.search(r"cuMemcpyHtoD of 16 bytes from host memory 0x[0-9a-f]+ to device memory 0x[0-9a-f]+ failed", got[0]), got
    t = anyffi.runtime.empty((2,), "float32", "cuda:0")
    with pytest.raises(BufferError, match=r"on cuda:0, not the CPU; copy it first: anyffi\.runtime\.to_device\(t, 'cpu'\)"):
        t.numpy()


def test_mixed_devices_are_refused_by_name():
    a, b = _rand(4, 4), _rand(4, 4, seed=1)
    with pytest.raises(ValueError) as e:
        anyffi.ops.add(_gpu(a), b)
    assert "ops.add" in str(e.value)
    with pytest.raises(ValueError) as e:
        anyffi.ops.linear(_gpu(a), b)
    assert "ops.linear" in str(e.value)


def test_ops_run_on_the_environment_stream():
    # TVMFFIEnvSetStream names torch's side stream for cuda:0; the op is queued there, so
    # synchronising that stream alone is enough to read the result
    import ctypes

    lib = ctypes.CDLL(anyffi.library_path)
    lib.TVMFFIEnvSetStream.argtypes = [ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.TVMFFIEnvSetStream.restype = ctypes.c_int
    a, b = _gpu(_rand(1024, 1024)), _gpu(_rand(1024, 1024, seed=1))
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    prev = ctypes.c_void_p()
    assert lib.TVMFFIEnvSetStream(2, 0, s.cuda_stream, ctypes.byref(prev)) == 0
    try:
        with torch.cuda.stream(s):
            out = torch.empty(1024, 1024, device=DEV)
            for _ in range(20):
                anyffi.ops.add(a, b, out=out)
                anyffi.ops.add(out, b, out=out)
        s.synchronize()
        torch.testing.assert_close(out.cpu(), (a + 2 * b).cpu())
    finally:
        assert lib.TVMFFIEnvSetStream(2, 0, prev, None) == 0
