"""The converters' table (``halfway.frontends.onnx.registry``): what each ONNX op imports as."""

from __future__ import annotations

import onnx

from halfway.frontends.onnx import supported_ops
from halfway.frontends.onnx.registry import MADE_OF
from halfway.ir.schema import has_schema


def test_every_op_a_converter_makes_is_a_registered_op_of_a_converted_onnx_op():
    supported = set(supported_ops())
    assert len(MADE_OF) > 100
    for op_type, names in MADE_OF.items():
        assert has_schema(op_type), op_type
        assert set(names) <= supported and all(onnx.defs.has(name) for name in names), (op_type, names)

