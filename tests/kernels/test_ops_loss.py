"""The losses (``ir/ops/loss.py``, its numpy kernel and ONNX converters): ONNX's
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnx's reference, nll_loss's
Total_weight against numpy, and a label that is no class refused."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor
from halfway.ir.errors import HalfwayError
from tests.support.oprun import run_op

RNG = np.random.default_rng(17)


def _model(op_type: str, x: np.ndarray, weight: bool, outputs: int, **attrs: object):
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    names = ["x", "label", "weight"][:3 if weight else 2]
    node = helper.make_node(op_type, names, [f"out{i}" for i in range(outputs)], **attrs)
    inputs = [helper.make_tensor_value_info("x", elem, x.shape),
              helper.make_tensor_value_info("label", TensorProto.INT64, (x.shape[0], *x.shape[2:])),
              helper.make_tensor_value_info("weight", elem, (x.shape[1],))][:len(names)]
    graph = helper.make_graph([node], "loss", inputs, [helper.make_empty_tensor_value_info(f"out{i}")
                                                       for i in range(outputs)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _check(op_type: str, shape: tuple[int, ...], dtype: type = np.float32, weight: bool = False, outputs: int = 1,
           **attrs: object) -> None:
    x = RNG.standard_normal(shape).astype(dtype)
    label = RNG.integers(0, shape[1], (shape[0], *shape[2:]))
    if "ignore_index" in attrs:
        label.reshape(-1)[::3] = attrs["ignore_index"]
    feeds = {"x": x, "label": label, "weight": RNG.random(shape[1]).astype(dtype)}
    model = _model(op_type, x, weight, outputs, **attrs)
    feeds = {v.name: feeds[v.name] for v in model.graph.input}
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {n: feeds[n] for n in names}, fetches, scope)
    want = ReferenceEvaluator(model).run(None, feeds)
    tolerance = 1e-2 if dtype == np.float16 else 1e-5
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape, weight, ignore", [((5, 4), False, None), ((3, 4, 2, 3), True, 1),
                                                   ((2, 3, 5), True, -1)])
def test_losses_match_onnx_reference(op_type, reduction, shape, weight, ignore):
    attrs = {"reduction": reduction, **({"ignore_index": ignore} if ignore is not None else {})}
    _check(op_type, shape, weight=weight, **attrs)


def test_softmax_cross_entropy_gives_log_prob_and_runs_float16():
    _check("SoftmaxCrossEntropyLoss", (4, 5, 3), weight=True, outputs=2, reduction="mean", ignore_index=2)
    _check("SoftmaxCrossEntropyLoss", (4, 5), dtype=np.float16, outputs=2)


def test_nll_loss_total_weight_counts_the_entries_not_ignored():
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    label, weight = np.array([0, 2, 1, 2, 0, 1]), np.array([0.5, 2.0, 3.0], np.float32)
    ran = run_op("nll_loss", {"X": x, "Label": label, "Weight": weight}, {"ignore_index": 2},
                 outputs={"Out": 1, "Total_weight": 1})
    kept = label != 2
    total = weight[label[kept]].sum()
    np.testing.assert_allclose(ran["Total_weight"][0], total, rtol=1e-6)
    np.testing.assert_allclose(ran.out, -(x[kept, label[kept]] * weight[label[kept]]).sum() / total, rtol=1e-6)


def test_nll_loss_refuses_a_label_that_is_no_class():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(HalfwayError, match=r"nll_loss.*outside \[0, 3\)"):
        run_op("nll_loss", {"X": x, "Label": np.array([1, 3])})
