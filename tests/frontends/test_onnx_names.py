"""The ONNX names of halfway ops (``halfway.frontends.onnx_names``): the written-out table is the
converters' own, and naming an op loads no onnx."""

from __future__ import annotations

import subprocess
import sys

import halfway.frontends.onnx  # noqa: F401  (registers every converter)
from halfway.frontends.onnx.registry import MADE_OF as REGISTERED
from halfway.frontends.onnx_made_of import MADE_OF
from halfway.frontends.onnx_names import onnx_names


def test_the_table_is_what_the_converters_make():
    # a converter added or changed: python scripts/make_onnx_names.py rewrites the table
    assert MADE_OF == {op_type: tuple(names) for op_type, names in REGISTERED.items()}


def test_the_onnx_op_named_in_the_type_comes_first():
    assert onnx_names("matmul_v2")[:2] == ("MatMul", "Gemm")
    assert onnx_names("gather_nd") == ("GatherND", "Gather")
    assert onnx_names("elementwise_add") == ("Add",) and onnx_names("relu") == ("Relu",)
    assert onnx_names("fc") == () and onnx_names("no_such_op") == ()


def test_naming_an_op_imports_no_onnx():
    code = ("import sys; from halfway.frontends.onnx_names import onnx_names; "
            "assert onnx_names('matmul_v2'); print(sorted(m for m in sys.modules if m.startswith('onnx')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
