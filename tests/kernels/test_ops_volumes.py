"""The ops of video networks over [N, C, D, H, W] maps (``conv3d``, ``pool3d``, ``batch_norm`` and
the global pools on 5-D input; their numpy and OpenCL kernels and ONNX converters): ONNX models
built here against ONNX Runtime, in float32 and in float16 (against ONNX Runtime's float32 result
on the float16-rounded values), on numpy and on the OpenCL device. On OpenCL the report must show
that no op fell back to numpy."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import helper, numpy_helper

import halfway
from halfway.executor import Executor
from tests.support.oprun import float16_tolerance

RNG = np.random.default_rng(17)
PLACES = ["numpy", pytest.param("opencl", marks=pytest.mark.opencl)]
FLOATS = [np.float32, np.float16]


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _model(nodes: list, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], dtype: type):
    """A model of ``nodes`` reading the graph inputs ``feeds`` and the initializers ``consts``
    (float arrays as ``dtype``), writing its last node's first output."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        nodes, "volume", [helper.make_tensor_value_info(n, elem, a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info(nodes[-1].output[0], elem, None)],
        [numpy_helper.from_array(v.astype(dtype) if v.dtype.kind == "f" else v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _check(nodes: list, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], place: str,
           dtype: type, roundings: int = 1) -> None:
    """halfway's output of the model in ``dtype`` on ``place`` against ONNX Runtime's float32 output
    on the same (``dtype``-rounded) values; float16 rounds each op's output, ``roundings`` of them
    on the way to the output."""
    rounded = {n: a.astype(dtype).astype(np.float32) if a.dtype.kind == "f" else a for n, a in feeds.items()}
    weights = {n: a.astype(dtype).astype(np.float32) if a.dtype.kind == "f" else a for n, a in consts.items()}
    reference = _model(nodes, rounded, weights, np.float32)
    session = onnxruntime.InferenceSession(reference.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, rounded)[0]
    program, names, fetches, scope = halfway.load(_model(nodes, feeds, consts, dtype))
    executor = Executor(halfway.OpenCLPlace()) if place == "opencl" else Executor()
    prepared = executor.prepare(program, names, fetches, scope)
    assert prepared.report.fallbacks == [], prepared.report.summary()
    got = prepared.run({n: feeds[n].astype(dtype) for n in names})[0]
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    tol = 4 * roundings * float16_tolerance(64) if dtype is np.float16 else 1e-4
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


CONVS = [  # (input shape, filter shape, Conv attrs)
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), {}),
    ((1, 4, 6, 5, 8), (6, 2, 3, 1, 3), {"group": 2, "pads": [1, 0, 1, 1, 0, 2], "strides": [2, 1, 2]}),
    ((1, 2, 7, 7, 7), (3, 2, 2, 3, 2), {"dilations": [2, 1, 3], "pads": [0, 1, 2, 1, 0, 0]}),
    ((2, 3, 4, 9, 9), (5, 3, 1, 7, 7), {"auto_pad": "SAME_UPPER", "strides": [1, 2, 2]}),  # a (1, 7, 7) stem
    ((1, 6, 4, 5, 5), (6, 1, 3, 3, 3), {"group": 6, "pads": [1, 1, 1, 1, 1, 1]}),  # depthwise
]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x_shape, w_shape, attrs", CONVS)
def test_conv3d(place, dtype, x_shape, w_shape, attrs):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)]
    _check(nodes, {"x": _x(*x_shape)}, {"w": _x(*w_shape) * 0.3, "b": _x(w_shape[0])}, place, dtype)


CONV_TRANSPOSES = [  # (input shape, filter shape, ConvTranspose attrs)
    ((2, 3, 3, 4, 5), (3, 2, 3, 3, 3), {}),
    ((1, 4, 3, 4, 4), (4, 3, 2, 3, 3), {"group": 2, "strides": [2, 2, 1], "pads": [0, 1, 1, 0, 1, 0]}),
    ((1, 2, 3, 3, 4), (2, 3, 3, 2, 2), {"strides": [2, 3, 2], "dilations": [1, 2, 1], "output_padding": [1, 2, 0]}),
    ((1, 2, 2, 3, 3), (2, 2, 3, 3, 3), {"strides": [2, 2, 2], "output_shape": [4, 6, 5]}),
]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x_shape, w_shape, attrs", CONV_TRANSPOSES)
def test_conv3d_transpose(place, dtype, x_shape, w_shape, attrs):
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)]
    bias = _x(w_shape[1] * attrs.get("group", 1))
    _check(nodes, {"x": _x(*x_shape)}, {"w": _x(*w_shape) * 0.3, "b": bias}, place, dtype)


@pytest.mark.parametrize("x_shape, output_shape", [((1, 2, 3, 3), [6, 5]), ((1, 2, 2, 3, 3), [4, 6, 5])])
def test_conv_transpose_to_an_output_shape_pads_the_odd_pixel_first(x_shape, output_shape):
    """An output_shape that leaves an odd total padding puts the extra pixel at the start, as ONNX
    and ONNX Runtime do (unless auto_pad is SAME_UPPER), in 2-D as in 3-D."""
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2] * len(output_shape),
                              output_shape=output_shape)]
    _check(nodes, {"x": _x(*x_shape)}, {"w": _x(2, 2, *[3] * len(output_shape))}, "numpy", np.float32)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_of_5d_input(place, dtype):
    stats = {"scale": _x(3), "bias": _x(3), "mean": _x(3), "var": np.abs(_x(3)) + 0.5}
    nodes = [helper.make_node("BatchNormalization", ["x", *stats], ["y"], epsilon=1e-3)]
    _check(nodes, {"x": _x(2, 3, 4, 5, 6)}, stats, place, dtype)


POOLS = [  # (ONNX op, attrs)
    ("MaxPool", {"kernel_shape": [2, 2, 2]}),
    ("MaxPool", {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [1, 3, 3], "strides": [1, 2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 2, 2], "dilations": [2, 1, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 2, 3], "pads": [1, 0, 1, 1, 1, 0], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2, 3, 3], "strides": [2, 2, 2], "ceil_mode": 1}),
    ("LpPool", {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 1, 0, 0, 1, 1], "p": 3}),
    ("GlobalAveragePool", {}),
    ("GlobalMaxPool", {}),
]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op_type, attrs", POOLS, ids=[f"{op}-{i}" for i, (op, _) in enumerate(POOLS)])
def test_pools_of_5d_input(place, dtype, op_type, attrs):
    _check([helper.make_node(op_type, ["x"], ["y"], **attrs)], {"x": _x(2, 3, 5, 7, 8)}, {}, place, dtype)


def _video_block() -> tuple[list, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A video ResNet's stem and block: Conv3D, BatchNorm, ReLU, 3-D max pool, a residual Conv3D
    pair, the global average pool and the classifier; (nodes, feeds, initializers)."""
    c = 4
    bn = {f"{name}{i}": value for i in (0, 1, 2) for name, value in
          (("s", _x(c)), ("b", _x(c)), ("m", _x(c) * 0.1), ("v", np.abs(_x(c)) + 0.5))}
    consts = {"w0": _x(c, 3, 3, 5, 5) * 0.2, "w1": _x(c, c, 3, 3, 3) * 0.2, "w2": _x(c, c, 3, 3, 3) * 0.2,
              "fc": _x(c, 5), **bn}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], strides=[1, 2, 2], pads=[1, 2, 2, 1, 2, 2])]

    def conv_bn(i: int, x: str, out: str, relu: bool = True) -> None:
        if i:
            nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1] * 6))
        norm = f"n{i}" if relu else out
        nodes.append(helper.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [norm]))
        if relu:
            nodes.append(helper.make_node("Relu", [norm], [out]))

    conv_bn(0, "x", "r0")
    nodes.append(helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[1, 3, 3], strides=[1, 2, 2],
                                  pads=[0, 1, 1, 0, 1, 1]))
    conv_bn(1, "p0", "r1")
    conv_bn(2, "r1", "n2", relu=False)
    nodes += [helper.make_node("Add", ["n2", "p0"], ["sum"]), helper.make_node("Relu", ["sum"], ["r2"]),
              helper.make_node("GlobalAveragePool", ["r2"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
              helper.make_node("MatMul", ["f", "fc"], ["logits"])]
    return nodes, {"x": _x(2, 3, 4, 16, 16)}, consts


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_a_video_block(place, dtype):
    nodes, feeds, consts = _video_block()
    _check(nodes, feeds, consts, place, dtype, roundings=len(nodes))


@pytest.mark.parametrize("place", PLACES)
def test_the_default_pipeline_folds_batch_norm_into_conv3d(place):
    nodes, feeds, consts = _video_block()
    model = _model(nodes, feeds, consts, np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    program, names, fetches, scope = halfway.load(model)
    result = halfway.PassManager().run(program, scope, fetch=fetches)
    optimized = result.program
    types = [op.type for op in optimized.global_block().ops]
    assert "batch_norm" not in types and types.count("conv3d") == 3
    executor = Executor(halfway.OpenCLPlace()) if place == "opencl" else Executor()
    got = executor.run(optimized, feeds, fetches, result.scope)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("node", [helper.make_node("Conv", ["x", "w"], ["y"], group=2, strides=[1, 2, 2],
                                                   pads=[1, 0, 1, 1, 0, 2], dilations=[1, 2, 1]),
                                  helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 1, 2],
                                                   pads=[1, 0, 1, 0, 1, 1], output_padding=[1, 0, 0]),
                                  helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 3, 3], strides=[1, 2, 2]),
                                  helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3, 3],
                                                   pads=[1] * 6, count_include_pad=1)],
                         ids=["conv3d", "conv3d-transpose", "max-pool3d", "avg-pool3d"])
def test_exported_onnx_runs_as_imported(node):
    """conv3d, conv3d_transpose and pool3d written back out as ONNX run on ONNX Runtime as halfway
    runs them."""
    from halfway.frontends.onnx_export import to_onnx

    feeds = {"x": _x(1, 4, 5, 7, 8)}
    program, names, fetches, scope = halfway.load(_model([node], feeds, {"w": _x(4, 2, 3, 3, 3)}, np.float32))
    want = Executor().run(program, feeds, fetches, scope)[0]
    exported = to_onnx(program, scope, names, fetches)
    assert [n.op_type for n in exported.graph.node] == [node.op_type]
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-5, atol=1e-5)
