"""The library's own ``ffi.*`` globals behave as the official library's (found by a differential
run of both libraries: see AGENTS.md, "Testing notes"). Runs on either library."""

from __future__ import annotations

import json
import os

import pytest

import anyffi

G = anyffi.get_global_func
HERE = os.path.dirname(os.path.abspath(__file__))


def test_type_schemas_of_every_ffi_global_are_the_official_ones():
    # recorded on the official library (GetGlobalFuncMetadata(name)["type_schema"])
    with open(os.path.join(HERE, "official_type_schemas.json")) as f:
        official = json.load(f)
    meta = G("ffi.GetGlobalFuncMetadata")
    diffs = {}
    for name, schema in official.items():
        if G(name, allow_missing=True) is None:
            diffs[name] = "missing"
            continue
        m = meta(name)
        ours = json.loads(m).get("type_schema") if m else None
        if ours != schema:
            diffs[name] = (schema, ours)
    assert diffs == {}


def test_json_stringify_takes_long_strings():
    # 8 bytes and more travel as a `const char*` view: Stringify converts it as a `const Any&`
    s = "a string of more than eight bytes"
    assert G("ffi.json.Stringify")(s, None) == json.dumps(s)
    assert G("ffi.json.Stringify")(G("ffi.json.Parse")(json.dumps(s)), 2) == json.dumps(s)
    with pytest.raises(ValueError, match="Unsupported type"):
        G("ffi.json.Stringify")(b"long bytes are not JSON values", None)


def test_shape_takes_bools_as_ints():
    assert tuple(G("ffi.Shape")(True, False, 3)) == (1, 0, 3)


def test_global_names_functor_counts_at_any_negative_index():
    f = G("ffi.FunctionListGlobalNamesFunctor")()
    n = f(-1)
    assert n == f(-5) == f(-(2**62)) > 0
    assert isinstance(f(0), str)
    with pytest.raises(IndexError):
        f(n)


def test_walk_sees_a_long_string_root_as_the_view_it_is():
    # a root given as `const char*` (type 8) or a byte view (type 9) is visited with that type
    # index, not the String/Bytes it would become
    seen = []
    cb = anyffi.Function(lambda v: seen.append(v) and None)
    walk = G("ffi.StructuralWalk")
    for root, view_ti, object_ti in (("a long string root", 8, 65), (b"long bytes root!!", 9, 66)):
        seen.clear()
        walk(root, [(view_ti, cb)], [], 0)
        assert seen == [root]
        seen.clear()
        walk(root, [(object_ti, cb)], [], 0)
        assert seen == []
