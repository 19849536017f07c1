"""The reference evaluator's kernels (``halfway.ir.reference``) and the evaluator (``halfway.ir.evaluate``):
family rows from their own numpy math, against the numpy kernels; other ops from a provider, the
numpy kernels declared as one; what a fresh interpreter loads for each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from halfway.ir import reference
from halfway.ir.dtypes import DType
from halfway.ir.errors import KernelNotFoundError, SchemaError
from halfway.ir.evaluate import evaluate_op
from halfway.ir.ops.families import BINARY, COMPARE, REDUCE, UNARY
from halfway.ir.program import Program
from halfway.ir.schema import TensorInfo, get_schema
from halfway.kernels.registry import KernelSpec, find_kernel

ROOT = Path(__file__).resolve().parent.parent.parent


def _op(op_type: str, inputs: dict[str, str], outputs: dict[str, str], **attrs: object) -> object:
    """``op_type`` appended to a fresh program's block, its vars declared float32."""
    block = Program().global_block()
    for name in [*inputs.values(), *outputs.values()]:
        block.create_var(name, dtype=DType.float32)
    return block.append_op(op_type, inputs, outputs, attrs)


def _infos(*arrays: np.ndarray) -> tuple[TensorInfo, ...]:
    return tuple(TensorInfo(a.shape, DType.from_any(a.dtype)) for a in arrays)


def _both(op_type: str, dtype: DType, inputs: dict[str, np.ndarray], out: TensorInfo,
          **attrs: object) -> tuple[np.ndarray, np.ndarray]:
    """(the reference kernel's output, the numpy kernel's) for one op."""
    resolved = get_schema(op_type).resolve_attrs(attrs)
    slots = {slot: _infos(a) for slot, a in inputs.items()}
    outputs = {"Out": (out,)}
    ours = reference.reference_kernel(op_type, dtype, resolved, slots, outputs)(*inputs.values())
    spec = KernelSpec(op_type, dtype, resolved, slots, outputs)
    theirs = find_kernel(op_type, "numpy", dtype)(spec)(*inputs.values())
    return np.asarray(ours), np.asarray(theirs)


@pytest.mark.parametrize("dtype", [DType.float32, DType.float16, DType.float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_a_unary_row_computes_as_the_numpy_kernel(name, dtype):
    row = UNARY[name]
    if dtype not in row.dtypes and not (dtype is DType.float64 and DType.float32 in row.dtypes):
        pytest.skip(f"{name} has no {dtype.name} kernel")
    x = (np.random.default_rng(0).standard_normal((3, 50)) * 3).astype(dtype.numpy)
    if name in ("log", "sqrt", "rsqrt", "log1p", "log2", "log10", "acosh"):
        x = np.abs(x) + 1
    if name in ("acos", "asin", "atanh"):
        x = np.clip(x, -0.9, 0.9).astype(dtype.numpy)
    out = TensorInfo(x.shape, row.out_dtype or dtype)
    with np.errstate(all="ignore"):
        ours, theirs = _both(name, dtype, {"X": x}, out)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    # float32 gelu, sigmoid and silu run compiled loops in the kernels: within an ulp or two
    tolerance = 0 if dtype is not DType.float32 else 4 * np.finfo(np.float32).eps
    np.testing.assert_allclose(ours, theirs, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [DType.float32, DType.float16, DType.int64])
@pytest.mark.parametrize("name", sorted({**BINARY, **COMPARE}))
def test_a_binary_row_broadcasts_by_paddles_axis_as_the_numpy_kernel(name, dtype):
    row = {**BINARY, **COMPARE}[name]
    if row.arity != 2 or dtype not in row.dtypes:
        pytest.skip(f"{name} is not binary at {dtype.name}")
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 3, 4)) * 4).astype(dtype.numpy)
    y = (np.abs(rng.standard_normal((3,) if row.axis else x.shape) * 4) + 1).astype(dtype.numpy)
    out = TensorInfo(x.shape, row.out_dtype or dtype)
    attrs = {"axis": 1} if row.axis else {}
    with np.errstate(all="ignore"):
        ours, theirs = _both(name, dtype, {"X": x, "Y": y}, out, **attrs)
    np.testing.assert_array_equal(ours, theirs)
    assert ours.dtype == theirs.dtype


@pytest.mark.parametrize("dtype", [DType.float32, DType.float16, DType.int32])
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_a_reduction_row_accumulates_as_the_numpy_kernel(name, dtype):
    if dtype not in REDUCE[name].dtypes:
        pytest.skip(f"{name} has no {dtype.name} kernel")
    x = (np.random.default_rng(2).standard_normal((4, 5, 6)) * 3).astype(dtype.numpy)
    for attrs, shape in (({"dim": [1, -1], "keep_dim": True}, (4, 1, 1)), ({"reduce_all": True}, ())):
        ours, theirs = _both(name, dtype, {"X": x}, TensorInfo(shape, dtype), **attrs)
        assert ours.shape == shape and ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


def test_a_row_refuses_a_dtype_it_does_not_compute():
    infos = {"X": (TensorInfo((2,), DType.int32),)}
    with pytest.raises(KernelNotFoundError, match="no reference kernel for sigmoid/int32: its row computes"):
        reference.reference_kernel("sigmoid", DType.int32, {}, infos, {"Out": infos["X"]})


def test_other_ops_come_from_the_numpy_kernels_declared_as_a_provider():
    assert "numpy" in reference.registered_providers()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    op = _op("transpose2", {"X": "x"}, {"Out": "y", "XShape": "s"}, axis=[2, 0, 1])
    got = evaluate_op(op, {"x": x})
    np.testing.assert_array_equal(got["y"], x.transpose(2, 0, 1))


def test_a_registered_provider_is_asked_and_a_taken_name_refused(monkeypatch):
    monkeypatch.setattr(reference, "_PROVIDERS", {})
    monkeypatch.setattr(reference, "_DECLARED", [True])
    seen = []

    def negate(op_type, dtype, attrs, inputs, outputs):
        seen.append((op_type, dtype, dict(attrs)))
        return np.negative

    infos = {"X": (TensorInfo((2,), DType.float32),)}
    with pytest.raises(KernelNotFoundError, match="no provider is registered"):
        reference.reference_kernel("transpose2", DType.float32, {}, infos, {"Out": infos["X"]})
    reference.register_provider("negate", negate)
    with pytest.raises(SchemaError, match="'negate' is already registered"):
        reference.register_provider("negate", negate)
    kernel = reference.reference_kernel("transpose2", DType.float32, {"axis": [0]}, infos, {"Out": infos["X"]})
    assert kernel is np.negative and seen == [("transpose2", DType.float32, {"axis": [0]})]


def test_a_provider_without_the_op_gives_its_reason(monkeypatch):
    def none(op_type, dtype, attrs, inputs, outputs):
        raise KernelNotFoundError("not mine")

    monkeypatch.setattr(reference, "_PROVIDERS", {"none": none})
    monkeypatch.setattr(reference, "_DECLARED", [True])
    infos = {"X": (TensorInfo((2,), DType.float32),)}
    with pytest.raises(KernelNotFoundError, match="no reference kernel for transpose2/float32: none: not mine"):
        reference.reference_kernel("transpose2", DType.float32, {}, infos, {"Out": infos["X"]})


def _loaded_after(code: str) -> list[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    return [m for m in json.loads(done.stdout.splitlines()[-1]) if m.startswith("halfway.")]


def test_a_family_row_is_evaluated_without_the_kernels_and_other_ops_load_them():
    relu = ("import numpy as np\nfrom halfway.ir import DType, Program\nfrom halfway.ir.evaluate import evaluate_op\n"
            "block = Program().global_block()\nfor name in ('x', 'y'): block.create_var(name, dtype=DType.float32)\n"
            "evaluate_op(block.append_op('relu', {'X': 'x'}, {'Out': 'y'}), {'x': np.ones(3, np.float32)})")
    assert not [m for m in _loaded_after(relu) if m.startswith("halfway.kernels")]
    transpose = relu.replace("'relu', {'X': 'x'}, {'Out': 'y'}", "'transpose2', {'X': 'x'}, {'Out': 'y'}, {'axis': [0]}")
    assert "halfway.kernels.reference" in _loaded_after(transpose)


def test_state_an_op_updates_in_place_is_written_as_a_copy():
    """cached_attention's caches (KCacheOut is KCache): the evaluator hands it copies, so the
    caller's cache is untouched and the output is the updated copy."""
    block = Program().global_block()
    for name in ("q", "k", "v", "kc", "vc", "past", "out"):
        block.create_var(name)
    op = block.append_op("cached_attention", {"Q": ["q"], "K": ["k"], "V": ["v"], "KCache": ["kc"], "VCache": ["vc"],
                                              "Past": ["past"]}, {"Out": ["out"], "KCacheOut": ["kc"], "VCacheOut": ["vc"]})
    rng = np.random.default_rng(0)
    values = {name: rng.standard_normal((1, 2, 1, 4)).astype(np.float32) for name in ("q", "k", "v")}
    values.update(kc=np.zeros((1, 2, 8, 4), np.float32), vc=np.zeros((1, 2, 8, 4), np.float32),
                  past=np.array([0]))
    out = evaluate_op(op, values)
    assert not values["kc"].any()
    np.testing.assert_array_equal(out["kc"][0, :, 0], values["k"][0, :, 0])
    np.testing.assert_allclose(out["out"], values["v"], rtol=1e-6)  # one key to attend to: its value
