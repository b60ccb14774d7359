"""JSON graph serialization (ffi.ToJSONGraphString / FromJSONGraphString) and the JSON helpers
(ffi.json.Parse / Stringify)."""

from __future__ import annotations

import json

import pytest
import tvm_ffi
from tvm_ffi import Object, testing
from tvm_ffi.dataclasses import py_class
from tvm_ffi.serialization import from_json_graph_str, to_json_graph_str

pytestmark = pytest.mark.issue4

# (value, exact JSON graph string written by the official library)
GOLDEN = [
    ([1, 2, 3], '{"root_index":3,"nodes":[{"type":"int","data":1},{"type":"int","data":2},'
     '{"type":"int","data":3},{"type":"ffi.Array","data":[0,1,2]}]}'),
    ({"a": 1, "b": [1.5, "x", None, True]},
     '{"root_index":8,"nodes":[{"type":"ffi.String","data":"a"},{"type":"int","data":1},'
     '{"type":"ffi.String","data":"b"},{"type":"float","data":1.5},{"type":"ffi.String","data":"x"},'
     '{"type":"None"},{"type":"bool","data":true},{"type":"ffi.Array","data":[3,4,5,6]},'
     '{"type":"ffi.Map","data":[0,1,2,7]}]}'),
    ("str", '{"root_index":0,"nodes":[{"type":"ffi.String","data":"str"}]}'),
    (5, '{"root_index":0,"nodes":[{"type":"int","data":5}]}'),
    (2**80, '{"root_index":0,"nodes":[{"type":"ffi.BigInt","data":"1208925819614629174706176"}]}'),
    (None, '{"root_index":0,"nodes":[{"type":"None"}]}'),
    (b"bytes", '{"root_index":0,"nodes":[{"type":"ffi.Bytes","data":"Ynl0ZXM="}]}'),
]  # fmt: skip


@pytest.mark.parametrize(("value", "expected"), GOLDEN, ids=[repr(v) for v, _ in GOLDEN])
def test_golden_json_graph(value, expected) -> None:
    s = to_json_graph_str(value)
    assert s == expected
    back = from_json_graph_str(s)
    assert tvm_ffi.structural_equal(back, tvm_ffi.convert(value))


def test_shape_device_dtype() -> None:
    s = to_json_graph_str(tvm_ffi.Shape((1, 2)))
    assert s == '{"root_index":0,"nodes":[{"type":"ffi.Shape","data":[1,2]}]}'
    assert from_json_graph_str(s) == (1, 2)
    d = to_json_graph_str(tvm_ffi.device("cuda", 1))
    assert d == '{"root_index":0,"nodes":[{"type":"Device","data":[2,1]}]}'
    assert from_json_graph_str(d) == tvm_ffi.device("cuda", 1)
    t = to_json_graph_str(tvm_ffi.dtype("int8"))
    assert t == '{"root_index":0,"nodes":[{"type":"DataType","data":"int8"}]}'
    assert str(from_json_graph_str(t)) == "int8"


def test_testing_objects_round_trip() -> None:
    p = testing.TestIntPair(1, 2)
    s = to_json_graph_str(p)
    assert s == '{"root_index":0,"nodes":[{"type":"testing.TestIntPair","data":{"a":1,"b":2}}]}'
    back = from_json_graph_str(s)
    assert isinstance(back, testing.TestIntPair) and (back.a, back.b) == (1, 2)
    o = testing.TestObjectBase(v_i64=4)
    s = to_json_graph_str(o)
    assert s == (
        '{"root_index":1,"nodes":[{"type":"ffi.String","data":"hello"},'
        '{"type":"testing.TestObjectBase","data":{"v_i64":4,"v_f64":10.0,"v_str":0}}]}'
    )
    back = from_json_graph_str(s)
    assert (back.v_i64, back.v_f64, back.v_str) == (4, 10.0, "hello")


def test_shared_references_are_kept() -> None:
    p = testing.TestIntPair(1, 2)
    s = to_json_graph_str([p, p])
    assert s == (
        '{"root_index":1,"nodes":[{"type":"testing.TestIntPair","data":{"a":1,"b":2}},'
        '{"type":"ffi.Array","data":[0,0]}]}'
    )
    back = from_json_graph_str(s)
    assert back[0].same_as(back[1])


def test_metadata() -> None:
    s = to_json_graph_str([1], {"version": "1"})
    assert s == '{"root_index":1,"nodes":[{"type":"int","data":1},{"type":"ffi.Array","data":[0]}],"metadata":{"version":"1"}}'
    assert list(from_json_graph_str(s)) == [1]


def test_py_class_round_trip() -> None:
    @py_class("pyofficial.SerPoint")
    class SerPoint(Object):
        x: int
        y: str

    s = to_json_graph_str(SerPoint(1, "a"))
    assert json.loads(s)["nodes"][-1]["type"] == "pyofficial.SerPoint"
    back = from_json_graph_str(s)
    assert isinstance(back, SerPoint) and (back.x, back.y) == (1, "a")


def test_invalid_json_is_value_error() -> None:
    with pytest.raises(ValueError, match="Expecting property name enclosed in double quotes"):
        from_json_graph_str("{not json")


def test_json_parse_and_stringify() -> None:
    parse = tvm_ffi.get_global_func("ffi.json.Parse")
    stringify = tvm_ffi.get_global_func("ffi.json.Stringify")
    v = parse('{"a": [1, 2.5, "x", null, true]}')
    assert isinstance(v, tvm_ffi.Map)
    assert repr(v) == '{"a": (1, 2.5, "x", None, True)}'
    assert stringify({"a": [1, 2.5, "x", None, True]}, None) == '{"a":[1,2.5,"x",null,true]}'
    assert stringify([1, {"b": 2}], 2) == '[\n  1,\n  {\n    "b": 2\n  }\n]'
    with pytest.raises(ValueError):
        parse("[1, 2")
