"""Structural fuzzing of the ONNX importer: small valid models, mutated the ways malformed files
are (initializer bytes, dims and data types; attrs out of range; axes; input counts; opsets;
element types; huge shapes), must each import and run to ONNX Runtime's numbers, or fail with a
HalfwayError. Each case runs in a forked child with an address-space limit and a timeout, so an
allocation that would exhaust the machine, a crash or a hang shows as such.

``HALFWAY_FUZZ_CASES`` (default 300) and ``HALFWAY_FUZZ_SEED`` (default 0) size a run; a larger
run by hand: ``HALFWAY_FUZZ_CASES=3000 python -m pytest -q tests/test_onnx_fuzz.py -s``.
"""

from __future__ import annotations

import collections
import os
import pickle
import resource
import signal
import time
import traceback
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.frontends.onnx import load

ort = pytest.importorskip("onnxruntime")

CASES = int(os.environ.get("HALFWAY_FUZZ_CASES", "300"))
SEED = int(os.environ.get("HALFWAY_FUZZ_SEED", "0"))
TIMEOUT_S = 30.0
HEADROOM = 3 << 30
"""Address space a case may add to what the forked child starts with."""

F = TensorProto.FLOAT
INT_ATTR_VALUES = [-(10**9), -3, -1, 0, 2, 3, 7, 99, 10**9]
HUGE_DIMS = [0, -1, -7, 10**5, 10**9, 2**40]


# -- base models -----------------------------------------------------------------------------------
def _model(nodes, inputs, outputs, inits, opset=13):
    graph = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, F, None) for n in outputs],
                              [numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _cnn(rng):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("LRN", ["p"], ["n"], size=3),
             helper.make_node("Flatten", ["n"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "g"], ["y"], transB=1)]
    inits = [("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             ("b", rng.standard_normal(4).astype(np.float32)),
             ("g", rng.standard_normal((5, 64)).astype(np.float32))]
    return _model(nodes, [("x", [1, 3, 8, 8])], ["y"], inits)


def _elementwise(rng):
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"]),
             helper.make_node("Add", ["a", "v"], ["b"]),
             helper.make_node("Sub", ["b", "x"], ["c"]),
             helper.make_node("Div", ["c", "v"], ["d"]),
             helper.make_node("ReduceMean", ["d"], ["y"], axes=[1], keepdims=1)]
    inits = [("two", np.array(2.0, np.float32)), ("v", rng.uniform(1, 2, (1, 6)).astype(np.float32))]
    return _model(nodes, [("x", [2, 6])], ["y"], inits)


def _tensor_ops(rng):
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Slice", ["t", "starts", "ends", "axes"], ["s"]),
             helper.make_node("Gather", ["s", "idx"], ["g"], axis=1),
             helper.make_node("Unsqueeze", ["g", "uax"], ["u"]),
             helper.make_node("Squeeze", ["u", "uax"], ["q"]),
             helper.make_node("Concat", ["q", "q"], ["y"], axis=0)]
    inits = [("shape", np.array([2, 3, 4], np.int64)), ("starts", np.array([0, 1], np.int64)),
             ("ends", np.array([4, 3], np.int64)), ("axes", np.array([1, 2], np.int64)),
             ("idx", np.array([0, -1, 2], np.int64)), ("uax", np.array([0], np.int64))]
    return _model(nodes, [("x", [6, 4])], ["y"], inits)


def _shapes(rng):
    nodes = [helper.make_node("ConstantOfShape", ["dims"], ["k"], value=numpy_helper.from_array(
                 np.array([0.5], np.float32))),
             helper.make_node("Add", ["x", "k"], ["a"]),
             helper.make_node("Pad", ["a", "pads"], ["p"]),
             helper.make_node("Softmax", ["p"], ["y"], axis=-1)]
    inits = [("dims", np.array([2, 3], np.int64)), ("pads", np.array([0, 1, 0, 2], np.int64))]
    return _model(nodes, [("x", [2, 3])], ["y"], inits)


BASES: list[Callable[[np.random.Generator], onnx.ModelProto]] = [_cnn, _elementwise, _tensor_ops, _shapes]


# -- mutations ---------------------------------------------------------------------------------------
def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def _value(tensor) -> np.ndarray | None:
    """The tensor's value, None where an earlier mutation made it unreadable."""
    try:
        return numpy_helper.to_array(tensor)
    except Exception:
        return None


def _initializer_bytes(model, rng):
    tensor = _pick(rng, model.graph.initializer)
    value = _value(tensor)
    data = value.tobytes() if value is not None else tensor.raw_data
    cut = int(rng.integers(-len(data), len(data) + 1)) if data else 4
    tensor.ClearField("float_data")
    tensor.ClearField("int64_data")
    tensor.raw_data = data[:cut] if cut < 0 else data + bytes(cut)


def _initializer_dims(model, rng):
    tensor = _pick(rng, model.graph.initializer)
    dims = list(tensor.dims) or [1]
    dims[int(rng.integers(len(dims)))] = _pick(rng, [0, 2, 3, 10**6, 2**40, -2])
    del tensor.dims[:]
    tensor.dims.extend(dims)


def _initializer_dtype(model, rng):
    _pick(rng, model.graph.initializer).data_type = _pick(rng, [0, 2, 6, 7, 8, 10, 11, 16, 99])


def _initializer_values(model, rng):
    """Shapes, axes and indices: an int initializer gets values out of any range."""
    ints = [t for t in model.graph.initializer if t.data_type == TensorProto.INT64]
    if not ints:
        return _initializer_bytes(model, rng)
    tensor = _pick(rng, ints)
    value = _value(tensor)
    if value is not None and value.size:
        value = value.copy()
        value.reshape(-1)[int(rng.integers(value.size))] = _pick(rng, HUGE_DIMS + INT_ATTR_VALUES)
        tensor.CopyFrom(numpy_helper.from_array(value, tensor.name))


def _attr(model, rng):
    nodes = [n for n in model.graph.node if any(a.type in (a.INT, a.INTS) for a in n.attribute)]
    if not nodes:
        return _input_count(model, rng)
    attr = _pick(rng, [a for a in _pick(rng, nodes).attribute if a.type in (a.INT, a.INTS)])
    if attr.type == attr.INT:
        attr.i = _pick(rng, INT_ATTR_VALUES)
    elif attr.ints:
        attr.ints[int(rng.integers(len(attr.ints)))] = _pick(rng, INT_ATTR_VALUES)


def _attr_type(model, rng):
    node = _pick(rng, model.graph.node)
    if node.attribute:
        attr = _pick(rng, node.attribute)
        node.attribute.remove(attr)
        if rng.random() < 0.5:
            node.attribute.append(helper.make_attribute(attr.name, 1.5))


def _input_count(model, rng):
    node = _pick(rng, model.graph.node)
    if rng.random() < 0.5 and node.input:
        del node.input[-1]
    else:
        node.input.append(node.input[0] if node.input else "x")


def _opset(model, rng):
    model.opset_import[0].version = _pick(rng, [1, 6, 7, 9, 11, 12, 17, 99, 10**6])


def _elem_type(model, rng):
    model.graph.input[0].type.tensor_type.elem_type = _pick(rng, [0, 6, 7, 10, 11, 99])


def _input_dims(model, rng):
    dims = model.graph.input[0].type.tensor_type.shape.dim
    _pick(rng, dims).dim_value = _pick(rng, [1, 5, 10**6, 2**40])


MUTATIONS = [_initializer_bytes, _initializer_dims, _initializer_dtype, _initializer_values, _attr, _attr_type,
             _input_count, _opset, _elem_type, _input_dims]


def _case(index: int) -> tuple[str, bytes]:
    rng = np.random.default_rng([SEED, index])
    base = _pick(rng, BASES)
    model = base(rng)
    names = []
    for _ in range(int(rng.integers(1, 3))):
        mutation = _pick(rng, MUTATIONS)
        mutation(model, rng)
        names.append(mutation.__name__.lstrip("_"))
    return f"#{index} {base.__name__.lstrip('_')}: {', '.join(names)}", model.SerializeToString()


# -- one case in a child ------------------------------------------------------------------------------
def _outcome(data: bytes) -> tuple[str, str]:
    """What halfway does with the model: ("ok"|"ort_rejects"|"halfway_error"|"wrong"|"other", detail)."""
    model = onnx.ModelProto()
    model.ParseFromString(data)
    try:
        program, feeds, fetches, scope = load(model)
        rng = np.random.default_rng(0)
        block = program.global_block()
        values = {name: rng.standard_normal([max(d, 1) for d in block.var(name).shape]).astype(
            block.var(name).dtype.numpy) for name in feeds}
        got = halfway.Executor().run(program, values, fetches, scope)
    except halfway.HalfwayError as e:
        return "halfway_error", str(e).splitlines()[0][:200]
    except BaseException as e:  # the finding this test exists for
        return "other", "".join(traceback.format_exception_only(type(e), e)).strip()[:400]
    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        want = session.run(None, values)
    except Exception as e:  # ONNX Runtime refuses the model: nothing to compare with
        return "ort_rejects", str(e).splitlines()[0][:200]
    for a, b in zip(got, want):
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(b).max(
                initial=0))), equal_nan=True):
            return "wrong", f"halfway {a.shape} vs ONNX Runtime {b.shape}"
    return "ok", ""


def _address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _run_case(data: bytes) -> tuple[str, str]:
    """``_outcome`` in a forked child with RLIMIT_AS and a timeout: ("hang"|"crash", ...) otherwise."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            limit = _address_space() + HEADROOM
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            result = _outcome(data)
            os.write(write, pickle.dumps(result))
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        return "hang", f"no result in {TIMEOUT_S} s"
    with os.fdopen(read, "rb") as f:
        answer = f.read()
    if not answer:
        return "crash", f"the child ended with status {status} and no result"
    return pickle.loads(answer)


def test_mutated_models_import_correctly_or_fail_with_a_halfway_error():
    counts: collections.Counter[str] = collections.Counter()
    findings = []
    for index in range(CASES):
        label, data = _case(index)
        kind, detail = _run_case(data)
        counts[kind] += 1
        if kind in ("other", "wrong", "hang", "crash"):
            findings.append(f"{label}: {kind}: {detail}")
    print(f"\nfuzz: {CASES} cases (seed {SEED}): {dict(counts)}")
    assert not findings, "\n".join(findings[:20])
    assert counts["halfway_error"] and (counts["ok"] or counts["ort_rejects"])  # both kinds of outcome were seen
