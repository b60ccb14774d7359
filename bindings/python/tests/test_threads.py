"""Many Python threads calling at once; callbacks run on the calling thread."""

from __future__ import annotations

import threading

import anyffi
import pytest
from conftest import needs_global

np = pytest.importorskip("numpy")

N_THREADS = 8
N_CALLS = 2000


def run_threads(target, n: int = N_THREADS) -> list:
    """Runs ``target(i)`` on ``n`` threads at once; the exceptions they raised."""
    errors: list = []

    def wrap(i):
        try:
            target(i)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def test_concurrent_calls(t):
    def work(i):
        for j in range(N_CALLS):
            assert t.echo(i * N_CALLS + j) == i * N_CALLS + j
            assert t.echo(f"thread {i} call {j} text") == f"thread {i} call {j} text"
            assert t.add_one(j) == j + 1

    assert run_threads(work) == []


def test_callbacks_run_on_calling_thread(t):
    def work(i):
        me = threading.get_ident()
        for j in range(200):
            assert t.apply(lambda a: (threading.get_ident() == me) and a + 1, j) == j + 1

    assert run_threads(work) == []


def test_concurrent_errors_stay_per_thread(t):
    kinds = [ValueError, KeyError, IndexError, TypeError]

    def work(i):
        cls = kinds[i % len(kinds)]
        for j in range(300):
            try:
                t.raise_error(cls.__name__, f"{i}-{j}")
            except cls as e:
                assert e.args[0] == f"{i}-{j}"
            else:
                raise AssertionError("no error")

    assert run_threads(work) == []


def test_concurrent_python_errors_through_rust(t):
    def work(i):
        for j in range(300):
            err = ValueError(f"{i}-{j}")

            def bad():
                raise err

            try:
                t.apply(bad)
            except ValueError as e:
                assert e is err

    assert run_threads(work) == []


def test_concurrent_tensors(t):
    def work(i):
        x = np.full(16, i, dtype="int32")
        for _ in range(500):
            y = t.echo(x)
            assert y.numpy()[0] == i
            seen = []
            t.apply(lambda v: seen.append(v.numpy()[3]), x)
            assert seen == [i]

    assert run_threads(work) == []


def test_concurrent_function_creation(t):
    def work(i):
        for j in range(500):
            f = anyffi.Function(lambda j=j: j * 2)
            assert t.apply(f) == j * 2

    assert run_threads(work) == []


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_ops_work_in_a_forked_child():
    # The kernels' thread pool does not survive fork(); a child must build its own rather than
    # wait forever for the parent's workers (multiprocessing's default start method on Linux).
    import os
    import subprocess
    import sys
    import textwrap

    if anyffi.get_global_func("ops.add", allow_missing=True) is None:
        pytest.skip("ops.* not in this library")
    code = textwrap.dedent(
        """
        import os, numpy as np, anyffi
        a = np.ones((512, 4096), np.float32)  # large enough to run on the pool
        anyffi.ops.add(a, a)
        pid = os.fork()
        if pid == 0:
            c = anyffi.ops.add(a, a).numpy()
            os._exit(0 if float(c[511, 4095]) == 2.0 else 3)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert "child exit 0" in out.stdout, (out.stdout, out.stderr)


def test_one_dltensor_in_callbacks_on_several_threads_at_once(t):
    # A parallel C caller hands the same DLTensor* to a Python callback on several threads; each
    # callback's echo(view) is its own view (not another thread's, closed under it), and the
    # views are all closed afterwards.
    import ctypes

    from anyffi import _capi, tensor as tensor_mod

    x = np.arange(8, dtype="float32")
    owner = anyffi.from_dlpack(x)  # an ffi.Tensor: its DLTensor sits after the object header
    dl = owner.handle + _capi.OBJ_CELL

    def cb(v):
        r = t.echo(v)
        return int(r is v and r.shape == (8,))

    f = anyffi.Function(cb)

    def work(i):
        arg, res = _capi.TVMFFIAny(), _capi.TVMFFIAny()
        arg.type_index, arg.v_int64 = _capi.kDLTensorPtr, dl
        for _ in range(300):
            rc = _capi.TVMFFIFunctionCall(ctypes.c_void_p(f.handle), ctypes.byref(arg), 1, ctypes.byref(res))
            assert rc == 0 and (res.type_index, res.v_int64) == (1, 1)

    assert run_threads(work) == []
    assert not tensor_mod._CALLBACK_VIEWS


def test_reading_a_list_while_another_thread_changes_it():
    # a List's reads go through the library's container lock: raw reads of its cells raced with
    # clear/extend in another thread (freed buffer, released elements: heap corruption)
    li = anyffi.List([anyffi.Array([i]) for i in range(300)])
    stop = threading.Event()

    def mutator():
        while not stop.is_set():
            li.clear()
            li.extend([anyffi.Array([i]) for i in range(300)])

    th = threading.Thread(target=mutator)
    th.start()
    try:
        for _ in range(60):
            for j in range(300):
                try:
                    li[j][0]
                except IndexError:
                    pass
            for x in li[:]:
                x[0]
            for x in li:
                x[0]
    finally:
        stop.set()
        th.join()


def test_op_results_do_not_depend_on_the_thread_count():
    # Every op splits its work by the shape alone: the same inputs give the same bits with 1, 2,
    # 3 or 7 kernel threads. Decode attention used to split its keys into 4 x threads chunks
    # (merged in chunk order), so its last bits changed with ANYFFI_NUM_THREADS.
    import os
    import subprocess
    import sys
    import textwrap

    if anyffi.get_global_func("ops.self_attention", allow_missing=True) is None:
        pytest.skip("ops.* not in this library")
    code = textwrap.dedent(
        """
        import hashlib, numpy as np
        from anyffi import ops
        dts = [np.float32, np.float16]
        try:
            import ml_dtypes
            dts.append(ml_dtypes.bfloat16)
        except ImportError:
            pass
        rng = np.random.default_rng(1)
        h = hashlib.sha1()
        def r(*s):
            return rng.standard_normal(s).astype(dt)
        def put(t):
            h.update(np.ascontiguousarray(t.numpy()).view(np.uint8).tobytes())
        for dt in dts:
            x, y = r(300, 1000), r(300, 1000)
            put(ops.add(x, y)); put(ops.swiglu(x, y)); put(ops.rms_norm(x, r(1000), 1e-5))
            put(ops.rms_norm(r(2, 40000), r(40000), 1e-5))
            put(ops.rope(r(64, 8, 128), np.arange(64, dtype=np.int64), 10000.0))
            put(ops.argmax(r(151936))[0])
            for m, k, n in [(1, 1536, 2000), (5, 700, 900), (64, 512, 640), (1, 9000, 64)]:
                put(ops.linear(r(m, k), r(n, k), r(n)))
            put(ops.gemm(r(4, 100, 300), r(4, 300, 200)))
            for l, s, nh, hk, d in [(1, 4096, 12, 2, 128), (1, 1000, 8, 8, 64), (3, 700, 6, 2, 64),
                                    (9, 2048, 4, 1, 64), (40, 600, 4, 2, 32)]:
                put(ops.self_attention(r(l, nh, d), r(s, hk, d), r(s, hk, d), 0.125))
        print(len(dts), h.hexdigest())
        """
    )
    seen = {}
    for threads in (1, 2, 3, 7):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), ANYFFI_NUM_THREADS=str(threads))
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
        )
        assert out.returncode == 0, out.stderr
        seen[threads] = out.stdout.strip()
    assert len(set(seen.values())) == 1, seen


@needs_global("anyffi.testing.apply", "runtime.empty")
def test_a_call_holds_its_arguments_while_other_threads_run():
    # Calls release the GIL: another thread may close() an argument (or the Function) meanwhile,
    # dropping the reference its Python object held. The call holds references of its own until
    # it returns (it read freed memory before: a crash, or another tensor's data).
    apply = anyffi.get_global_func("anyffi.testing.apply")
    t = anyffi.runtime.empty((4,), "float32")
    counts: list = []
    cb = anyffi.Function(lambda x: counts.append(t.use_count))
    for release_gil in (True, False):
        apply.release_gil = release_gil
        apply(cb, t)
    # one reference more while other threads may run (the GIL released) than while they cannot
    assert counts[0] == counts[1] + 1 and t.use_count == 1 and cb.use_count == 1


@needs_global("runtime.empty", "ops.add")
def test_closing_a_tensor_another_threads_op_is_reading():
    from anyffi import ops, runtime as rt

    n = 1 << 22
    a = rt.empty((n,), "float32")
    a.numpy()[:] = 1.0
    out = rt.empty((n,), "float32")
    outcome: list = []

    def worker():
        for _ in range(200):
            try:
                ops.add(a, a, out=out)
            except ValueError as e:
                outcome.append(str(e))
                return

    th = threading.Thread(target=worker)
    th.start()
    while not out.numpy()[0]:
        pass
    a.close()
    th.join()
    assert outcome and "closed" in outcome[0]
    assert float(out.numpy()[-1]) == 2.0  # every call that ran read the tensor's own data
