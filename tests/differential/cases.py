"""The differential cases, by group: build(group) -> [(name, fn), ...]; fn() returns a value (turned
into JSON by common.ser) or raises. Deterministic: both processes build the same list, and a case's
name (unique within its group) is its identity in accepted.txt. Cases must not depend on memory the
official library leaves dangling (e.g. an iterator functor outliving its map): such a result is noise."""
import collections
import ctypes
import json
import os
import random
import sys

import numpy as np

import anyffi
from common import G, ser, safe_repr
from paths import HERE, SCRATCH, TESTING_LIB, TINY_MODULE

INF, NAN = float("inf"), float("nan")
BIG = 2**64 + 7

SCALARS = [
    None, True, False, 0, 1, -1, 7, 2**31, -(2**31), 2**63 - 1, -(2**63), 2**63, -(2**63) - 1,
    2**64, 2**100, -(2**100), 0.0, -0.0, 1.0, 1.5, -2.25, 0.1, 1e100, 1e-300, 5e-324, INF, -INF, NAN,
    "", "a", "1", "abcdefg", "abcdefgh", "h\u00e9llo", "\u65e5\u672c\u8a9e", "emoji\U0001F600",
    "a\0b", "\0", "q\"uote\\back\nnl\ttab\x01\x7f", "x" * 1000, b"", b"a", b"\0\xff", b"abcdefgh" * 4,
]


def scalar_name(v):
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def mk(type_key, **fields):
    args = [type_key]
    for k, v in fields.items():
        args += [k, v]
    return G("ffi.MakeObjectFromPackedArgs")(*args)


def arr(*xs):
    return G("ffi.Array")(*xs)


def lst(*xs):
    return G("ffi.List")(*xs)


def mp(*kv):
    return G("ffi.Map")(*kv)


def dct(*kv):
    return G("ffi.Dict")(*kv)


def tensor():
    return anyffi.from_dlpack(np.arange(6, dtype="float32").reshape(2, 3))


# values that exercise containers and objects (made fresh per call)
def COMPOUND():
    return [
        ("arr_empty", lambda: arr()),
        ("arr_123", lambda: arr(1, 2, 3)),
        ("arr_mixed", lambda: arr(1, 1.0, True, "1", b"1", None)),
        ("arr_nested", lambda: arr(arr(1), arr(arr(2, 3)), mp("k", arr()))),
        ("list_123", lambda: lst(1, 2, 3)),
        ("list_empty", lambda: lst()),
        ("map_empty", lambda: mp()),
        ("map_small", lambda: mp("a", 1, "b", 2.5)),
        ("map_intkeys", lambda: mp(*[x for i in range(10) for x in (i, str(i))])),
        ("map_strkeys20", lambda: mp(*[x for i in range(20) for x in ("k%d" % i, i)])),
        ("map_mixedkeys", lambda: mp(1, "i", "1", "s", 2.5, "f", None, "n", b"b", "y")),
        ("dict_small", lambda: dct("a", 1, "b", arr(1))),
        ("dict_empty", lambda: dct()),
        ("shape", lambda: G("ffi.Shape")(2, 3, 4)),
        ("shape_empty", lambda: G("ffi.Shape")()),
        ("bigint", lambda: BIG),
        ("device_cpu", lambda: anyffi.device("cpu", 0)),
        ("device_cuda3", lambda: anyffi.device("cuda", 3)),
        ("dtype_f32", lambda: anyffi.dtype("float32")),
        ("dtype_i8x4", lambda: anyffi.dtype("int8x4")),
        ("dtype_bf16", lambda: anyffi.dtype("bfloat16")),
        ("dtype_bool", lambda: anyffi.dtype("bool")),
        ("intpair", lambda: mk("testing.TestIntPair", a=1, b=2)),
        ("objbase", lambda: mk("testing.TestObjectBase", v_i64=5, v_f64=2.5, v_str="s")),
        ("objderived", lambda: mk("testing.TestObjectDerived", v_i64=1, v_f64=0.5, v_str="d",
                                  v_map=mp("x", arr(1, 2)), v_array=arr("a", None))),
        ("testcompare", lambda: mk("testing.TestCompare", key=1, name="n", ignored_field=9)),
        ("testhash", lambda: mk("testing.TestHash", key=1, name="n", hash_ignored=9)),
        ("customhash", lambda: mk("testing.TestCustomHash", key=3, label="L")),
        ("visitinterrupt", lambda: G("ffi.VisitInterrupt")(arr(1))),
        ("structkey", lambda: G("ffi.StructuralKey")(arr(1, "x"))),
        ("function", lambda: G("ffi.String")),
        ("tensor", tensor),
        ("missing", lambda: G("ffi.GetInvalidObject")()),
        ("kwargs", lambda: G("ffi.GetKwargsObject")()),
        ("shared_twice", lambda: (lambda a: arr(a, a, mp("k", a)))(arr(1, 2))),
        ("voidp", lambda: ctypes.c_void_p(0x1234)),
        ("nullp", lambda: ctypes.c_void_p(0)),
    ]


def ALL_VALUES():
    out = [(scalar_name(v), (lambda v=v: v)) for v in SCALARS]
    out += COMPOUND()
    return out


# ---------------------------------------------------------------------------------------------


def g_array():
    c = []
    for name, mkv in ALL_VALUES():
        c.append(("Array(%s)" % name, lambda mkv=mkv: G("ffi.Array")(mkv(), mkv())))
    c.append(("Array()", lambda: G("ffi.Array")()))
    c.append(("Array(100 elems)", lambda: G("ffi.Array")(*range(100))))
    idxs = [-(2**63), -(2**31) - 1, -4, -3, -1, 0, 1, 2, 3, 4, 2**31, 2**32, 2**63 - 1]
    for base in ("empty", "three"):
        for i in idxs:
            c.append(("ArrayGetItem(%s,%d)" % (base, i),
                      lambda base=base, i=i: G("ffi.ArrayGetItem")(arr() if base == "empty" else arr(1, "b", None), i)))
    for i in (1.0, "1", None, True, 2**64):
        c.append(("ArrayGetItem(three,%r)" % (i,), lambda i=i: G("ffi.ArrayGetItem")(arr(1, 2, 3), i)))
    for name, mkv in COMPOUND() + [("int", lambda: 5), ("str", lambda: "s"), ("none", lambda: None)]:
        c.append(("ArraySize(%s)" % name, lambda mkv=mkv: G("ffi.ArraySize")(mkv())))
        c.append(("ArrayGetItem(%s,0)" % name, lambda mkv=mkv: G("ffi.ArrayGetItem")(mkv(), 0)))
    hay = lambda: arr(1, 2.5, "abc", "abcdefghij", b"xy", None, True, BIG, arr(1), mp("k", 1), -0.0, NAN)
    for name, mkv in ALL_VALUES():
        c.append(("ArrayContains(hay,%s)" % name, lambda mkv=mkv: G("ffi.ArrayContains")(hay(), mkv())))
        c.append(("ArrayContains([v],v)/%s" % name, lambda mkv=mkv: (lambda v: G("ffi.ArrayContains")(arr(v), v))(mkv())))
    c.append(("ArrayContains(empty,1)", lambda: G("ffi.ArrayContains")(arr(), 1)))
    c.append(("ArrayContains(list,1)", lambda: G("ffi.ArrayContains")(lst(1), 1)))
    c.append(("ArrayContains(arr(arr1),[1])", lambda: G("ffi.ArrayContains")(arr(arr(1)), arr(1))))
    c.append(("ArrayContains(big,big)", lambda: G("ffi.ArrayContains")(arr(2**70), 2**70)))
    c.append(("ArrayContains(1,1.0)", lambda: G("ffi.ArrayContains")(arr(1), 1.0)))
    c.append(("ArrayContains(1.0,1)", lambda: G("ffi.ArrayContains")(arr(1.0), 1)))
    c.append(("ArrayContains(True,1)", lambda: G("ffi.ArrayContains")(arr(True), 1)))
    c.append(("ArrayContains(1,True)", lambda: G("ffi.ArrayContains")(arr(1), True)))
    c.append(("ArrayContains(0.0,-0.0)", lambda: G("ffi.ArrayContains")(arr(0.0), -0.0)))
    c.append(("ArrayContains(nan,nan)", lambda: G("ffi.ArrayContains")(arr(NAN), NAN)))
    c.append(("ArrayContains(dev,dev)", lambda: G("ffi.ArrayContains")(arr(anyffi.device("cuda", 1)), anyffi.device("cuda", 1))))
    c.append(("ArrayContains(dtype,dtype)", lambda: G("ffi.ArrayContains")(arr(anyffi.dtype("float16")), anyffi.dtype("float16"))))
    c.append(("ArrayContains(shape,shape)", lambda: G("ffi.ArrayContains")(arr(G("ffi.Shape")(1, 2)), G("ffi.Shape")(1, 2))))
    c.append(("ArrayContains(bytes long)", lambda: G("ffi.ArrayContains")(arr(b"12345678"), b"12345678")))
    c.append(("ArrayContains(str small vs obj)", lambda: G("ffi.ArrayContains")(arr(G("ffi.String")("abc")), "abc")))
    c.append(("ArrayContains(str obj long)", lambda: G("ffi.ArrayContains")(arr("a\0bcdefghi"), "a\0bcdefghi")))
    return c


def _list_after(f):
    def run():
        l = lst(1, "two", 3.0, None, arr(5))
        r = f(l)
        return (r, l)
    return run


def g_list():
    c = []
    for name, mkv in ALL_VALUES():
        c.append(("List(%s)" % name, lambda mkv=mkv: G("ffi.List")(mkv())))
    idxs = [-(2**63), -6, -5, -1, 0, 1, 4, 5, 6, 2**31, 2**63 - 1]
    for i in idxs:
        c.append(("ListGetItem(%d)" % i, _list_after(lambda l, i=i: G("ffi.ListGetItem")(l, i))))
        c.append(("ListSetItem(%d)" % i, _list_after(lambda l, i=i: G("ffi.ListSetItem")(l, i, "X"))))
        c.append(("ListInsert(%d)" % i, _list_after(lambda l, i=i: G("ffi.ListInsert")(l, i, "X"))))
        c.append(("ListPop(%d)" % i, _list_after(lambda l, i=i: G("ffi.ListPop")(l, i))))
        c.append(("ListErase(%d)" % i, _list_after(lambda l, i=i: G("ffi.ListErase")(l, i))))
    rng = [(0, 0), (0, 5), (1, 3), (3, 1), (-1, 2), (0, 6), (5, 5), (6, 7), (2, -1), (-6, -1), (0, 2**63 - 1)]
    for a, b in rng:
        c.append(("ListEraseRange(%d,%d)" % (a, b), _list_after(lambda l, a=a, b=b: G("ffi.ListEraseRange")(l, a, b))))
        c.append(("ListReplaceSlice(%d,%d,[a,b])" % (a, b), _list_after(lambda l, a=a, b=b: G("ffi.ListReplaceSlice")(l, a, b, lst("a", "b")))))
        c.append(("ListReplaceSlice(%d,%d,[])" % (a, b), _list_after(lambda l, a=a, b=b: G("ffi.ListReplaceSlice")(l, a, b, lst()))))
        c.append(("ListReplaceSlice(%d,%d,self)" % (a, b), _list_after(lambda l, a=a, b=b: G("ffi.ListReplaceSlice")(l, a, b, l))))
    c.append(("ListReplaceSlice(arr repl)", _list_after(lambda l: G("ffi.ListReplaceSlice")(l, 0, 1, arr(1)))))
    c.append(("ListReplaceSlice(py list repl)", _list_after(lambda l: G("ffi.ListReplaceSlice")(l, 0, 1, [1, 2]))))
    for n in (-1, 0, 3, 1000, 2**40, 2**62):
        c.append(("ListReserve(%d)" % n, _list_after(lambda l, n=n: G("ffi.ListReserve")(l, n))))
    c.append(("ListReverse", _list_after(lambda l: G("ffi.ListReverse")(l))))
    c.append(("ListReverse(empty)", lambda: (lambda l: (G("ffi.ListReverse")(l), l))(lst())))
    c.append(("ListClear", _list_after(lambda l: G("ffi.ListClear")(l))))
    c.append(("ListAppend", _list_after(lambda l: G("ffi.ListAppend")(l, lst(9)))))
    c.append(("ListAppend(self)", _list_after(lambda l: (G("ffi.ListAppend")(l, l), G("ffi.ListSize")(l)))))
    c.append(("ListSize", _list_after(lambda l: G("ffi.ListSize")(l))))
    for name, mkv in ALL_VALUES():
        c.append(("ListContains(%s)" % name, _list_after(lambda l, mkv=mkv: G("ffi.ListContains")(l, mkv()))))
    # type confusion: list functions on arrays and vice versa
    for fn, extra in [("ListGetItem", (0,)), ("ListSetItem", (0, 1)), ("ListSize", ()), ("ListAppend", (1,)),
                      ("ListInsert", (0, 1)), ("ListPop", (0,)), ("ListErase", (0,)), ("ListEraseRange", (0, 1)),
                      ("ListReplaceSlice", (0, 1, lst())), ("ListReverse", ()), ("ListClear", ()),
                      ("ListReserve", (4,)), ("ListContains", (1,))]:
        for tname, mkv in [("Array", lambda: arr(1, 2)), ("Map", lambda: mp(1, 2)), ("None", lambda: None),
                           ("int", lambda: 3), ("str", lambda: "abc"), ("Dict", lambda: dct())]:
            c.append(("%s(on %s)" % (fn, tname), lambda fn=fn, extra=extra, mkv=mkv: G("ffi." + fn)(mkv(), *extra)))
    # larger list growth and ops
    def grow():
        l = lst()
        for i in range(200):
            G("ffi.ListAppend")(l, i)
        for i in range(0, 100, 3):
            G("ffi.ListErase")(l, i)
        G("ffi.ListInsert")(l, 0, "front")
        G("ffi.ListInsert")(l, G("ffi.ListSize")(l), "back")
        G("ffi.ListReverse")(l)
        return l
    c.append(("List grow/erase/insert/reverse", grow))
    return c


def _map_keys_cases(prefix, ctor, getitem, count, orm, size, itf):
    c = []
    probe_keys = [
        ("1", lambda: 1), ("1.0", lambda: 1.0), ("True", lambda: True), ("'1'", lambda: "1"),
        ("b'1'", lambda: b"1"), ("None", lambda: None), ("0.0", lambda: 0.0), ("-0.0", lambda: -0.0),
        ("nan", lambda: NAN), ("big", lambda: BIG), ("big_neg", lambda: -BIG), ("long str", lambda: "k" * 30),
        ("str obj", lambda: G("ffi.String")("1")), ("arr1", lambda: arr(1)), ("shape", lambda: G("ffi.Shape")(1)),
        ("dev", lambda: anyffi.device("cuda", 1)), ("dtype", lambda: anyffi.dtype("int32")),
        ("unicode", lambda: "\u65e5"), ("nul str", lambda: "a\0b"), ("missing", lambda: "nope"), ("0", lambda: 0),
        ("False", lambda: False), ("-1", lambda: -1), ("inf", lambda: INF),
    ]

    def base():
        return ctor(1, "int1", "1", "str1", None, "none", 0.0, "zero", NAN, "nan", BIG, "big",
                    "k" * 30, "longk", arr(1), "arr", anyffi.device("cuda", 1), "dev", anyffi.dtype("int32"), "dt",
                    b"1", "b1", "\u65e5", "jp", "a\0b", "nul", G("ffi.Shape")(1), "shape", INF, "inf")
    c.append((prefix + "(base) contents", base))
    for kn, mkk in probe_keys:
        c.append(("%sGetItem(base,%s)" % (prefix, kn), lambda mkk=mkk: getitem(base(), mkk())))
        c.append(("%sCount(base,%s)" % (prefix, kn), lambda mkk=mkk: count(base(), mkk())))
        c.append(("%sGetItemOrMissing(base,%s)" % (prefix, kn), lambda mkk=mkk: orm(base(), mkk())))
        c.append(("%sGetItem(empty,%s)" % (prefix, kn), lambda mkk=mkk: getitem(ctor(), mkk())))
        c.append(("%s(k,v,k,v) dup %s" % (prefix, kn), lambda mkk=mkk: ctor(mkk(), 1, mkk(), 2)))
    # mixed numeric identity
    for a, b in [(1, 1.0), (1, True), (0, False), (0.0, -0.0), (NAN, NAN), (1, "1"), (BIG, BIG), (2**63, 2**63),
                 ("abcdefgh", G("ffi.String")("abcdefgh")), (b"ab", "ab"), (arr(1), arr(1)), (None, 0)]:
        c.append(("%s mixed %r vs %r" % (prefix, a if not isinstance(a, anyffi.Object) else "obj", b if not isinstance(b, anyffi.Object) else "obj"),
                  lambda a=a, b=b: (lambda m: (size(m), m))(ctor(a, "A", b, "B"))))
    for n in (0, 1, 4, 5, 8, 9, 16, 17, 33, 100, 257):
        c.append(("%s int keys n=%d" % (prefix, n), lambda n=n: ctor(*[x for i in range(n) for x in (i * 7919 % 1000, i)])))
        c.append(("%s str keys n=%d" % (prefix, n), lambda n=n: ctor(*[x for i in range(n) for x in ("key%d" % i, i)])))
        c.append(("%s float keys n=%d" % (prefix, n), lambda n=n: ctor(*[x for i in range(n) for x in (i * 0.5, i)])))
    c.append(("%s odd args" % prefix, lambda: ctor(1, 2, 3)))
    c.append(("%s one arg" % prefix, lambda: ctor(1)))
    for n in (0, 1, 3, 6, 20):
        def it(n=n):
            m = ctor(*[x for i in range(n) for x in ("k%d" % i, i * 10)])
            if n == 0:
                return "skipped-empty"
            f = itf(m)
            out = []
            for _ in range(n):
                out.append((f(0), f(1)))
                out.append(f(2))
            return out
        c.append(("%sForwardIterFunctor n=%d" % (prefix, n), it))
    return c


def g_map():
    c = _map_keys_cases("Map", lambda *a: G("ffi.Map")(*a), lambda m, k: G("ffi.MapGetItem")(m, k),
                        lambda m, k: G("ffi.MapCount")(m, k), lambda m, k: G("ffi.MapGetItemOrMissing")(m, k),
                        lambda m: G("ffi.MapSize")(m), lambda m: G("ffi.MapForwardIterFunctor")(m))
    for fn, extra in [("MapSize", ()), ("MapGetItem", (1,)), ("MapCount", (1,)), ("MapGetItemOrMissing", (1,)),
                      ("MapForwardIterFunctor", ())]:
        for tname, mkv in [("Dict", lambda: dct(1, 2)), ("Array", lambda: arr(1)), ("None", lambda: None), ("int", lambda: 1)]:
            c.append(("%s(on %s)" % (fn, tname), lambda fn=fn, extra=extra, mkv=mkv: G("ffi." + fn)(mkv(), *extra)))
    # The official iterator functor holds no reference to its map: keep the map alive while it runs.
    def map_iter(*cmds):
        def run():
            m = mp("a", 1, "b", 2, "c", 3)
            f = G("ffi.MapForwardIterFunctor")(m)
            return tuple(f(*cmd) for cmd in cmds)
        return run
    c.append(("MapIter cmd 7", map_iter((7,), (0,))))
    c.append(("MapIter cmd -1", map_iter((-1,), (0,), (1,))))
    c.append(("MapIter cmd str", map_iter(("x",))))
    c.append(("MapIter no args", map_iter(())))
    return c


def g_dict():
    c = _map_keys_cases("Dict", lambda *a: G("ffi.Dict")(*a), lambda m, k: G("ffi.DictGetItem")(m, k),
                        lambda m, k: G("ffi.DictCount")(m, k), lambda m, k: G("ffi.DictGetItemOrMissing")(m, k),
                        lambda m: G("ffi.DictSize")(m), lambda m: G("ffi.DictForwardIterFunctor")(m))
    S, E, Z = G("ffi.DictSetItem"), G("ffi.DictErase"), G("ffi.DictSize")

    def churn(n, seed):
        def run():
            r = random.Random(seed)
            d = dct()
            for _ in range(n):
                k = r.choice([r.randrange(50), "s%d" % r.randrange(50), r.randrange(50) * 0.5])
                if r.random() < 0.6:
                    S(d, k, r.randrange(1000))
                else:
                    E(d, k)
            return (Z(d), d)
        return run
    for n, seed in [(10, 1), (50, 2), (200, 3), (1000, 4), (3000, 5)]:
        c.append(("Dict churn n=%d" % n, churn(n, seed)))
    c.append(("DictErase missing", lambda: (lambda d: (E(d, "zz"), d))(dct("a", 1))))
    c.append(("DictErase nan", lambda: (lambda d: (E(d, NAN), d))(dct(NAN, 1, 1, 2))))
    c.append(("DictSetItem nan twice", lambda: (lambda d: (S(d, NAN, 1), S(d, NAN, 2), d))(dct())))
    c.append(("DictSetItem 1 then 1.0 then True", lambda: (lambda d: (S(d, 1, "a"), S(d, 1.0, "b"), S(d, True, "c"), d))(dct())))
    c.append(("DictClear", lambda: (lambda d: (G("ffi.DictClear")(d), d, Z(d)))(dct(*range(40)))))
    c.append(("DictClear then set", lambda: (lambda d: (G("ffi.DictClear")(d), S(d, "x", 1), d))(dct(*range(40)))))
    c.append(("DictSetItem self value", lambda: (lambda d: (S(d, "self", d), Z(d)))(dct())))
    c.append(("Dict erase all then iter", lambda: (lambda d: ([E(d, i) for i in range(0, 40, 2)], d))(dct(*range(40)))))
    for fn, extra in [("DictSize", ()), ("DictGetItem", (1,)), ("DictCount", (1,)), ("DictSetItem", (1, 2)),
                      ("DictErase", (1,)), ("DictClear", ()), ("DictForwardIterFunctor", ()), ("DictGetItemOrMissing", (1,))]:
        for tname, mkv in [("Map", lambda: mp(1, 2)), ("Array", lambda: arr(1)), ("None", lambda: None), ("str", lambda: "s")]:
            c.append(("%s(on %s)" % (fn, tname), lambda fn=fn, extra=extra, mkv=mkv: G("ffi." + fn)(mkv(), *extra)))
    return c


def g_shape_string():
    c = []
    for name, mkv in ALL_VALUES():
        c.append(("Shape(%s)" % name, lambda mkv=mkv: G("ffi.Shape")(mkv())))
        c.append(("String(%s)" % name, lambda mkv=mkv: G("ffi.String")(mkv())))
        c.append(("Bytes(%s)" % name, lambda mkv=mkv: G("ffi.Bytes")(mkv())))
    c.append(("Shape()", lambda: G("ffi.Shape")()))
    c.append(("Shape(1,2,3)", lambda: G("ffi.Shape")(1, 2, 3)))
    c.append(("Shape(1,'a')", lambda: G("ffi.Shape")(1, "a")))
    c.append(("Shape(-1,0)", lambda: G("ffi.Shape")(-1, 0)))
    c.append(("Shape(100 dims)", lambda: G("ffi.Shape")(*range(100))))
    c.append(("String()", lambda: G("ffi.String")()))
    c.append(("String(a,b)", lambda: G("ffi.String")("a", "b")))
    c.append(("Bytes()", lambda: G("ffi.Bytes")()))
    c.append(("String(1MB)", lambda: len(G("ffi.String")("z" * (1 << 20)))))
    c.append(("Bytes(1MB)", lambda: len(G("ffi.Bytes")(b"\0" * (1 << 20)))))
    c.append(("String(all BMP sample)", lambda: G("ffi.String")("".join(chr(i) for i in range(1, 0xD800, 97)))))
    c.append(("ContainerFindFirstNonCPUDevice()", lambda: G("ffi.ContainerFindFirstNonCPUDevice")()))
    for name, mkv in COMPOUND() + [("int", lambda: 1), ("nested tensors", lambda: arr(lst(tensor()), mp("t", tensor()), dct("d", arr(tensor()))))]:
        c.append(("ContainerFindFirstNonCPUDevice(%s)" % name, lambda mkv=mkv: G("ffi.ContainerFindFirstNonCPUDevice")(mkv())))
    return c


PAIRS = [
    ("1,1", lambda: (1, 1)), ("1,2", lambda: (1, 2)), ("1,1.0", lambda: (1, 1.0)), ("1,True", lambda: (1, True)),
    ("nan,nan", lambda: (NAN, NAN)), ("0.0,-0.0", lambda: (0.0, -0.0)), ("big,big", lambda: (BIG, BIG)),
    ("big,big+1", lambda: (BIG, BIG + 1)), ("big,int", lambda: (2**63, 2**63 - 1)), ("-big,big", lambda: (-BIG, BIG)),
    ("s,s", lambda: ("abc", "abc")), ("s,t", lambda: ("abc", "abd")), ("s,longer", lambda: ("ab", "abc")),
    ("long,long", lambda: ("x" * 50, "x" * 50)), ("smallstr,strobj", lambda: ("abc", G("ffi.String")("abc"))),
    ("s,bytes", lambda: ("ab", b"ab")), ("b,b", lambda: (b"ab\0", b"ab\0")), ("b,b2", lambda: (b"ab\0", b"ab\1")),
    ("None,None", lambda: (None, None)), ("None,0", lambda: (None, 0)), ("None,arr", lambda: (None, arr())),
    ("arr,arr", lambda: (arr(1, 2), arr(1, 2))), ("arr,arr2", lambda: (arr(1, 2), arr(1, 3))),
    ("arr,shorter", lambda: (arr(1, 2), arr(1))), ("arr,list", lambda: (arr(1, 2), lst(1, 2))),
    ("list,list", lambda: (lst(1, "a"), lst(1, "a"))), ("map,map", lambda: (mp("a", 1, "b", 2), mp("b", 2, "a", 1))),
    ("map,map2", lambda: (mp("a", 1), mp("a", 2))), ("map,mapkey", lambda: (mp("a", 1), mp("b", 1))),
    ("map,dict", lambda: (mp("a", 1), dct("a", 1))), ("dict,dict", lambda: (dct("a", arr(1)), dct("a", arr(1)))),
    ("map,bigger", lambda: (mp("a", 1), mp("a", 1, "b", 2))),
    ("shape,shape", lambda: (G("ffi.Shape")(1, 2), G("ffi.Shape")(1, 2))), ("shape,shape2", lambda: (G("ffi.Shape")(1, 2), G("ffi.Shape")(1, 3))),
    ("shape,arr", lambda: (G("ffi.Shape")(1, 2), arr(1, 2))),
    ("dev,dev", lambda: (anyffi.device("cuda", 1), anyffi.device("cuda", 1))), ("dev,dev2", lambda: (anyffi.device("cuda", 1), anyffi.device("cuda", 2))),
    ("dt,dt", lambda: (anyffi.dtype("float32"), anyffi.dtype("float32"))), ("dt,dt2", lambda: (anyffi.dtype("float32"), anyffi.dtype("float16"))),
    ("obj,obj", lambda: (mk("testing.TestObjectBase", v_i64=1, v_f64=2.0, v_str="a"), mk("testing.TestObjectBase", v_i64=1, v_f64=2.0, v_str="a"))),
    ("obj,obj2", lambda: (mk("testing.TestObjectBase", v_i64=1, v_f64=2.0, v_str="a"), mk("testing.TestObjectBase", v_i64=1, v_f64=2.0, v_str="b"))),
    ("objnan,objnan", lambda: (mk("testing.TestObjectBase", v_i64=1, v_f64=NAN, v_str="a"), mk("testing.TestObjectBase", v_i64=1, v_f64=NAN, v_str="a"))),
    ("derived,derived", lambda: (mk("testing.TestObjectDerived", v_map=mp("x", arr(1)), v_array=arr(1, "a")),
                                 mk("testing.TestObjectDerived", v_map=mp("x", arr(1)), v_array=arr(1, "a")))),
    ("derived,derived2", lambda: (mk("testing.TestObjectDerived", v_map=mp("x", arr(1)), v_array=arr(1, "a")),
                                  mk("testing.TestObjectDerived", v_map=mp("x", arr(2)), v_array=arr(1, "a")))),
    ("base,derived", lambda: (mk("testing.TestObjectBase"), mk("testing.TestObjectDerived", v_map=mp(), v_array=arr()))),
    ("cmp,cmp ignored", lambda: (mk("testing.TestCompare", key=1, name="a", ignored_field=1), mk("testing.TestCompare", key=1, name="a", ignored_field=2))),
    ("cmp,cmp key", lambda: (mk("testing.TestCompare", key=1, name="a", ignored_field=1), mk("testing.TestCompare", key=2, name="a", ignored_field=1))),
    ("cmp,cmp name", lambda: (mk("testing.TestCompare", key=1, name="b", ignored_field=1), mk("testing.TestCompare", key=1, name="a", ignored_field=1))),
    ("hash,hash ign", lambda: (mk("testing.TestHash", key=1, name="a", hash_ignored=1), mk("testing.TestHash", key=1, name="a", hash_ignored=2))),
    ("chash,chash", lambda: (mk("testing.TestCustomHash", key=1, label="a"), mk("testing.TestCustomHash", key=1, label="b"))),
    ("ccmp,ccmp", lambda: (mk("testing.TestCustomCompare", key=1, label="a"), mk("testing.TestCustomCompare", key=1, label="b"))),
    ("ccmp,ccmp2", lambda: (mk("testing.TestCustomCompare", key=1, label="a"), mk("testing.TestCustomCompare", key=2, label="a"))),
    ("eqnohash", lambda: (mk("testing.TestEqWithoutHash", key=1, label="a"), mk("testing.TestEqWithoutHash", key=1, label="a"))),
    ("intpair,intpair", lambda: (mk("testing.TestIntPair", a=1, b=2), mk("testing.TestIntPair", a=1, b=2))),
    ("shared dag vs tree", lambda: ((lambda a: arr(a, a))(arr(1)), arr(arr(1), arr(1)))),
    ("tensor,tensor", lambda: (tensor(), tensor())),
    ("func,func same", lambda: (G("ffi.String"), G("ffi.String"))),
    ("func,func diff", lambda: (G("ffi.String"), G("ffi.Bytes"))),
    ("int,str", lambda: (1, "1")), ("float,str", lambda: (1.5, "x")), ("arr,map", lambda: (arr(), mp())),
    ("missing,missing", lambda: (G("ffi.GetInvalidObject")(), G("ffi.GetInvalidObject")())),
    ("skey,skey", lambda: (G("ffi.StructuralKey")(arr(1)), G("ffi.StructuralKey")(arr(1)))),
    ("vi,vi", lambda: (G("ffi.VisitInterrupt")(1), G("ffi.VisitInterrupt")(1))),
    ("nested deep eq", lambda: (_deep(60), _deep(60))),
    ("nested deep ne", lambda: (_deep(60), _deep(60, leaf=2))),
    ("voidp,voidp", lambda: (ctypes.c_void_p(16), ctypes.c_void_p(16))),
    ("voidp,voidp2", lambda: (ctypes.c_void_p(16), ctypes.c_void_p(32))),
    ("-inf,inf", lambda: (-INF, INF)), ("1e-300,5e-324", lambda: (1e-300, 5e-324)),
    ("True,False", lambda: (True, False)), ("int min,max", lambda: (-(2**63), 2**63 - 1)),
]


def _deep(n, leaf=1):
    v = leaf
    for i in range(n):
        v = arr(v, i) if i % 2 else mp("k", v)
    return v


def g_structural():
    c = []
    for pn, mkp in PAIRS:
        for mfv, skip in [(False, False), (True, False), (False, True)]:
            c.append(("StructuralEqual(%s,%s,%s)" % (pn, mfv, skip), lambda mkp=mkp, mfv=mfv, skip=skip: G("ffi.StructuralEqual")(*mkp(), mfv, skip)))
        c.append(("GetFirstStructuralMismatch(%s)" % pn, lambda mkp=mkp: G("ffi.GetFirstStructuralMismatch")(*mkp(), False, False)))
        c.append(("StructuralHash pair eq (%s)" % pn, lambda mkp=mkp: (lambda a, b: G("ffi.StructuralHash")(a, False, False) == G("ffi.StructuralHash")(b, False, False))(*mkp())))
        c.append(("StructuralKeyEqual(%s)" % pn, lambda mkp=mkp: (lambda a, b: G("ffi.StructuralKeyEqual")(G("ffi.StructuralKey")(a), G("ffi.StructuralKey")(b)))(*mkp())))
    for name, mkv in ALL_VALUES():
        c.append(("StructuralHash(%s)" % name, lambda mkv=mkv: G("ffi.StructuralHash")(mkv(), False, False)))
        c.append(("StructuralHash(%s,mfv)" % name, lambda mkv=mkv: G("ffi.StructuralHash")(mkv(), True, False)))
        c.append(("StructuralKey(%s)" % name, lambda mkv=mkv: (lambda k: (k.type_key, safe_repr(k)))(G("ffi.StructuralKey")(mkv()))))
    c.append(("StructuralEqual 2 args", lambda: G("ffi.StructuralEqual")(1, 1)))
    c.append(("StructuralHash 1 arg", lambda: G("ffi.StructuralHash")(1)))
    c.append(("StructuralEqual flag str", lambda: G("ffi.StructuralEqual")(1, 1, "x", False)))
    c.append(("StructuralKeyEqual(non-key)", lambda: G("ffi.StructuralKeyEqual")(1, 1)))
    c.append(("StructuralKeyEqual(key, int)", lambda: G("ffi.StructuralKeyEqual")(G("ffi.StructuralKey")(1), 1)))
    c.append(("StructuralHash deep 5000", lambda: G("ffi.StructuralHash")(_deep(5000), False, False)))
    c.append(("StructuralEqual deep 5000", lambda: G("ffi.StructuralEqual")(_deep(5000), _deep(5000), False, False)))
    c.append(("Map with StructuralKey keys", lambda: (lambda m: (G("ffi.MapSize")(m), G("ffi.MapCount")(m, G("ffi.StructuralKey")(arr(1, 2)))))(
        mp(G("ffi.StructuralKey")(arr(1, 2)), "a", G("ffi.StructuralKey")(arr(1, 2)), "b"))))
    return c


def g_recursive():
    c = []
    for pn, mkp in PAIRS:
        for op in ("Eq", "Lt", "Le", "Gt", "Ge"):
            c.append(("Recursive%s(%s)" % (op, pn), lambda mkp=mkp, op=op: G("ffi.Recursive" + op)(*mkp())))
        c.append(("RecursiveHash pair eq (%s)" % pn, lambda mkp=mkp: (lambda a, b: G("ffi.RecursiveHash")(a) == G("ffi.RecursiveHash")(b))(*mkp())))
    for name, mkv in ALL_VALUES():
        c.append(("RecursiveHash(%s)" % name, lambda mkv=mkv: G("ffi.RecursiveHash")(mkv())))
        c.append(("RecursiveEq(self %s)" % name, lambda mkv=mkv: (lambda v: G("ffi.RecursiveEq")(v, v))(mkv())))
    c.append(("RecursiveHash deep", lambda: G("ffi.RecursiveHash")(_deep(3000))))
    c.append(("RecursiveEq deep", lambda: G("ffi.RecursiveEq")(_deep(3000), _deep(3000))))
    c.append(("RecursiveLt cyclic list", lambda: (lambda l: G("ffi.RecursiveLt")(l, l))((lambda l: (G("ffi.ListAppend")(l, l), l)[1])(lst(1)))))
    return c


def g_deepcopy_repr():
    c = []
    for name, mkv in ALL_VALUES():
        def dc(mkv=mkv):
            v = mkv()
            r = G("ffi.DeepCopy")(v)
            same = isinstance(v, anyffi.Object) and isinstance(r, anyffi.Object) and r.same_as(v)
            return (r, same)
        c.append(("DeepCopy(%s)" % name, dc))
        c.append(("ReprPrint(%s)" % name, lambda mkv=mkv: G("ffi.ReprPrint")(mkv())))
    def dc_shared():
        a = arr(1, 2)
        r = G("ffi.DeepCopy")(lst(a, a))
        return (r, r[0].same_as(r[1]), r[0].same_as(a))
    c.append(("DeepCopy preserves sharing", dc_shared))
    def dc_cycle():
        l = lst(1)
        G("ffi.ListAppend")(l, l)
        r = G("ffi.DeepCopy")(l)
        return (G("ffi.ListSize")(r), r[1].same_as(r), r.same_as(l))
    c.append(("DeepCopy cyclic list", dc_cycle))
    def dc_cycle_dict():
        d = dct()
        G("ffi.DictSetItem")(d, "self", d)
        r = G("ffi.DeepCopy")(d)
        return (G("ffi.DictSize")(r), G("ffi.DictGetItem")(r, "self").same_as(r))
    c.append(("DeepCopy cyclic dict", dc_cycle_dict))
    c.append(("DeepCopy noncopyable", lambda: G("ffi.DeepCopy")(G("ffi.MakeObjectFromPackedArgs")("testing.TestNonCopyable", "value", 1))))
    c.append(("DeepCopy edges", lambda: G("ffi.DeepCopy")(mk("testing.TestDeepCopyEdges", v_any=arr(1, lst(2)), v_obj=dct("a", 1)))))
    c.append(("DeepCopy deep", lambda: G("ffi.StructuralEqual")(G("ffi.DeepCopy")(_deep(2000)), _deep(2000), False, False)))
    floats = [0.1, 1 / 3, 1e16, 1e15, 123456789.0, 1e21, 1e-5, 1e-7, 2.5e-310, 1.7976931348623157e308, -1e-300, 100.0, 3.0, 0.5]
    for f in floats:
        c.append(("ReprPrint(float %r)" % f, lambda f=f: G("ffi.ReprPrint")(f)))
        c.append(("ReprPrint([%r])" % f, lambda f=f: G("ffi.ReprPrint")(arr(f))))
    strs = ["'", '"', "\\", "\n\r\t", "\x00\x01\x1f", "\x7f", "\u0080\u00ff", "\u2028", "\ud7ff", "\U0010ffff", "a'b\"c"]
    for s in strs:
        c.append(("ReprPrint(str %r)" % s, lambda s=s: G("ffi.ReprPrint")(s)))
        c.append(("ReprPrint(bytes %r)" % s, lambda s=s: G("ffi.ReprPrint")(s.encode("utf-8", "surrogatepass"))))
        c.append(("ReprPrint(map key %r)" % s, lambda s=s: G("ffi.ReprPrint")(mp(s, s))))
    c.append(("ReprPrint(bytes all)", lambda: G("ffi.ReprPrint")(bytes(range(256)))))
    c.append(("ReprPrint cyclic list", lambda: (lambda l: (G("ffi.ListAppend")(l, l), G("ffi.ReprPrint")(l))[1])(lst(1))))
    c.append(("ReprPrint cyclic dict", lambda: (lambda d: (G("ffi.DictSetItem")(d, "s", d), G("ffi.ReprPrint")(d))[1])(dct())))
    c.append(("ReprPrint deep 3000", lambda: len(G("ffi.ReprPrint")(_deep(3000)))))
    c.append(("ReprPrint big map", lambda: G("ffi.ReprPrint")(mp(*[x for i in range(30) for x in (i, str(i))]))))
    c.append(("ReprPrint module", lambda: G("ffi.ReprPrint")(G("ffi.SystemLib")())))
    c.append(("ReprPrint error obj", lambda: G("ffi.ReprPrint")(_err_obj())))
    c.append(("ReprPrint 3 dtypes", lambda: G("ffi.ReprPrint")(arr(anyffi.dtype("float8_e4m3fn"), anyffi.dtype("uint1"), anyffi.dtype("int4")))))
    for dev in [("cpu", 0), ("cuda", 0), ("cuda_host", 1), ("rocm", 2), ("metal", 0), ("vulkan", 0), ("ext_dev", 0), ("opencl", 0)]:
        c.append(("ReprPrint device %s" % (dev,), lambda dev=dev: G("ffi.ReprPrint")(anyffi.device(*dev))))
    for code in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 99, 255):
        c.append(("ReprPrint raw dev type %d" % code, lambda code=code: G("ffi.ReprPrint")(_raw_device(code, 7))))
    for code, bits, lanes in [(0, 8, 1), (1, 16, 1), (2, 32, 4), (3, 0, 0), (4, 16, 1), (5, 8, 1), (6, 8, 1), (7, 8, 1), (8, 8, 1),
                              (9, 8, 1), (10, 8, 1), (11, 8, 1), (12, 8, 1), (13, 8, 1), (14, 4, 1), (15, 4, 1), (17, 8, 1), (99, 7, 3),
                              (2, 32, 65535), (0, 32, 0xFFFF), (2, 32, 0x8000)]:
        c.append(("ReprPrint raw dtype %d,%d,%d" % (code, bits, lanes), lambda a=(code, bits, lanes): G("ffi.ReprPrint")(_raw_dtype(*a))))
        c.append(("String(raw dtype %d,%d,%d)" % (code, bits, lanes), lambda a=(code, bits, lanes): G("ffi.String")(_raw_dtype(*a))))
    return c


def _raw_device(device_type, index):
    return sys.modules["anyffi.device"]._device_from_packed(device_type | (index << 32))


def _raw_dtype(code, bits, lanes):
    return sys.modules["anyffi.dtype"]._from_packed(code | (bits << 8) | (lanes << 16))


def _err_obj():
    """An ffi.Error object as a value (made through the C API)."""
    h = anyffi.errors.make_error("ValueError", "boom \"quoted\"", "bt")
    return anyffi.object.wrap_object(h)


JSON_TEXTS = [
    "null", "true", "false", "0", "-0", "1", "-1", "1.0", "-0.0", "1e2", "1E+2", "1e-2", "1.5e300", "1e400", "-1e400",
    "123456789012345678901234567890", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "18446744073709551616", "0.1", "5e-324", "2.5e-324", "1.7976931348623157e308",
    "01", "00", "1.", ".5", "-", "+1", "0x10", "1e", "1e+", "NaN", "Infinity", "-Infinity", "nan", "inf",
    '""', '"abc"', '"a\\"b"', '"\\\\"', '"\\/"', '"\\b\\f\\n\\r\\t"', '"\\u0041"', '"\\u00e9"', '"\\u65e5"',
    '"\\ud83d\\ude00"', '"\\ud83d"', '"\\ude00"', '"\\ud83dx"', '"\\u0000"', '"a\\u0000b"', '"\\x41"', '"\\a"',
    '"\\u12"', '"\\uZZZZ"', '"unterminated', '"tab\there"', '"nl\nhere"', '"\x01"', '"\x7f"', '"h\u00e9llo"',
    '"\U0001F600"', "[]", "[1,2,3]", "[1,]", "[,1]", "[1 2]", "[", "]", "{}", '{"a":1}', '{"a":1,}', '{"a" 1}',
    '{"a":1 "b":2}', '{a:1}', '{1:2}', '{"a":1,"a":2}', '{"b":1,"a":2,"c":3}', '{"":null}', " [ 1 , { \"x\" : [ ] } ] ",
    "\t\n\r 1 \t\n\r", "", " ", "1 2", "[] []", "tru", "nul", "falsee", "True", "NULL", "// c\n1", "/* c */ 1",
    "\ufeff1", "[1e5, -1e-5, 0.0, -0.0]", '{"k": [true, false, null]}', "[[[[[[[[[[]]]]]]]]]]",
    '{"a": {"b": {"c": {}}}}', "1" * 400, "-" + "9" * 30, "1.0e" + "9" * 10, "0." + "0" * 400 + "1",
    '"' + "x" * 10000 + '"', '["a", "b", "a"]', "[1, 1.0, true]", '{"x": 1e999}', "[-]", "[--1]", "-01", "1.5.5",
    "\x00", "[1]\x00", '"\\u0000abc"', '"\\uD834\\uDD1E"', '"\\uDD1E\\uD834"', "[0e0, 0E-0, 0e+0]", "1e-400",
]


def g_json():
    c = []
    P, S = G("ffi.json.Parse"), G("ffi.json.Stringify")
    for t in JSON_TEXTS:
        c.append(("Parse(%r)" % (t[:40],), lambda t=t: P(t)))
        c.append(("Stringify(Parse(%r))" % (t[:40],), lambda t=t: S(P(t), None)))
    for depth in (10, 100, 1000, 5000, 20000, 100000):
        c.append(("Parse deep array %d" % depth, lambda d=depth: _depth_of(P("[" * d + "]" * d))))
        c.append(("Parse deep object %d" % depth, lambda d=depth: _depth_of(P('{"a":' * d + "1" + "}" * d))))
        c.append(("Parse unbalanced %d" % depth, lambda d=depth: P("[" * d)))
    for name, mkv in ALL_VALUES():
        for ind in (None, 0, 2):
            c.append(("Stringify(%s, %r)" % (name, ind), lambda mkv=mkv, ind=ind: S(mkv(), ind)))
    for ind in (None, -1, 0, 1, 4, 100, 2**31, "x", 1.5, True):
        c.append(("Stringify(nested, %r)" % (ind,), lambda ind=ind: S(arr(1, mp("a", arr(), "b", mp(), "c", arr(None, True, 2.5, "s"))), ind)))
    for v in ("abcdefgh", "x" * 300, b"abcdefgh", b"ab"):
        c.append(("Stringify(arr(%r))" % v[:10], lambda v=v: S(arr(v), None)))
        c.append(("Stringify(map key %r)" % v[:10], lambda v=v: S(mp(v, 1), None)))
        c.append(("Stringify(map val %r)" % v[:10], lambda v=v: S(mp("k", v), None)))
        c.append(("VisitInterrupt(%r) repr" % v[:10], lambda v=v: G("ffi.VisitInterrupt")(v)))
        c.append(("StructuralKey(%r) repr" % v[:10], lambda v=v: G("ffi.StructuralKey")(v)))
        c.append(("DeepCopyEdges v_any=%r" % v[:10], lambda v=v: mk("testing.TestDeepCopyEdges", v_any=v, v_obj=None)))
        c.append(("Dict set/get %r" % v[:10], lambda v=v: (lambda d: (G("ffi.DictSetItem")(d, v, v), G("ffi.DictGetItem")(d, v), d))(dct())))
        c.append(("List set/append %r" % v[:10], lambda v=v: (lambda l: (G("ffi.ListAppend")(l, v), G("ffi.ListSetItem")(l, 0, v), G("ffi.ListInsert")(l, 0, v), l))(lst(1))))
        c.append(("ToJSONGraph(%r)" % v[:10], lambda v=v: G("ffi.ToJSONGraph")(v, None)))
        c.append(("ToJSONGraph(md=%r)" % v[:10], lambda v=v: G("ffi.ToJSONGraphString")(1, mp("m", v))))
        c.append(("RecursiveLt(%r, %r)" % (v[:10], v[:10]), lambda v=v: G("ffi.RecursiveLt")(v, v + v[:1])))
        c.append(("RecursiveLt(%r, 1)" % v[:10], lambda v=v: G("ffi.RecursiveLt")(v, 1)))
        c.append(("StructuralMutate(%r) identity" % v[:10], lambda v=v: G("ffi.StructuralMutate")(v, [])))
        c.append(("StructuralMap(%r) identity" % v[:10], lambda v=v: G("ffi.StructuralMap")(v, [], [], 0)))
        c.append(("MapGetItemOrMissing(%r)" % v[:10], lambda v=v: G("ffi.MapGetItemOrMissing")(mp(v, 1), v)))
    c.append(("Stringify map int key", lambda: S(mp(1, 2), None)))
    c.append(("Stringify map float key", lambda: S(mp(1.5, 2), None)))
    c.append(("Stringify map None key", lambda: S(mp(None, 2), None)))
    c.append(("Stringify dict", lambda: S(dct("a", 1), None)))
    c.append(("Stringify list", lambda: S(lst(1, "a"), None)))
    c.append(("Stringify cyclic list", lambda: (lambda l: (G("ffi.ListAppend")(l, l), S(l, None))[1])(lst(1))))
    c.append(("Stringify control chars", lambda: S("".join(chr(i) for i in range(0, 0x80)), None)))
    c.append(("Stringify unicode", lambda: S("\u00e9\u65e5\U0001F600\u2028\ufeff", None)))
    c.append(("Stringify float set", lambda: S(arr(0.1, 1 / 3, 1e16, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, 100.0, -0.0, 2.0**53, 123456789.123), None)))
    c.append(("Stringify large ints", lambda: S(arr(2**63 - 1, -(2**63)), None)))
    c.append(("Stringify map order 20", lambda: S(mp(*[x for i in range(20) for x in ("k%02d" % (19 - i), i)]), None)))
    c.append(("Stringify no indent arg", lambda: S(1)))
    c.append(("Parse no arg", lambda: P()))
    c.append(("Parse int", lambda: P(1)))
    c.append(("Parse bytes", lambda: P(b'[1]')))
    c.append(("Parse deep mixed", lambda: S(P('[{"a":[{"b":[1,2,{"c":"\\u00e9"}]}]}]'), 1)))
    rnd = random.Random(99)
    alphabet = '[]{},:"\\ntrufalse0123456789.-+eEu ' + "\u00e9"
    for k in range(150):
        t = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 20)))
        c.append(("Parse fuzz %d %r" % (k, t), lambda t=t: P(t)))
    # mutated valid documents
    base = '{"a": [1, -2.5e3, "s\\n\\u00e9", true, null, {"b": []}], "c": {"d": false}}'
    for k in range(150):
        s = list(base)
        for _ in range(rnd.randrange(1, 3)):
            op = rnd.randrange(3)
            pos = rnd.randrange(len(s))
            if op == 0:
                del s[pos]
            elif op == 1:
                s.insert(pos, rnd.choice(alphabet))
            else:
                s[pos] = rnd.choice(alphabet)
        t = "".join(s)
        c.append(("Parse mutate %d %r" % (k, t), lambda t=t: P(t)))
    return c


def _depth_of(v):
    d = 0
    while isinstance(v, (anyffi.Array, anyffi.Map, anyffi.List, anyffi.Dict)):
        d += 1
        if isinstance(v, (anyffi.Array, anyffi.List)):
            if len(v) == 0:
                break
            v = v[0]
        else:
            vals = list(v.values())
            if not vals:
                break
            v = vals[0]
    return d


def g_serialization():
    c = []
    T, F, TS, FS = G("ffi.ToJSONGraph"), G("ffi.FromJSONGraph"), G("ffi.ToJSONGraphString"), G("ffi.FromJSONGraphString")
    for name, mkv in ALL_VALUES():
        c.append(("ToJSONGraphString(%s)" % name, lambda mkv=mkv: TS(mkv(), None)))
        c.append(("roundtrip(%s)" % name, lambda mkv=mkv: (lambda v: (lambda r: (r, G("ffi.StructuralEqual")(r, v, False, False)))(FS(TS(v, None))))(mkv())))
        c.append(("ToJSONGraph(%s)" % name, lambda mkv=mkv: T(mkv(), None)))
    for md in [None, mp("a", 1), mp(), dct("x", 1), arr(1), 1, "s", mp(1, 2), mp("v", mp("w", arr(1.5, None)))]:
        c.append(("ToJSONGraphString(1, md=%s)" % ser(md), lambda md=md: TS(arr(1), md)))
    c.append(("ToJSONGraphString 1 arg", lambda: TS(1)))
    graphs = [
        '{"root_index": 0, "nodes": [{"type": "int", "data": 1}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.String", "data": "x"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [1, 2]}, {"type": "int", "data": 5}, {"type": "int", "data": 6}]}',
        '{"root_index": 2, "nodes": [{"type": "int", "data": 5}, {"type": "int", "data": 6}, {"type": "ffi.Array", "data": [0, 1]}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [0]}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [5]}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [-1]}]}',
        '{"root_index": 5, "nodes": [{"type": "int", "data": 1}]}',
        '{"root_index": -1, "nodes": [{"type": "int", "data": 1}]}',
        '{"root_index": 0, "nodes": []}',
        '{"root_index": 0}', '{"nodes": []}', '[]', '1', 'null', '{"root_index": "0", "nodes": []}',
        '{"root_index": 0, "nodes": {}}',
        '{"root_index": 0, "nodes": [{"type": "unknown.Type", "data": 1}]}',
        '{"root_index": 0, "nodes": [{"type": "int"}]}',
        '{"root_index": 0, "nodes": [{"data": 1}]}',
        '{"root_index": 0, "nodes": [1]}',
        '{"root_index": 0, "nodes": [{"type": "int", "data": "1"}]}',
        '{"root_index": 0, "nodes": [{"type": "float", "data": 1}]}',
        '{"root_index": 0, "nodes": [{"type": "float", "data": "nan"}]}',
        '{"root_index": 0, "nodes": [{"type": "bool", "data": 1}]}',
        '{"root_index": 0, "nodes": [{"type": "None"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.BigInt", "data": "123456789012345678901234567890"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.BigInt", "data": " 12"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.BigInt", "data": "12x"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.BigInt", "data": "-0"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.BigInt", "data": "5"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.BigInt", "data": ""}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.BigInt", "data": "+5"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Bytes", "data": "AAEC"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Bytes", "data": "!!!"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Bytes", "data": "AAE"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Map", "data": [1, 2]}, {"type": "ffi.String", "data": "k"}, {"type": "int", "data": 3}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Map", "data": [1]}, {"type": "ffi.String", "data": "k"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Shape", "data": [1, 2]}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Shape", "data": [1, "a"]}]}',
        '{"root_index": 0, "nodes": [{"type": "DataType", "data": "float32"}]}',
        '{"root_index": 0, "nodes": [{"type": "DataType", "data": "notatype"}]}',
        '{"root_index": 0, "nodes": [{"type": "Device", "data": [2, 1]}]}',
        '{"root_index": 0, "nodes": [{"type": "Device", "data": [2]}]}',
        '{"root_index": 0, "nodes": [{"type": "testing.TestIntPair", "data": {"a": 1, "b": 2}}, 1]}',
        '{"root_index": 0, "nodes": [{"type": "testing.TestIntPair", "data": {"a": 1, "b": 2}}]}',
        '{"root_index": 0, "nodes": [{"type": "testing.TestIntPair", "data": {"a": 1}}]}',
        '{"root_index": 0, "nodes": [{"type": "testing.TestIntPair", "data": {"a": 1, "b": 2, "c": 3}}]}',
        '{"root_index": 0, "nodes": [{"type": "testing.TestObjectBase", "data": {}}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Function", "data": null}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [0]}], "metadata": {"x": 1}}',
        '{"root_index": 0, "nodes": [{"type": "ffi.List", "data": [1]}, {"type": "int", "data": 1}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Dict", "data": [1, 1]}, {"type": "int", "data": 1}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.SmallStr", "data": "x"}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Tensor", "data": "AA"}]}',
        '{"root_index": 1.0, "nodes": [{"type": "int", "data": 1}]}',
        '{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": "x"}]}',
        '{"root_index": 0, "nodes": [{"type": 5, "data": 1}]}',
    ]
    for g in graphs:
        c.append(("FromJSONGraphString(%s)" % g[:200], lambda g=g: FS(g)))
        c.append(("FromJSONGraph(parsed %s)" % g[:200], lambda g=g: F(G("ffi.json.Parse")(g))))
    c.append(("FromJSONGraphString invalid json", lambda: FS("{")))
    c.append(("FromJSONGraph(int)", lambda: F(1)))
    c.append(("FromJSONGraph(py dict)", lambda: F({"root_index": 0, "nodes": [{"type": "int", "data": 3}]})))
    c.append(("roundtrip deep 2000", lambda: _depth_of(FS(TS(_deep(2000), None)))))
    c.append(("roundtrip tensor", lambda: FS(TS(tensor(), None))))
    c.append(("ToJSONGraphString tensor", lambda: TS(tensor(), None)))
    c.append(("ToJSONGraphString function", lambda: TS(G("ffi.String"), None)))
    c.append(("ToJSONGraphString opaque", lambda: TS(object(), None)))
    c.append(("ToJSONGraphString cyclic", lambda: (lambda l: (G("ffi.ListAppend")(l, l), TS(l, None))[1])(lst(1))))
    c.append(("ToJSONGraphString shared", lambda: (lambda a: TS(arr(a, a, lst(a)), None))(arr("x"))))
    c.append(("ToJSONGraphString strings", lambda: TS(arr("a\0b", "\u00e9", "\x01", "x" * 20, b"\0\1\2\xff"), None)))
    c.append(("ToJSONGraphString dup values", lambda: TS(arr(1, 1, "s", "s", 2.5, 2.5, None, None, True, True, BIG, BIG), None)))
    return c


def g_globals():
    c = []
    names = shared_names()
    for n in names:
        c.append(("GetGlobalFuncMetadata(%s)" % n, lambda n=n: _meta(n)))
    for n in ("no.such.func", "", "ffi", "a\0b"):
        c.append(("GetGlobalFuncMetadata(%r)" % n, lambda n=n: G("ffi.GetGlobalFuncMetadata")(n)))
    c.append(("GetRegisteredTypeKeys", lambda: G("ffi.GetRegisteredTypeKeys")()))
    c.append(("GetInvalidObject", lambda: (lambda a, b: (a.type_key, a.same_as(b), safe_repr(a)))(G("ffi.GetInvalidObject")(), G("ffi.GetInvalidObject")())))
    c.append(("GetKwargsObject", lambda: (lambda a, b: (a.type_key, a.same_as(b), safe_repr(a)))(G("ffi.GetKwargsObject")(), G("ffi.GetKwargsObject")())))
    c.append(("FunctionListGlobalNamesFunctor ffi names", lambda: (lambda f: sorted(x for x in (f(i) for i in range(f(-1))) if x.startswith("ffi.")))(G("ffi.FunctionListGlobalNamesFunctor")())))
    c.append(("FunctionListGlobalNamesFunctor(-5)", lambda: type(G("ffi.FunctionListGlobalNamesFunctor")()(-5)).__name__))
    c.append(("FunctionListGlobalNamesFunctor(huge)", lambda: G("ffi.FunctionListGlobalNamesFunctor")()(10**6)))
    c.append(("FunctionListGlobalNamesFunctor('x')", lambda: G("ffi.FunctionListGlobalNamesFunctor")()("x")))
    def reg_remove():
        anyffi.register_global_func("differential.tmp", lambda x: x + 1)
        a = anyffi.get_global_func("differential.tmp")(1)
        r1 = G("ffi.FunctionRemoveGlobal")("differential.tmp")
        r2 = G("ffi.FunctionRemoveGlobal")("differential.tmp")
        m = anyffi.get_global_func("differential.tmp", allow_missing=True)
        return (a, r1, r2, m is None)
    c.append(("FunctionRemoveGlobal register/remove", reg_remove))
    c.append(("FunctionRemoveGlobal('')", lambda: G("ffi.FunctionRemoveGlobal")("")))
    c.append(("FunctionRemoveGlobal(1)", lambda: G("ffi.FunctionRemoveGlobal")(1)))
    for v in (None, 1, "s", arr(1), 2.5):
        c.append(("VisitInterrupt(%s)" % ser(v), lambda v=v: G("ffi.VisitInterrupt")(v)))
    c.append(("VisitInterrupt()", lambda: G("ffi.VisitInterrupt")()))
    # MakeObjectFromPackedArgs
    M = G("ffi.MakeObjectFromPackedArgs")
    mcases = [
        ("intpair ok", ("testing.TestIntPair", "a", 1, "b", 2)),
        ("intpair reversed", ("testing.TestIntPair", "b", 2, "a", 1)),
        ("intpair missing b", ("testing.TestIntPair", "a", 1)),
        ("intpair extra", ("testing.TestIntPair", "a", 1, "b", 2, "c", 3)),
        ("intpair dup a", ("testing.TestIntPair", "a", 1, "a", 5, "b", 2)),
        ("intpair a str", ("testing.TestIntPair", "a", "x", "b", 2)),
        ("intpair a float", ("testing.TestIntPair", "a", 1.5, "b", 2)),
        ("intpair a bool", ("testing.TestIntPair", "a", True, "b", 2)),
        ("intpair a big", ("testing.TestIntPair", "a", 2**64, "b", 2)),
        ("intpair a None", ("testing.TestIntPair", "a", None, "b", 2)),
        ("intpair odd", ("testing.TestIntPair", "a", 1, "b")),
        ("intpair key int", ("testing.TestIntPair", 1, 1, "b", 2)),
        ("unknown type", ("no.such.Type",)),
        ("type None", (None,)),
        ("no args", ()),
        ("objbase defaults", ("testing.TestObjectBase",)),
        ("objbase v_f64 int", ("testing.TestObjectBase", "v_f64", 3)),
        ("objbase v_f64 bool", ("testing.TestObjectBase", "v_f64", True)),
        ("objbase v_str int", ("testing.TestObjectBase", "v_str", 3)),
        ("objbase v_str bytes", ("testing.TestObjectBase", "v_str", b"x")),
        ("derived v_map arr", ("testing.TestObjectDerived", "v_map", arr(1), "v_array", arr())),
        ("derived v_array map", ("testing.TestObjectDerived", "v_map", mp(), "v_array", mp())),
        ("derived v_array list", ("testing.TestObjectDerived", "v_map", mp(), "v_array", lst(1))),
        ("derived v_map dict", ("testing.TestObjectDerived", "v_map", dct(), "v_array", arr())),
        ("derived v_array None", ("testing.TestObjectDerived", "v_map", mp(), "v_array", None)),
        ("ptrholder", ("testing.TestObjectPtrHolder", "value", mk("testing.TestObjectBase"))),
        ("ptrholder None", ("testing.TestObjectPtrHolder", "value", None)),
        ("ptrholder wrong", ("testing.TestObjectPtrHolder", "value", arr())),
        ("cxxderived", ("testing.TestCxxClassDerivedDerived", "v_i64", 1, "v_i32", 2, "v_f64", 3.0, "v_bool", True)),
        ("cxxderived i32 overflow", ("testing.TestCxxClassDerivedDerived", "v_i64", 1, "v_i32", 2**40, "v_f64", 3.0, "v_bool", True)),
        ("cxxderived bool int", ("testing.TestCxxClassDerivedDerived", "v_i64", 1, "v_i32", 2, "v_f64", 3.0, "v_bool", 5)),
        ("type index int", (1,)),
        ("type index 999999", (999999,)),
        ("type index -5", (-5,)),
        ("ffi.Array type", ("ffi.Array",)),
        ("ffi.String type", ("ffi.String",)),
        ("ffi.reflection.AccessPath", ("ffi.reflection.AccessPath",)),
        ("ffi.StructuralKey", ("ffi.StructuralKey", "key", 1, "hash_i64", 5)),
        ("ffi.VisitInterrupt", ("ffi.VisitInterrupt",)),
        ("ffi.VisitInterrupt value", ("ffi.VisitInterrupt", "value", arr(1))),
        ("deepcopyedges", ("testing.TestDeepCopyEdges", "v_any", 1, "v_obj", None)),
        ("enumholder", ("testing.TestCxxEnumHolder",)),
    ]
    for name, args in mcases:
        c.append(("MakeObjectFromPackedArgs(%s)" % name, lambda args=args: M(*args)))
    # field getter / setter
    for ti in (0, 1, 2, 3, 65, 64, 70, -1, 100000):
        c.append(("MakeFieldGetter(%d) nonzero" % ti, lambda ti=ti: bool(G("ffi.MakeFieldGetter")(ti))))
    return c


def _meta(n):
    s = G("ffi.GetGlobalFuncMetadata")(n)
    try:
        return ["json", json.loads(s)] if s else ["empty", s]
    except ValueError:
        return ["raw", s]


def _sysmod():
    return G("ffi.SystemLib")()


def _tiny():
    return G("ffi.ModuleLoadFromFile")(TINY_MODULE)


def g_module():
    c = []
    mods = [("syslib", _sysmod), ("syslib_prefix", lambda: G("ffi.SystemLib")("nope_")), ("tiny", _tiny),
            ("tiny_via_so_loader", lambda: G("ffi.Module.load_from_file.so")(TINY_MODULE, "so"))]
    fnames = ["add_one", "add_with_doc", "concat", "missing", "", "__tvm_ffi__metadata", "__tvm_ffi__library_ctx"]
    for mn, mkm in mods:
        c.append(("%s kind" % mn, lambda mkm=mkm: G("ffi.ModuleGetKind")(mkm())))
        c.append(("%s propmask" % mn, lambda mkm=mkm: G("ffi.ModuleGetPropertyMask")(mkm())))
        c.append(("%s writeformats" % mn, lambda mkm=mkm: G("ffi.ModuleGetWriteFormats")(mkm())))
        for fmt in ("", "so", "asm", "ll"):
            c.append(("%s inspect(%r)" % (mn, fmt), lambda mkm=mkm, fmt=fmt: G("ffi.ModuleInspectSource")(mkm(), fmt)))
        c.append(("%s writetofile" % mn, lambda mkm=mkm: G("ffi.ModuleWriteToFile")(mkm(), os.path.join(SCRATCH, "out_mod.bin"), "so")))
        for fn in fnames:
            for qi in (False, True):
                c.append(("%s implements(%s,%s)" % (mn, fn, qi), lambda mkm=mkm, fn=fn, qi=qi: G("ffi.ModuleImplementsFunction")(mkm(), fn, qi)))
                c.append(("%s getfunction(%s,%s)" % (mn, fn, qi), lambda mkm=mkm, fn=fn, qi=qi: G("ffi.ModuleGetFunction")(mkm(), fn, qi)))
                c.append(("%s doc(%s,%s)" % (mn, fn, qi), lambda mkm=mkm, fn=fn, qi=qi: G("ffi.ModuleGetFunctionDoc")(mkm(), fn, qi)))
                c.append(("%s metadata(%s,%s)" % (mn, fn, qi), lambda mkm=mkm, fn=fn, qi=qi: _json_or(G("ffi.ModuleGetFunctionMetadata")(mkm(), fn, qi))))
        c.append(("%s clearimports" % mn, lambda mkm=mkm: G("ffi.ModuleClearImports")(mkm())))
        c.append(("%s reprprint" % mn, lambda mkm=mkm: G("ffi.ReprPrint")(mkm())))
        c.append(("%s getfunction 2 args" % mn, lambda mkm=mkm: G("ffi.ModuleGetFunction")(mkm(), "add_one")))
    def call_tiny():
        m = _tiny()
        return (G("ffi.ModuleGetFunction")(m, "add_one", False)(41), G("ffi.ModuleGetFunction")(m, "concat", False)("ab", "cd"),
                G("ffi.ModuleGetFunction")(m, "make_range", False)(4))
    c.append(("tiny call functions", call_tiny))
    c.append(("tiny raise", lambda: G("ffi.ModuleGetFunction")(_tiny(), "raise_value_error", False)("msg!")))
    def imports():
        a, b = _sysmod(), _tiny()
        G("ffi.ModuleImportModule")(a, b)
        r = (G("ffi.ModuleImplementsFunction")(a, "add_one", True), G("ffi.ModuleImplementsFunction")(a, "add_one", False),
             G("ffi.ModuleGetFunction")(a, "add_one", True)(1) if G("ffi.ModuleGetFunction")(a, "add_one", True) is not None else None,
             _json_or(G("ffi.ModuleGetFunctionMetadata")(a, "add_one", True)), G("ffi.ModuleGetFunctionDoc")(a, "add_with_doc", True))
        G("ffi.ModuleClearImports")(a)
        return r + (G("ffi.ModuleImplementsFunction")(a, "add_one", True),)
    c.append(("import tiny into syslib", imports))
    c.append(("import self", lambda: (lambda a: G("ffi.ModuleImportModule")(a, a))(_tiny())))
    c.append(("import cycle", lambda: (lambda a, b: (G("ffi.ModuleImportModule")(a, b), G("ffi.ModuleImportModule")(b, a)))(_tiny(), _sysmod())))
    c.append(("import non-module", lambda: G("ffi.ModuleImportModule")(_tiny(), arr())))
    c.append(("globals add/remove", lambda: (lambda m: (G("ffi.ModuleGlobalsAdd")(m), G("ffi.ModuleGlobalsRemove")(m), G("ffi.ModuleGlobalsRemove")(m)))(_tiny())))
    # (label, path): the label names the case, so that it does not depend on where the checkout is
    paths = [(p, p) for p in ("/nonexistent/x.so", "/nonexistent/x", "/nonexistent/x.foo", "", "noext", "x.so.1")]
    paths += [("<a .py file>", os.path.join(HERE, "cases.py")), ("<a directory>", HERE),
              ("<missing .so in an existing dir>", os.path.join(HERE, ".so"))]
    for label, p in paths:
        c.append(("ModuleLoadFromFile(%r)" % label, lambda p=p: G("ffi.ModuleLoadFromFile")(p)))
        c.append(("load_from_file.so(%r)" % label, lambda p=p: G("ffi.Module.load_from_file.so")(p, "so")))
    c.append(("load_from_file.so 1 arg", lambda: G("ffi.Module.load_from_file.so")(TINY_MODULE)))
    c.append(("ModuleLoadFromFile testing lib", lambda: G("ffi.ModuleGetKind")(G("ffi.ModuleLoadFromFile")(TESTING_LIB))))
    c.append(("SystemLib(1)", lambda: G("ffi.SystemLib")(1)))
    c.append(("SystemLib(a,b)", lambda: G("ffi.SystemLib")("a", "b")))
    c.append(("SystemLib same object", lambda: G("ffi.SystemLib")().same_as(G("ffi.SystemLib")())))
    return c


def _json_or(s):
    if s is None or not isinstance(s, str):
        return s
    try:
        return ["json", json.loads(s)]
    except ValueError:
        return ["raw", s]


def g_visit():
    c = []
    W, V, Mp, Mu = G("ffi.StructuralWalk"), G("ffi.StructuralVisit"), G("ffi.StructuralMap"), G("ffi.StructuralMutate")
    roots = [("arr", lambda: arr(1, "s", arr(2.5, None), mp("k", arr(3)))),
             ("obj", lambda: mk("testing.TestObjectDerived", v_i64=1, v_f64=0.5, v_str="d", v_map=mp("x", arr(1, 2)), v_array=arr("a", None))),
             ("int", lambda: 5), ("none", lambda: None), ("dict", lambda: dct("a", lst(1, 2))),
             ("shared", lambda: (lambda a: arr(a, a))(arr(7))), ("shape", lambda: G("ffi.Shape")(1, 2)),
             ("big", lambda: BIG), ("str", lambda: "hello world!")]
    arr_ti, map_ti, str_ti = 71, 72, 65
    tis = [("any", -1), ("int", 1), ("float", 3), ("str", str_ti), ("array", arr_ti), ("map", map_ti), ("none", 0)]
    for rn, mkr in roots:
        for tn, ti in tis:
            for order in (0, 1):
                def walk(mkr=mkr, ti=ti, order=order):
                    seen = []
                    r = W(mkr(), [(ti, lambda v: seen.append(ser(v)))], [], order)
                    return (r, seen)
                c.append(("Walk(%s,%s,order=%d)" % (rn, tn, order), walk))
                def walk_dr(mkr=mkr, ti=ti, order=order):
                    seen = []
                    r = W(mkr(), [], [(ti, lambda v, k: seen.append((ser(v), k)))], order)
                    return (r, seen)
                c.append(("WalkDR(%s,%s,order=%d)" % (rn, tn, order), walk_dr))
                def mapf(mkr=mkr, ti=ti, order=order):
                    def f(v):
                        if type(v) is int and not isinstance(v, bool):
                            return v * 10
                        if type(v) is str:
                            return v.upper()
                        return v
                    return Mp(mkr(), [(ti, f)], [], order)
                c.append(("Map(%s,%s,order=%d)" % (rn, tn, order), mapf))
            def visit(mkr=mkr, ti=ti):
                seen = []
                def cb(v, visitor):
                    seen.append(ser(v))
                    seen.append(G("ffi.StructuralVisitorDefRegionKind")(visitor))
                    return G("ffi.StructuralVisitorDefaultVisit")(visitor, v)
                r = V(mkr(), [(ti, cb)])
                return (r, seen)
            c.append(("Visit(%s,%s)" % (rn, tn), visit))
            def mutate(mkr=mkr, ti=ti):
                seen = []
                def cb(v, m):
                    seen.append(ser(v))
                    if type(v) is int and not isinstance(v, bool):
                        return v + 1
                    return G("ffi.StructuralMutatorDefaultMutate")(m, v)
                r = Mu(mkr(), [(ti, cb, False)])
                return (r, seen)
            c.append(("Mutate(%s,%s)" % (rn, tn), mutate))
    # interrupts and walk results
    def interrupt_walk(order):
        def run():
            seen = []
            def cb(v):
                seen.append(ser(v))
                if v == 3:
                    return G("ffi.VisitInterrupt")("stop")
                return None
            r = W(arr(1, arr(2, 3), 4), [(-1, cb)], [], order)
            return (r, seen)
        return run
    c.append(("Walk interrupt pre", interrupt_walk(0)))
    c.append(("Walk interrupt post", interrupt_walk(1)))
    def skip_walk():
        seen = []
        def cb(v):
            seen.append(ser(v))
            return 1 if isinstance(v, anyffi.Array) and len(v) == 2 else 0
        return (W(arr(1, arr(2, 3), mp("a", arr(5, 6))), [(-1, cb)], [], 0), seen)
    c.append(("Walk skip", skip_walk))
    c.append(("Walk bad return", lambda: W(arr(1), [(-1, lambda v: "weird")], [], 0)))
    c.append(("Walk bad return 7", lambda: W(arr(1), [(-1, lambda v: 7)], [], 0)))
    c.append(("Walk order 5", lambda: W(arr(1), [(-1, lambda v: None)], [], 5)))
    c.append(("Walk raise", lambda: W(arr(1), [(-1, _raiser)], [], 0)))
    c.append(("Walk ti 999999", lambda: W(arr(1), [(999999, lambda v: None)], [], 0)))
    c.append(("Walk ti -2", lambda: W(arr(1), [(-2, lambda v: None)], [], 0)))
    c.append(("Walk empty cbs", lambda: W(arr(1), [], [], 0)))
    c.append(("Walk bad entry", lambda: W(arr(1), [(1,)], [], 0)))
    c.append(("Walk bad entry2", lambda: W(arr(1), [1], [], 0)))
    c.append(("Walk bad entry3", lambda: W(arr(1), [("x", lambda v: None)], [], 0)))
    c.append(("Visit interrupt", lambda: V(arr(1, 2), [(-1, lambda v, vis: G("ffi.VisitInterrupt")(v) if v == 2 else G("ffi.StructuralVisitorDefaultVisit")(vis, v))])))
    c.append(("Visit prune", lambda: V(arr(1, 2), [(-1, lambda v, vis: None)])))
    c.append(("Visit visit children", lambda: V(arr(1, arr(2)), [(arr_ti, lambda v, vis: [G("ffi.StructuralVisitorVisit")(vis, x) for x in v] and None)])))
    c.append(("Visit with def region", lambda: V(arr(1), [(-1, lambda v, vis: G("ffi.StructuralVisitorWithDefRegionKind")(vis, 2, lambda: G("ffi.StructuralVisitorDefRegionKind")(vis)))])))
    c.append(("Visit with def region 9", lambda: V(arr(1), [(-1, lambda v, vis: G("ffi.StructuralVisitorWithDefRegionKind")(vis, 9, lambda: None))])))
    c.append(("Visit bad return", lambda: V(arr(1), [(-1, lambda v, vis: 5)])))
    c.append(("Visit raise", lambda: V(arr(1), [(-1, lambda v, vis: _raiser(v))])))
    c.append(("VisitorVisit outside", lambda: G("ffi.StructuralVisitorVisit")(arr(1), 1)))
    c.append(("VisitorDefRegionKind(int)", lambda: G("ffi.StructuralVisitorDefRegionKind")(1)))
    c.append(("MutatorDefRegionKind(None)", lambda: G("ffi.StructuralMutatorDefRegionKind")(None)))
    def remap():
        out = []
        def cb(v, m):
            if type(v) is str:
                out.append(ser(G("ffi.StructuralMutatorVarRemapGet")(m, v)))
                G("ffi.StructuralMutatorVarRemapSet")(m, v, "R")
                out.append(ser(G("ffi.StructuralMutatorVarRemapGet")(m, v)))
                out.append(G("ffi.StructuralMutatorDefRegionKind")(m))
                return G("ffi.StructuralMutatorWithDefRegionKind")(m, 1, lambda: G("ffi.StructuralMutatorMutate")(m, v + "!"))
            return G("ffi.StructuralMutatorDefaultMutate")(m, v)
        r = Mu(arr("abcdefghijk", 1), [(-1, cb, False)])
        return (r, out)
    c.append(("Mutate remap", remap))
    c.append(("Mutate inplace flag", lambda: Mu(arr(1, 2), [(1, lambda v, m, mode: v + mode, True)])))
    c.append(("Mutate raise", lambda: Mu(arr(1, 2), [(1, lambda v, m: _raiser(v), False)])))
    c.append(("Mutate bad entry", lambda: Mu(arr(1, 2), [(1, lambda v, m: v)])))
    c.append(("Map return wrong type in container", lambda: Mp(G("ffi.Shape")(1, 2), [(1, lambda v: "x")], [], 1)))
    c.append(("Map obj field type change", lambda: Mp(mk("testing.TestIntPair", a=1, b=2), [(1, lambda v: "x")], [], 1)))
    c.append(("Map obj field ok", lambda: Mp(mk("testing.TestIntPair", a=1, b=2), [(1, lambda v: v + 100)], [], 1)))
    c.append(("Map map keys", lambda: Mp(mp(1, 2, 3, 4), [(1, lambda v: v * 2)], [], 1)))
    c.append(("Map map keys collide", lambda: Mp(mp(1, "a", 2, "b"), [(1, lambda v: 0)], [], 1)))
    c.append(("Map deep", lambda: _depth_of(Mp(_deep(3000), [(1, lambda v: v)], [], 1))))
    c.append(("Walk deep", lambda: W(_deep(3000), [(1, lambda v: None)], [], 1)))
    for root in ("short", "a long string root", b"by", b"long bytes root!!"):
        for ti in (-1, 8, 9, 11, 12, 65, 66):
            c.append(("Walk(root=%r, ti=%d)" % (root, ti), lambda root=root, ti=ti: (lambda seen: (W(root, [(ti, lambda v: seen.append(ser(v)))], [], 0), seen))([])))
            c.append(("Walk(arr(root=%r), ti=%d)" % (root, ti), lambda root=root, ti=ti: (lambda seen: (W(arr(root), [(ti, lambda v: seen.append(ser(v)))], [], 0), seen))([])))
            c.append(("Map(root=%r, ti=%d)" % (root, ti), lambda root=root, ti=ti: Mp(root, [(ti, lambda v: "R")], [], 0)))
            c.append(("Mutate(root=%r, ti=%d)" % (root, ti), lambda root=root, ti=ti: Mu(root, [(ti, lambda v, m: "R", False)])))
    c.append(("VisitErrorContext.FindAccessPaths(bad)", lambda: G("ffi.VisitErrorContext.FindAccessPaths")(arr(1), arr(1), False)))
    c.append(("VisitErrorContext.FindAccessPaths(none)", lambda: G("ffi.VisitErrorContext.FindAccessPaths")(arr(1), None, False)))
    c.append(("VisitErrorContext via raise", _visit_err_ctx))
    return c


def _raiser(v):
    raise ValueError("cb raised %r" % (v,))


def _visit_err_ctx():
    # an error raised from a walk callback carries a VisitErrorContext in official? report message.
    root = arr(1, arr(2, mp("k", 3)))
    def cb(v):
        if v == 3:
            raise KeyError("deep")
        return None
    try:
        G("ffi.StructuralWalk")(root, [(-1, cb)], [], 0)
    except BaseException as e:  # noqa: BLE001
        return (type(e).__name__, str(e))
    return "no error"


DANGEROUS = {"ffi.FunctionFromExternC", "ffi._RegisterFFIInit", "ffi._PyClassRegisterTypeAttrColumns",
             "ffi.MakeFieldSetter", "ffi.MakeFieldGetter"}


def g_arity():
    c = []
    names = shared_names()
    argsets = [("()", lambda: ()), ("(None)", lambda: (None,)), ("(1)", lambda: (1,)), ("(str)", lambda: ("abcdefghij",)),
               ("(1.5)", lambda: (1.5,)), ("([1])", lambda: (arr(1),)), ("({})", lambda: (mp(),)), ("(b'x')", lambda: (b"x",)),
               ("(dev)", lambda: (anyffi.device("cpu", 0),)), ("(dtype)", lambda: (anyffi.dtype("int32"),)),
               ("(obj)", lambda: (mk("testing.TestIntPair", a=1, b=2),)), ("(opaque)", lambda: (object(),)),
               ("(1,2)", lambda: (1, 2)), ("(None,None,None)", lambda: (None, None, None)),
               ("(s,s,s,s)", lambda: ("a", "b", "c", "d")), ("(x9)", lambda: tuple(range(9))),
               ("(big)", lambda: (BIG,)), ("(list,1,2)", lambda: (lst(1, 2, 3), 1, 2))]
    for n in names:
        if n in DANGEROUS or n == "ffi.FunctionRemoveGlobal":
            continue
        for an, mka in argsets:
            c.append(("%s%s" % (n, an), lambda n=n, mka=mka: G(n)(*mka())))
    for an, mka in [("()", lambda: ()), ("(None)", lambda: (None,)), ("('x')", lambda: ("x",)), ("(1.5)", lambda: (1.5,))]:
        for n in sorted(DANGEROUS - {"ffi.FunctionFromExternC"}):
            c.append(("%s%s" % (n, an), lambda n=n, mka=mka: G(n)(*mka())))
    c.append(("FunctionFromExternC()", lambda: G("ffi.FunctionFromExternC")()))
    c.append(("FunctionFromExternC('x','y','z')", lambda: G("ffi.FunctionFromExternC")("x", "y", "z")))
    return c


class _FakeDev:
    """A DLPack producer whose DLTensor claims a non-CPU device (memory is never touched)."""

    def __init__(self, dev_type, dev_id):
        self.a = np.arange(4, dtype="float32")
        self.t, self.i = dev_type, dev_id

    def __dlpack_device__(self):
        return (self.t, self.i)

    def __dlpack__(self, **kw):
        cap = self.a.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype = ctypes.c_void_p
        get.argtypes = [ctypes.py_object, ctypes.c_char_p]
        p = get(cap, b"dltensor")
        ctypes.c_int32.from_address(p + 8).value = self.t
        ctypes.c_int32.from_address(p + 12).value = self.i
        return cap


def g_tensor():
    c = []
    arrays = [
        ("f32 2x3", lambda: np.arange(6, dtype="float32").reshape(2, 3)),
        ("f32 2x3 other", lambda: np.arange(6, dtype="float32").reshape(2, 3) + 1),
        ("f32 3x2", lambda: np.arange(6, dtype="float32").reshape(3, 2)),
        ("i32 2x3", lambda: np.arange(6, dtype="int32").reshape(2, 3)),
        ("f64 scalar", lambda: np.array(1.5)),
        ("empty", lambda: np.zeros((0, 3), dtype="float32")),
        ("strided view", lambda: np.arange(12, dtype="float32").reshape(3, 4)[:, ::2]),
        ("transposed", lambda: np.arange(6, dtype="float32").reshape(2, 3).T),
        ("bool", lambda: np.array([True, False])),
        ("f16", lambda: np.arange(4, dtype="float16")),
        ("nan", lambda: np.array([np.nan, 1.0], dtype="float32")),
        ("u8 big", lambda: np.arange(1000, dtype="uint8")),
    ]
    for an, mka in arrays:
        c.append(("ReprPrint(tensor %s)" % an, lambda mka=mka: G("ffi.ReprPrint")(anyffi.from_dlpack(mka()))))
        c.append(("StructuralHash(tensor %s)" % an, lambda mka=mka: G("ffi.StructuralHash")(anyffi.from_dlpack(mka()), False, False)))
        c.append(("StructuralHash(tensor %s, skip)" % an, lambda mka=mka: G("ffi.StructuralHash")(anyffi.from_dlpack(mka()), False, True)))
        c.append(("RecursiveHash(tensor %s)" % an, lambda mka=mka: G("ffi.RecursiveHash")(anyffi.from_dlpack(mka()))))
        c.append(("DeepCopy(tensor %s)" % an, lambda mka=mka: (lambda t: (lambda r: (r, r.same_as(t)))(G("ffi.DeepCopy")(t)))(anyffi.from_dlpack(mka()))))
        c.append(("ToJSONGraphString(tensor %s)" % an, lambda mka=mka: G("ffi.ToJSONGraphString")(anyffi.from_dlpack(mka()), None)))
        c.append(("roundtrip(tensor %s)" % an, lambda mka=mka: (lambda t: (lambda r: (r, G("ffi.StructuralEqual")(r, t, False, False)))(G("ffi.FromJSONGraphString")(G("ffi.ToJSONGraphString")(t, None))))(anyffi.from_dlpack(mka()))))
        c.append(("numpy-view arg ReprPrint(%s)" % an, lambda mka=mka: G("ffi.ReprPrint")(mka())))
        for bn, mkb in arrays:
            for skip in (False, True):
                c.append(("StructuralEqual(%s,%s,skip=%s)" % (an, bn, skip), lambda mka=mka, mkb=mkb, skip=skip: G("ffi.StructuralEqual")(anyffi.from_dlpack(mka()), anyffi.from_dlpack(mkb()), False, skip)))
            c.append(("RecursiveEq(%s,%s)" % (an, bn), lambda mka=mka, mkb=mkb: G("ffi.RecursiveEq")(anyffi.from_dlpack(mka()), anyffi.from_dlpack(mkb()))))
            c.append(("RecursiveLt(%s,%s)" % (an, bn), lambda mka=mka, mkb=mkb: G("ffi.RecursiveLt")(anyffi.from_dlpack(mka()), anyffi.from_dlpack(mkb()))))
    for dt, di in [(2, 0), (2, 3), (4, 1), (13, 0), (1, 0), (3, 0)]:
        def fake(dt=dt, di=di):
            return anyffi.from_dlpack(_FakeDev(dt, di))
        c.append(("FindFirstNonCPU(arr(fake %d:%d))" % (dt, di), lambda fake=fake: G("ffi.ContainerFindFirstNonCPUDevice")(arr(1, lst(tensor(), mp("k", fake()))))))
        c.append(("FindFirstNonCPU(bare fake %d:%d)" % (dt, di), lambda fake=fake: G("ffi.ContainerFindFirstNonCPUDevice")(fake())))
        c.append(("FindFirstNonCPU(dict fake %d:%d)" % (dt, di), lambda fake=fake: G("ffi.ContainerFindFirstNonCPUDevice")(dct(fake(), fake()))))
        c.append(("ReprPrint(fake %d:%d)" % (dt, di), lambda fake=fake: G("ffi.ReprPrint")(fake())))
        c.append(("ToJSONGraphString(fake %d:%d)" % (dt, di), lambda fake=fake: G("ffi.ToJSONGraphString")(fake(), None)))
    c.append(("FindFirstNonCPU(two fakes order)", lambda: G("ffi.ContainerFindFirstNonCPUDevice")(arr(anyffi.from_dlpack(_FakeDev(2, 1)), anyffi.from_dlpack(_FakeDev(4, 2))))))
    return c


def shared_names():
    """The ~100 global functions both libraries register (all of the official library's `ffi.*`)."""
    with open(os.path.join(HERE, "shared_names.json")) as f:
        return sorted(json.load(f))


GROUPS = {
    "array": g_array, "list": g_list, "map": g_map, "dict": g_dict, "shape_string": g_shape_string,
    "structural": g_structural, "recursive": g_recursive, "deepcopy_repr": g_deepcopy_repr, "json": g_json,
    "serialization": g_serialization, "globals": g_globals, "module": g_module, "visit": g_visit, "arity": g_arity,
    "tensor": g_tensor,
}


def build(group):
    cases = GROUPS[group]()
    counts = collections.Counter(n for n, _ in cases)
    dup = sorted(n for n, k in counts.items() if k > 1)
    assert not dup, "%s: case names must be unique: %s" % (group, dup[:5])
    return cases
