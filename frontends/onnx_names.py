"""The ONNX ops a halfway op stands for (``matmul_v2``: MatMul, Gemm), for the reports that show
ONNX users their own op names (``halfway inspect``, ``graph``, the float16 report).

It reads the table the ONNX importer's converters declare (``makes``), written out in
``halfway.frontends.onnx_made_of``, so that naming an op imports neither onnx nor the importer.
"""

from __future__ import annotations

from .onnx_made_of import MADE_OF

__all__ = ["onnx_names"]


def onnx_names(op_type: str) -> tuple[str, ...]:
    """The ONNX ops (default domain) that halfway op ``op_type`` stands for: those whose import
    makes it, an ONNX op named in the op type first (``gather_nd``: GatherND, Gather); none for an
    op only passes make (``fc``, ``fused_conv2d``)."""
    bare = op_type.replace("_", "")
    return tuple(sorted(MADE_OF.get(op_type, ()), key=lambda name: name.lower() not in bare))
