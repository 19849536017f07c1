"""The converters' table (``halfway.frontends.onnx.registry``): what each ONNX op imports as."""

from __future__ import annotations

import onnx

from halfway.frontends.onnx import supported_ops
from halfway.frontends.onnx.registry import MADE_OF, onnx_names
from halfway.ir.schema import has_schema


def test_every_op_a_converter_makes_is_a_registered_op_of_a_converted_onnx_op():
    supported = set(supported_ops())
    assert len(MADE_OF) > 100
    for op_type, names in MADE_OF.items():
        assert has_schema(op_type), op_type
        assert set(names) <= supported and all(onnx.defs.has(name) for name in names), (op_type, names)


def test_the_onnx_op_named_in_the_type_comes_first():
    assert onnx_names("matmul_v2")[:2] == ("MatMul", "Gemm")
    assert onnx_names("gather_nd") == ("GatherND", "Gather")
    assert onnx_names("elementwise_add") == ("Add",) and onnx_names("relu") == ("Relu",)
    assert onnx_names("fc") == () and onnx_names("no_such_op") == ()
