"""Typed attrs and dtypes: normalisation, inference of types, numpy mapping."""

import numpy as np
import pytest

from halfway.ir import AttrType, DType, IRError, Operator
from halfway.ir.attrs import infer_type, normalize


@pytest.mark.parametrize("attr_type, value, expected", [
    (AttrType.INT, np.int64(3), 3),
    (AttrType.INT, 4.0, 4),
    (AttrType.FLOAT, 0.1, float(np.float32(0.1))),
    (AttrType.INTS, [1, 2], (1, 2)),
    (AttrType.LONGS, np.array([2**40]), (2**40,)),
    (AttrType.BOOLEANS, [np.bool_(True)], (True,)),
    (AttrType.STRINGS, ("a", "b"), ("a", "b")),
    (AttrType.SCALAR, np.float32(1.5), 1.5),
])
def test_normalize(attr_type, value, expected):
    got = normalize(attr_type, value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("attr_type, value, message", [
    (AttrType.INT, 2**31, "does not fit in int32"),
    (AttrType.INT, True, "expected an integer"),
    (AttrType.INT, 1.5, "expected an integer"),
    (AttrType.FLOAT, 1e39, "overflows float32"),
    (AttrType.INTS, "12", "expected a list"),
    (AttrType.BOOLEAN, 1, "expected a bool"),
    (AttrType.STRING, b"x", "expected a string"),
])
def test_normalize_rejects(attr_type, value, message):
    with pytest.raises(IRError, match=message):
        normalize(attr_type, value)


@pytest.mark.parametrize("value, expected", [
    (1, AttrType.INT), (2**40, AttrType.LONG), (0.5, AttrType.FLOAT), ("s", AttrType.STRING),
    (True, AttrType.BOOLEAN), ([1, 2], AttrType.INTS), ([1, 2**40], AttrType.LONGS),
    ([0.5], AttrType.FLOATS), (["a"], AttrType.STRINGS), ([False], AttrType.BOOLEANS),
])
def test_infer_type(value, expected):
    assert infer_type(value) is expected


def test_infer_type_refuses_ambiguous_values():
    with pytest.raises(IRError, match="empty list"):
        infer_type([])
    with pytest.raises(IRError, match="cannot infer"):
        infer_type([1, "a"])


def test_operator_attr_keeps_its_type_and_names_the_op():
    op = Operator("custom", attrs={"n": 2})
    op.set_attr("n", 5)
    assert op.attr_type("n") is AttrType.INT and op.attr("n") == 5
    with pytest.raises(IRError, match="op custom, attr 'n'"):
        op.set_attr("n", "five")
    assert op.attr("missing", None) is None


@pytest.mark.parametrize("value", ["float16", "fp16", np.float16, np.dtype("float16"), 4, DType.float16])
def test_dtype_from_any(value):
    assert DType.from_any(value) is DType.float16


def test_dtype_numpy_mapping_round_trips():
    for dtype in DType:
        if dtype in (DType.bfloat16, DType.size_t, DType.float8_e4m3fn, DType.float8_e5m2):
            continue
        assert DType.from_any(dtype.numpy) is dtype
    assert DType.bfloat16.numpy == np.uint16 and DType.float8_e5m2.itemsize == 1
    with pytest.raises(IRError, match="unknown dtype"):
        DType.from_any("float17")
