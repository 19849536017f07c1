"""ONNX's backend node tests, run through halfway (``tests/onnx_backend.py``), for every node
test whose ops all have converters. Cases halfway does not support are listed in
``NOT_SUPPORTED`` with the reason; they are strict xfails, so one that starts to pass is
reported and must move out of the list.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import onnx
import onnx.backend.test
import pytest

from halfway.frontends.onnx import supported_ops
from halfway.frontends.onnx.functions import inline_functions
from tests.support.onnx_backend import ExportingBackend, HalfwayBackend

NODE_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "node"

NOT_SUPPORTED = {
    r"FLOAT8|FLOAT4|INT4|INT2|UINT4|UINT2|E8M0|e8m0|BFLOAT16|bfloat16|e4m3fn|e5m2|float4e2m1|_u?int[24]$":
        "an element type halfway has no dtype for",
    r"_string(_broadcast)?$": "string tensors",
    r"^test_not_\dd$": "opset 1 models (the importer reads opset 7 and later)",
    r"training": "training mode (BatchNormalization statistics, random Dropout)",
    r"identity_opt|identity_sequence": "optional and sequence values",
    r"allowzero_reordered": "empty tensors",
    r"^test_scan_sum$": "Scan before opset 9 (a batch dim and sequence_lens)",
}


NOT_EXPORTED = {
    r"^test_(max|min)_u?int16$|^test_top_k_uint64$|^test_bitcast_bool_to_uint8$":
        "ONNX Runtime has no kernel for the element type",
    r"mask4d_padded_kv$": "ONNX Runtime's Attention refuses nonpad_kv_seqlen with a mask",
    r"resize_downsample_scales_(cubic|linear)_align_corners$": "ONNX Runtime's Resize differs from ONNX's reference",
    r"^test_dft": "ONNX Runtime's float32 DFT is 1e-5 to 2e-4 off ONNX's float64 reference (the runner's atol is 1e-7)",
    r"^test_roialign": "ONNX Runtime has no RoiAlign kernel at the tests' opset 22",
    r"^test_maxunpool_export_with_output_shape$": "ONNX Runtime's MaxUnpool places the indices in output_shape's "
                                                 "layout, ONNX's reference in the window's inverse",
}
"""Node tests halfway runs whose ONNX export ONNX Runtime cannot run as ONNX's reference does, by reason."""


def _node_tests() -> list[str]:
    """The node tests whose ops all have converters, once the ops ONNX defines as functions are
    expanded as the importer expands them."""
    supported = set(supported_ops()) | {"Constant"}
    names = []
    for directory in sorted(NODE_DIR.iterdir()):
        model = onnx.load(directory / "model.onnx", load_external_data=False)
        opset = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")], default=1)
        ops = {(n.domain, n.op_type) for n in inline_functions(model, opset).graph.node}
        if all(domain in ("", "ai.onnx") and op in supported for domain, op in ops):
            names.append(directory.name)
    return names


def _case(name: str):
    reasons = [reason for pattern, reason in NOT_SUPPORTED.items() if re.search(pattern, name)]
    marks = [pytest.mark.xfail(reason=reasons[0], strict=True)] if reasons else []
    return pytest.param(name, marks=marks, id=name)


@functools.cache
def _node_cases() -> type:
    """ONNX's node test class for the halfway backend (built in a function: a TestCase class at
    module level would be collected whole)."""
    return onnx.backend.test.BackendTest(HalfwayBackend, __name__).test_cases["OnnxBackendNodeModelTest"]


@pytest.mark.parametrize("name", [_case(name) for name in _node_tests()])
def test_onnx_node(name: str) -> None:
    _node_cases()(f"{name}_cpu").debug()


@functools.cache
def _exported_cases() -> type:
    return onnx.backend.test.BackendTest(ExportingBackend, __name__).test_cases["OnnxBackendNodeModelTest"]


def _exported_case(name: str):
    """A node test halfway does not run (``NOT_SUPPORTED``) is skipped: what its export would give is
    not halfway's result; one whose export ONNX Runtime cannot run is a strict xfail."""
    unsupported = [reason for pattern, reason in NOT_SUPPORTED.items() if re.search(pattern, name)]
    unexported = [reason for pattern, reason in NOT_EXPORTED.items() if re.search(pattern, name)]
    marks = ([pytest.mark.skip(reason=f"halfway does not run it: {unsupported[0]}")] if unsupported
             else [pytest.mark.xfail(reason=unexported[0], strict=True)] if unexported else [])
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_exported_case(name) for name in _node_tests()])
def test_onnx_node_exported(name: str) -> None:
    """The node test's model imported by halfway, written back as ONNX by halfway's exporter and
    run by ONNX Runtime, against the outputs shipped with the test."""
    _exported_cases()(f"{name}_cpu").debug()
