"""Map/Dict/List/Array layout probe (C ABI only, via ctypes).

Usage: python3 tests/probe/map_layout.py path/to/libtvm_ffi.so > out.json

Builds containers through a library's ffi.* globals and dumps their raw layouts (slot metadata,
items, iteration links, growth) and error messages as JSON. Run it on the official library and
on ours and diff the outputs; ffi/src/map/tests/fixtures.rs was generated from its output.
"""
import ctypes as C, sys, json

lib = C.CDLL(sys.argv[1])

class Any(C.Structure):
    _fields_ = [("type_index", C.c_int32), ("pad", C.c_uint32), ("v", C.c_uint64)]

class ByteArray(C.Structure):
    _fields_ = [("data", C.c_char_p), ("size", C.c_size_t)]

lib.TVMFFIFunctionGetGlobal.argtypes = [C.POINTER(ByteArray), C.POINTER(C.c_void_p)]
lib.TVMFFIFunctionCall.argtypes = [C.c_void_p, C.POINTER(Any), C.c_int32, C.POINTER(Any)]
lib.TVMFFIStringFromByteArray.argtypes = [C.POINTER(ByteArray), C.POINTER(Any)]
lib.TVMFFIErrorMoveFromRaised.argtypes = [C.POINTER(C.c_void_p)]

def glob(name):
    b = name.encode()
    out = C.c_void_p()
    assert lib.TVMFFIFunctionGetGlobal(C.byref(ByteArray(b, len(b))), C.byref(out)) == 0
    assert out.value, name
    return out

def err():
    e = C.c_void_p()
    lib.TVMFFIErrorMoveFromRaised(C.byref(e))
    # ErrorCell at +24: kind bytearray, message bytearray
    kind = C.cast(e.value + 24, C.POINTER(ByteArray)).contents
    msg = C.cast(e.value + 40, C.POINTER(ByteArray)).contents
    return kind.data[:kind.size].decode() + ": " + msg.data[:msg.size].decode()

def call(f, *args):
    arr = (Any * max(1, len(args)))(*args)
    res = Any(0, 0, 0)
    rc = lib.TVMFFIFunctionCall(f, arr, len(args), C.byref(res))
    if rc != 0:
        return ("ERR", err())
    return res

def s(text):
    b = text.encode()
    out = Any()
    assert lib.TVMFFIStringFromByteArray(C.byref(ByteArray(b, len(b))), C.byref(out)) == 0
    return out

def i(v):
    return Any(1, 0, v & 0xFFFFFFFFFFFFFFFF)

def u64(addr):
    return C.c_uint64.from_address(addr).value

def describe(a):
    ti = a.type_index
    if ti == 1:
        return "i%d" % C.c_int64(a.v).value
    if ti == 11:
        n = a.pad
        return "s:" + a.v.to_bytes(8, "little")[:n].decode()
    if ti == 65:
        ba = C.cast(a.v + 24, C.POINTER(ByteArray)).contents
        return "S:" + ba.data[:ba.size].decode()
    return "t%d:%x" % (ti, a.v)

def dump(m):
    obj = m.v
    data, size, slots = u64(obj + 24), u64(obj + 32), u64(obj + 40)
    out = {"ti": m.type_index, "size": size}
    if slots >> 63:
        out["small"] = slots & ~(1 << 63)
        out["data_is_inline"] = data == obj + 56
        out["deleter_null"] = u64(obj + 48) == 0
        out["kv"] = [(describe(Any.from_address(data + 32 * k)), describe(Any.from_address(data + 32 * k + 16))) for k in range(size)]
    else:
        out["slots"] = slots
        out["fib_shift"] = C.c_uint32.from_address(obj + 56).value
        out["head"], out["tail"] = C.c_int64(u64(obj + 64)).value, C.c_int64(u64(obj + 72)).value
        metas, items = [], {}
        for k in range(slots):
            blk = data + (k // 16) * 784
            meta = C.c_uint8.from_address(blk + k % 16).value
            metas.append(meta)
            if meta not in (0xFF, 0xFE):
                it = blk + 16 + (k % 16) * 48
                items[k] = (describe(Any.from_address(it)), describe(Any.from_address(it + 16)),
                            C.c_int64(u64(it + 32)).value, C.c_int64(u64(it + 40)).value)
        out["meta"] = metas
        out["items"] = items
    return out

def iter_order(m, kind):
    size = call(glob("ffi.%sSize" % kind), m).v
    if size == 0:
        return []
    it = call(glob("ffi.%sForwardIterFunctor" % kind), m)
    order = []
    while True:
        k = call(C.c_void_p(it.v), i(0))
        v = call(C.c_void_p(it.v), i(1))
        order.append((describe(k), describe(v)))
        more = call(C.c_void_p(it.v), i(2))
        if not more.v:
            break
    return order

result = {}
Map, Dict = glob("ffi.Map"), glob("ffi.Dict")
for n in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 40, 100]:
    args = []
    for k in range(n):
        args += [s("key%d" % k) if k % 3 else s("a-long-key-number-%d" % k), i(k)]
    m = call(Map, *args)
    result["map%d" % n] = dump(m)
    result["map%d_iter" % n] = iter_order(m, "Map")
# integer keys (collide more predictably), update of an existing key, duplicates
args = []
for k in range(30):
    args += [i(k * 7919), i(k)]
args += [i(7919 * 3), i(-1), i(0), i(-2)]
m = call(Map, *args)
result["int30"] = dump(m)
result["int30_iter"] = iter_order(m, "Map")
# full small map + update of an existing key turns dense
m = call(Map, s("a"), i(1), s("b"), i(2), s("c"), i(3), s("d"), i(4), s("a"), i(5))
result["small_full_update"] = dump(m)
result["small_full_update_iter"] = iter_order(m, "Map")
# Dict mutations
d = call(Dict)
SetItem, Erase = glob("ffi.DictSetItem"), glob("ffi.DictErase")
log = []
for k in range(12):
    call(SetItem, d, s("k%d" % k), i(k))
    log.append(dump(d))
for k in [3, 0, 11, 5]:
    call(Erase, d, s("k%d" % k))
    log.append(dump(d))
call(SetItem, d, s("k3"), i(33))
call(SetItem, d, s("k1"), i(11))
log.append(dump(d))
result["dict_log"] = log
result["dict_iter"] = iter_order(d, "Dict")
small = call(Dict, s("x"), i(1), s("y"), i(2), s("z"), i(3))
call(Erase, small, s("x"))
result["dict_small_erase"] = dump(small)
# error messages
result["err_getitem"] = call(glob("ffi.MapGetItem"), call(Map, s("a"), i(1)), s("b"))
result["err_odd"] = call(Map, s("a"))
result["err_arr"] = call(glob("ffi.ArrayGetItem"), call(glob("ffi.Array"), i(1), i(2)), i(5))
result["err_list_erase_range"] = call(glob("ffi.ListEraseRange"), call(glob("ffi.List"), i(1)), i(1), i(0))
result["err_list_insert"] = call(glob("ffi.ListInsert"), call(glob("ffi.List"), i(1)), i(5), i(0))
result["err_map_on_dict"] = call(glob("ffi.MapGetItem"), call(Dict, s("a"), i(1)), s("a"))
lst = call(glob("ffi.List"), i(1), i(2), i(3))
result["list3_cap"] = (u64(lst.v + 32), u64(lst.v + 40), u64(lst.v + 48) != 0, u64(lst.v + 24) != lst.v + 56)
call(glob("ffi.ListAppend"), lst, i(4)); call(glob("ffi.ListAppend"), lst, i(5))
result["list5_cap"] = (u64(lst.v + 32), u64(lst.v + 40))
arr = call(glob("ffi.Array"), i(1), i(2), i(3))
result["array3"] = (u64(arr.v + 24) == arr.v + 56, u64(arr.v + 32), u64(arr.v + 40), u64(arr.v + 48))
arrlist = call(glob("ffi.Array"), i(1))
result["listappend_on_array"] = call(glob("ffi.ListAppend"), arrlist, i(2))
result["listappend_on_array"] = str(result["listappend_on_array"]) if isinstance(result["listappend_on_array"], tuple) else "ok:%d" % call(glob("ffi.ArraySize"), arrlist).v
result["empty_list_cap"] = u64(call(glob("ffi.List")).v + 40)
result["missing_same"] = call(glob("ffi.GetInvalidObject")).v == call(glob("ffi.GetInvalidObject")).v
mm = call(glob("ffi.MapGetItemOrMissing"), call(Map, s("a"), i(1)), s("b"))
result["missing_type"] = (mm.type_index, mm.v == call(glob("ffi.GetInvalidObject")).v)

def norm(x):
    if isinstance(x, Any):
        return describe(x)
    return x
print(json.dumps({k: norm(v) for k, v in result.items()}, indent=None, sort_keys=True, default=str))
