"""The cases of the testing-library comparison: every one of the 59 `testing.*` functions of the
official libtvm_ffi_testing.so, called with representative arguments (and some bad ones).

record_golden.py runs each case on the OFFICIAL library and writes what happened to golden.json;
test_testing_functions.py runs the same case on the library under test and compares. A case is a
thunk; `describe` turns its result (or its exception) into plain JSON data: the Python type, a
structural description (containers element by element, objects field by field, tensors by shape,
strides, dtype, device and which input buffer they alias) and repr() with addresses scrubbed.
"""

from __future__ import annotations

import ctypes
import math
import re
from typing import Any, Callable, NamedTuple

import numpy as np
import tvm_ffi
from tvm_ffi.core import Object

# The 59 testing.* functions of the official testing library, by family
# (../shared/spec/tvm-ffi-globals.txt; spec §9).
FUNCTIONS = {
    "general": ["add_one", "echo", "nop", "apply", "test_raise_error", "run_check_signal",
                "object_use_count", "make_unregistered_object"],
    "c_symbols": ["get_add_one_c_symbol", "get_mlir_add_one_c_symbol"],
    "tensor_view": ["optional_tensor_view_has_value", "enum_variant_get", "TestIntPairSum"],
    "containers": ["make_array_with_tensor", "make_array_with_mixed", "make_nested_array_with_tensor",
                   "make_list_with_tensor", "make_map_with_tensor", "make_dict_with_tensor",
                   "make_empty_array_with_tensor_input", "make_nested_map_with_tensor",
                   "make_visit_region_graph"],
    "schema": ["schema_id_int", "schema_id_float", "schema_id_bool", "schema_id_device", "schema_id_dtype",
               "schema_id_string", "schema_id_bytes", "schema_id_func", "schema_id_func_typed",
               "schema_id_any", "schema_id_object", "schema_id_dltensor", "schema_id_tensor",
               "schema_tensor_view_input", "schema_id_opt_int", "schema_id_opt_str", "schema_id_opt_obj",
               "schema_id_arr_int", "schema_id_arr_str", "schema_id_arr_obj", "schema_id_arr",
               "schema_id_list_int", "schema_id_list_str", "schema_id_list_obj", "schema_id_map_str_int",
               "schema_id_map_str_str", "schema_id_map_str_obj", "schema_id_map", "schema_id_dict_str_int",
               "schema_id_dict_str_str", "schema_id_variant_int_str", "schema_packed", "schema_arr_map_opt",
               "schema_variant_mix", "schema_no_args", "schema_no_return", "schema_no_args_no_return"],
}  # fmt: skip
FAMILY_OF = {f: fam for fam, names in FUNCTIONS.items() for f in names}


class Case(NamedTuple):
    id: str  # "<family>/<function>/<what>"
    family: str
    function: str  # the testing.* function exercised
    thunk: Callable[[], Any]
    inputs: tuple  # numpy arrays the result may alias
    issue4: bool  # needs the issue 4 reflection machinery (enums, structural fixtures)


def fn(name: str) -> Any:
    return tvm_ffi.get_global_func(name)


_HEX = re.compile(r"0x[0-9a-fA-F]+")


def scrub(text: str) -> str:
    return _HEX.sub("0x?", text)


def describe(value: Any, inputs: tuple = ()) -> Any:
    """Plain JSON data describing `value` (deterministic across runs and libraries)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {"int": str(value)} if abs(value) >= 2**53 else value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return {"float": repr(value)}
        return {"float": value.hex()}
    if isinstance(value, tvm_ffi.Tensor):
        data = value.data_ptr()
        alias = [i for i, a in enumerate(inputs) if isinstance(a, np.ndarray) and a.ctypes.data == data]
        return {
            "Tensor": {
                "shape": list(value.shape),
                "strides": list(value.strides),
                "dtype": str(value.dtype),
                "device": str(value.device),
                "aliases_input": alias[0] if alias else None,
            }
        }
    if isinstance(value, tvm_ffi.Shape):
        return {"Shape": list(value)}
    if isinstance(value, tvm_ffi.dtype):
        return {"dtype": str(value)}
    if isinstance(value, tvm_ffi.Device):
        return {"Device": [value.type, value.index]}
    if isinstance(value, str):  # str and tvm_ffi String
        return value
    if isinstance(value, bytes):  # bytes and tvm_ffi Bytes
        return {"bytes": value.hex()}
    if isinstance(value, ctypes.c_void_p):
        return {"c_void_p": value.value}
    if isinstance(value, (tvm_ffi.Array, tvm_ffi.List)):
        return {type(value).__name__: [describe(v, inputs) for v in value]}
    if isinstance(value, (tvm_ffi.Map, tvm_ffi.Dict)):
        return {type(value).__name__: [[describe(k, inputs), describe(v, inputs)] for k, v in value.items()]}
    if isinstance(value, tvm_ffi.Function):
        return {"Function": True}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [describe(v, inputs) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[describe(k, inputs), describe(v, inputs)] for k, v in value.items()]}
    if isinstance(value, Object):
        info = type(value).__tvm_ffi_type_info__
        fields = {}
        ti = info
        while ti is not None:
            for f in ti.fields:
                fields.setdefault(f.name, describe(getattr(value, f.name), inputs))
            ti = ti.parent_type_info
        return {"Object": {"type_key": info.type_key, "type_index": info.type_index, "fields": fields}}
    return {"python": type(value).__name__}


def run_case(case: Case) -> dict:
    """What happened when the case ran: a result or an exception."""
    try:
        result = case.thunk()
    except Exception as e:  # noqa: BLE001
        return {"raises": type(e).__name__, "message": scrub(str(e))}
    return {
        "type": type(result).__name__,
        "value": describe(result, case.inputs),
        "repr": scrub(repr(result)),
    }


# --- helpers used by the cases --------------------------------------------------------------


def _call_mlir_symbol(address: int, x: int) -> tuple:
    """Calls `_mlir_add_one_c_symbol(void** packed_args)` with ctypes: packed_args points at
    (handle, args, num_args, result, ret_code)."""

    class Any_(ctypes.Structure):
        _fields_ = [("type_index", ctypes.c_int32), ("pad", ctypes.c_uint32), ("v_int64", ctypes.c_int64)]

    arg = Any_(1, 0, x)  # kTVMFFIInt
    result = Any_(0, 0, 0)
    handle = ctypes.c_void_p(0)
    args_ptr = ctypes.pointer(arg)
    num_args = ctypes.c_int32(1)
    result_ptr = ctypes.pointer(result)
    ret_code = ctypes.c_int(-7)
    packed = (ctypes.c_void_p * 5)(
        ctypes.cast(ctypes.pointer(handle), ctypes.c_void_p),
        ctypes.cast(ctypes.pointer(args_ptr), ctypes.c_void_p),
        ctypes.cast(ctypes.pointer(num_args), ctypes.c_void_p),
        ctypes.cast(ctypes.pointer(result_ptr), ctypes.c_void_p),
        ctypes.cast(ctypes.pointer(ret_code), ctypes.c_void_p),
    )
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)(ctypes.cast(packed, ctypes.c_void_p))
    return (ret_code.value, result.type_index, result.v_int64)


def _use_count_cases() -> list:
    def in_containers():
        o = fn("testing.make_unregistered_object")()
        keep = [tvm_ffi.convert([o, o]), tvm_ffi.convert({"k": o})]
        n = fn("testing.object_use_count")(o)
        del keep
        return [n, fn("testing.object_use_count")(o)]

    def of_function():
        f = fn("testing.add_one")
        return fn("testing.object_use_count")(f) >= 2  # the registry and this reference

    return [
        ("fresh", lambda: fn("testing.object_use_count")(fn("testing.make_unregistered_object")())),
        ("in_containers", in_containers),
        ("function", of_function),
        ("not_object", lambda: fn("testing.object_use_count")(1)),
    ]


def build_cases() -> list[Case]:
    """All cases; arrays are made here so each case can report aliasing of its inputs."""
    cases: list[Case] = []

    def add(family, function, what, thunk, inputs=(), issue4=False):
        cases.append(Case(f"{family}/{function}/{what}", family, function, thunk, tuple(inputs), issue4))

    # --- general ------------------------------------------------------------------------
    g = "general"
    add(g, "add_one", "int", lambda: fn("testing.add_one")(41))
    add(g, "add_one", "negative", lambda: fn("testing.add_one")(-1))
    add(g, "add_one", "int32_overflow", lambda: fn("testing.add_one")(2**31 - 1))
    add(g, "add_one", "bool", lambda: fn("testing.add_one")(True))
    add(g, "add_one", "str", lambda: fn("testing.add_one")("x"))
    add(g, "add_one", "float", lambda: fn("testing.add_one")(1.5))
    add(g, "add_one", "none", lambda: fn("testing.add_one")(None))
    add(g, "add_one", "two_args", lambda: fn("testing.add_one")(1, 2))
    add(g, "add_one", "no_args", lambda: fn("testing.add_one")())
    for what, v in [
        ("int", 7), ("bigint", -(2**100)), ("float", 0.1), ("nan", math.nan), ("bool", False),
        ("none", None), ("small_str", "hi"), ("long_str", "L" * 300), ("unicode", "π≈3.14159"),
        ("small_bytes", b"\x00\xff"), ("long_bytes", bytes(range(200))),
        ("device", tvm_ffi.device("cuda", 3)), ("dtype", tvm_ffi.dtype("float8_e5m2x4")),
        ("list", [1, "a", [2.5, None]]), ("dict", {"k": [1], "j": {"x": None}}),
        ("c_void_p", ctypes.c_void_p(0xABCDEF)),
    ]:  # fmt: skip
        add(g, "echo", what, lambda v=v: fn("testing.echo")(v, "ignored"))
    add(g, "echo", "object", lambda: fn("testing.echo")(fn("testing.make_unregistered_object")()))
    add(g, "echo", "function", lambda: fn("testing.echo")(fn("testing.add_one"))(1))
    add(g, "nop", "no_args", lambda: fn("testing.nop")())
    add(g, "nop", "many_args", lambda: fn("testing.nop")(1, "two", [3], {"4": 5}, None))
    add(g, "apply", "python", lambda: fn("testing.apply")(lambda a, b: [b, a], 1, "x"))
    add(g, "apply", "ffi_function", lambda: fn("testing.apply")(fn("testing.add_one"), 9))
    add(g, "apply", "nested", lambda: fn("testing.apply")(fn("testing.apply"), lambda: "deep"))
    add(g, "apply", "raises_value_error", lambda: fn("testing.apply")(_raiser(ValueError, "cb value")))
    add(g, "apply", "raises_type_error", lambda: fn("testing.apply")(_raiser(TypeError, "cb type")))
    add(g, "apply", "raises_key_error", lambda: fn("testing.apply")(_raiser(KeyError, "cb key")))
    add(g, "apply", "raises_other", lambda: fn("testing.apply")(_raiser(ZeroDivisionError, "cb zero")))
    add(g, "apply", "not_callable", lambda: fn("testing.apply")(1, 2))
    for kind in ("ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError", "AttributeError",
                 "InternalError", "NotImplementedError", "CustomKind"):  # fmt: skip
        add(g, "test_raise_error", kind, lambda kind=kind: fn("testing.test_raise_error")(kind, f"msg {kind}"))
    add(g, "test_raise_error", "bad_args", lambda: fn("testing.test_raise_error")(1, 2))
    add(g, "run_check_signal", "zero", lambda: fn("testing.run_check_signal")(0))
    add(g, "run_check_signal", "one", lambda: fn("testing.run_check_signal")(1))
    for what, thunk in _use_count_cases():
        add(g, "object_use_count", what, thunk)
    add(g, "make_unregistered_object", "fields", lambda: fn("testing.make_unregistered_object")())
    add(g, "make_unregistered_object", "methods",
        lambda: (lambda o: [o.get_v1_plus_one(), o.get_v2_plus_two()])(fn("testing.make_unregistered_object")()))  # fmt: skip

    # --- C symbols ----------------------------------------------------------------------
    c = "c_symbols"

    def add_one_through_extern_c(x):
        sym = fn("testing.get_add_one_c_symbol")()
        f = fn("ffi.FunctionFromExternC")(ctypes.c_void_p(0), ctypes.c_void_p(sym), ctypes.c_void_p(0))
        return f(x)

    add(c, "get_add_one_c_symbol", "nonzero_int", lambda: fn("testing.get_add_one_c_symbol")() > 0)
    add(c, "get_add_one_c_symbol", "stable", lambda: fn("testing.get_add_one_c_symbol")() == fn("testing.get_add_one_c_symbol")())  # fmt: skip
    add(c, "get_add_one_c_symbol", "call", lambda: add_one_through_extern_c(41))
    add(c, "get_add_one_c_symbol", "call_bad_arg", lambda: add_one_through_extern_c("x"))
    add(c, "get_add_one_c_symbol", "system_lib",
        lambda: tvm_ffi.system_lib().get_function("testing.add_one")(1))  # fmt: skip
    add(c, "get_mlir_add_one_c_symbol", "call",
        lambda: _call_mlir_symbol(fn("testing.get_mlir_add_one_c_symbol")(), 41))  # fmt: skip

    # --- tensor-view helpers ------------------------------------------------------------
    t = "tensor_view"
    x = np.arange(6, dtype="float32").reshape(2, 3)
    add(t, "optional_tensor_view_has_value", "array", lambda: fn("testing.optional_tensor_view_has_value")(x))
    add(t, "optional_tensor_view_has_value", "none", lambda: fn("testing.optional_tensor_view_has_value")(None))
    add(t, "optional_tensor_view_has_value", "tensor",
        lambda: fn("testing.optional_tensor_view_has_value")(tvm_ffi.from_dlpack(x)))  # fmt: skip
    add(t, "optional_tensor_view_has_value", "int", lambda: fn("testing.optional_tensor_view_has_value")(3))
    for what in ("Alpha", "Beta", "Gamma"):
        add(t, "enum_variant_get", what, lambda what=what: fn("testing.enum_variant_get")(what), issue4=True)
    add(t, "enum_variant_get", "attr_code",
        lambda: [fn("testing.enum_variant_get")("Alpha").same_as(fn("testing.enum_variant_get")("Alpha"))],
        issue4=True)  # fmt: skip
    pair = tvm_ffi.testing.TestIntPair
    add(t, "TestIntPairSum", "pair", lambda: fn("testing.TestIntPairSum")(pair(3, 4)))
    add(t, "TestIntPairSum", "negative", lambda: fn("testing.TestIntPairSum")(pair(-10, 4)))
    add(t, "TestIntPairSum", "wrong_object", lambda: fn("testing.TestIntPairSum")(fn("testing.make_unregistered_object")()))  # fmt: skip
    add(t, "TestIntPairSum", "none", lambda: fn("testing.TestIntPairSum")(None))

    # --- container helpers --------------------------------------------------------------
    k = "containers"
    a = np.arange(4, dtype="float32")
    b = np.ones((2, 2), dtype="int64")
    add(k, "make_array_with_tensor", "basic", lambda: fn("testing.make_array_with_tensor")(a), [a])
    add(k, "make_array_with_tensor", "not_tensor", lambda: fn("testing.make_array_with_tensor")([1]))
    add(k, "make_array_with_mixed", "basic", lambda: fn("testing.make_array_with_mixed")(a, 7), [a])
    add(k, "make_nested_array_with_tensor", "basic", lambda: fn("testing.make_nested_array_with_tensor")(b), [b])
    add(k, "make_list_with_tensor", "basic", lambda: fn("testing.make_list_with_tensor")(a, -3), [a])
    add(k, "make_map_with_tensor", "basic", lambda: fn("testing.make_map_with_tensor")(b), [b])
    add(k, "make_map_with_tensor", "lookup",
        lambda: (lambda m: [m["value"], m["name"], "tensor" in m, "other" in m, len(m)])(fn("testing.make_map_with_tensor")(b)))  # fmt: skip
    add(k, "make_dict_with_tensor", "basic", lambda: fn("testing.make_dict_with_tensor")(a), [a])
    add(k, "make_dict_with_tensor", "mutate",
        lambda: (lambda d: (d.__setitem__("new", 1), d.pop("value"), d)[2])(fn("testing.make_dict_with_tensor")(a)), [a])  # fmt: skip
    add(k, "make_empty_array_with_tensor_input", "basic", lambda: fn("testing.make_empty_array_with_tensor_input")(a))
    add(k, "make_nested_map_with_tensor", "basic", lambda: fn("testing.make_nested_map_with_tensor")(a, b), [a, b])
    add(k, "make_visit_region_graph", "with_hook", lambda: fn("testing.make_visit_region_graph")(True), issue4=True)
    add(k, "make_visit_region_graph", "without_hook", lambda: fn("testing.make_visit_region_graph")(False), issue4=True)

    # --- schema identity functions ------------------------------------------------------
    s = "schema"
    tensor_in = np.arange(3, dtype="float64")
    obj = fn("testing.make_unregistered_object")
    identity_args = {
        "schema_id_int": [("small", 5), ("max", 2**63 - 1), ("min", -(2**63)), ("big", 2**64), ("bool", True),
                          ("float", 1.0), ("str", "5")],
        "schema_id_float": [("float", 2.5), ("int", 3), ("inf", math.inf), ("bool", True), ("str", "x")],
        "schema_id_bool": [("true", True), ("int", 2), ("zero", 0), ("float", 1.0), ("none", None)],
        "schema_id_device": [("cpu", tvm_ffi.device("cpu", 0)), ("cuda", tvm_ffi.device("cuda", 2)),
                             ("int", 1)],
        "schema_id_dtype": [("f32", tvm_ffi.dtype("float32")), ("str", "int8x4"), ("bad_str", "notatype"),
                            ("int", 1)],
        "schema_id_string": [("small", "abc"), ("long", "s" * 100), ("empty", ""), ("bytes", b"abc"), ("int", 1)],
        "schema_id_bytes": [("small", b"abc"), ("long", b"b" * 100), ("str", "abc"), ("int", 1)],
        "schema_id_func": [("ffi", fn("testing.add_one")), ("int", 1)],
        "schema_id_func_typed": [("int", 1)],
        "schema_id_any": [("int", 1), ("str", "any"), ("list", [1, [2]]), ("none", None)],
        "schema_id_object": [("object", obj()), ("none", None), ("int", 1)],
        "schema_id_dltensor": [("array", tensor_in), ("int", 1)],
        "schema_id_tensor": [("array", tensor_in), ("list", [1.0]), ("none", None)],
        "schema_tensor_view_input": [("array", tensor_in), ("int", 1)],
        "schema_id_opt_int": [("int", 1), ("none", None), ("str", "x")],
        "schema_id_opt_str": [("str", "x"), ("none", None), ("int", 1)],
        "schema_id_opt_obj": [("object", obj()), ("none", None), ("int", 1)],
        "schema_id_arr_int": [("ints", [1, 2, 3]), ("empty", []), ("mixed", [1, "x"]), ("tuple", (4, 5)),
                              ("floats", [1.0])],
        "schema_id_arr_str": [("strs", ["a", "b" * 40]), ("ints", [1])],
        "schema_id_arr_obj": [("objs", [obj()]), ("none_elem", [None]), ("ints", [1])],
        "schema_id_arr": [("mixed", [1, "a", None]), ("dict", {"a": 1}), ("int", 1)],
        "schema_id_list_int": [("ints", [1, 2]), ("strs", ["a"])],
        "schema_id_list_str": [("strs", ["a", "b"]), ("ints", [1])],
        "schema_id_list_obj": [("objs", [obj()]), ("ints", [1])],
        "schema_id_map_str_int": [("small", {"a": 1}), ("dense", {f"k{i}": i for i in range(9)}),
                                  ("bad_value", {"a": "x"}), ("bad_key", {1: 1})],
        "schema_id_map_str_str": [("small", {"a": "b"}), ("bad_value", {"a": 1})],
        "schema_id_map_str_obj": [("objs", {"o": obj()}), ("ints", {"o": 1})],
        "schema_id_map": [("mixed", {1: "a", "b": None}), ("list", [1]), ("empty", {})],
        "schema_id_dict_str_int": [("small", {"a": 1}), ("dense", {f"k{i}": i for i in range(6)}),
                                   ("bad_value", {"a": 1.5})],
        "schema_id_dict_str_str": [("small", {"a": "b"}), ("bad_value", {"a": 1})],
        "schema_id_variant_int_str": [("int", 1), ("str", "s"), ("float", 1.5), ("list", [1])],
        "schema_variant_mix": [("int", 1), ("str", "s"), ("arr", [1, 2]), ("bad_arr", ["x"]), ("float", 1.5)],
        "schema_packed": [("none", None), ("int", 1)],
        "schema_no_return": [("int", 1), ("str", "s")],
    }  # fmt: skip
    for name, variants in identity_args.items():
        for what, v in variants:
            inputs = [v] if isinstance(v, np.ndarray) else []
            add(s, name, what, lambda name=name, v=v: fn(f"testing.{name}")(v), inputs)
    add(s, "schema_id_func", "call_python", lambda: fn("testing.schema_id_func")(lambda q: q * 2)(21))
    add(s, "schema_id_func_typed", "call",
        lambda: (lambda out: (fn("testing.schema_id_func_typed")(lambda i, f, g: out.append([i, f, g()]))(1, 0.5, lambda: "g"), out)[1])([]))  # fmt: skip
    add(s, "schema_id_func_typed", "call_bad_arg",
        lambda: fn("testing.schema_id_func_typed")(lambda i, f, g: None)("x", 0.5, lambda: 1))  # fmt: skip
    add(s, "schema_packed", "many", lambda: fn("testing.schema_packed")(1, "a", [2], {"3": 4}))
    add(s, "schema_arr_map_opt", "with_key", lambda: fn("testing.schema_arr_map_opt")([1, None, 3], {"a": [1]}, "b"))
    add(s, "schema_arr_map_opt", "no_key", lambda: fn("testing.schema_arr_map_opt")([1], {"a": [1, 2]}, None))
    add(s, "schema_arr_map_opt", "overwrite", lambda: fn("testing.schema_arr_map_opt")([7], {"a": [1]}, "a"))
    add(s, "schema_arr_map_opt", "bad_arr", lambda: fn("testing.schema_arr_map_opt")(["x"], {}, None))
    add(s, "schema_arr_map_opt", "bad_map", lambda: fn("testing.schema_arr_map_opt")([], {"a": ["x"]}, None))
    add(s, "schema_no_args", "call", lambda: fn("testing.schema_no_args")())
    add(s, "schema_no_args", "extra_arg", lambda: fn("testing.schema_no_args")(1))
    add(s, "schema_no_args_no_return", "call", lambda: fn("testing.schema_no_args_no_return")())
    add(s, "schema_no_args_no_return", "extra_arg", lambda: fn("testing.schema_no_args_no_return")(1))
    for name in ("testing.schema_id_int", "testing.schema_variant_mix", "testing.schema_arr_map_opt",
                 "testing.add_one", "testing.schema_no_args_no_return"):  # fmt: skip
        short = name.split(".")[1]
        add(FAMILY_OF[short], short, "metadata", lambda name=name: tvm_ffi.get_global_func_metadata(name))
    for case in cases:
        assert FAMILY_OF[case.function] == case.family, case.id
    return cases


def _raiser(exc_type: type, msg: str) -> Callable[[], None]:
    def raiser() -> None:
        raise exc_type(msg)

    return raiser
