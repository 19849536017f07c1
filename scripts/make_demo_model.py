"""Write the demo model shipped with halfway: api/data/demo_resnet18.onnx.

A ResNet-18 (He et al. 2015: a 7x7 stem, max pooling, four stages of two basic blocks, global
average pooling, a 1000-way classifier) at a quarter of its width (16-32-64-128 channels), for
1x3x128x128 images (a low-resolution ImageNet input, so the demo's float16 and OpenCL runs stay
quick on a small CPU); about 0.8 M parameters.

The weights are seeded, not trained: convolutions are He-normal, and every batch norm's running
mean and variance are measured (with ONNX Runtime) on seeded random images, stage after stage, so
activations stay near unit scale through the network as they do in a trained one. The classifier
sees the pooled features standardized with their statistics on the same images (folded into its
weights and bias), so the logits spread over a few units and differ from image to image: float16
errors are then realistic and the top-1 class of an image is a meaningful thing to compare.

Run from the repository root (needs onnx and onnxruntime):
    .venv/bin/python scripts/make_demo_model.py [--out api/data/demo_resnet18.onnx]
The output is byte-identical from run to run on one machine (ONNX Runtime's kernels, which measure
the statistics, differ by version and CPU in the last bits).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

WIDTHS = (16, 32, 64, 128)
CLASSES = 1000
IMAGE = (1, 3, 128, 128)
SEED = 0
CALIBRATION_IMAGES = 32
OPSET = 13
LOGIT_STD = 3.0
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "api" / "data" / "demo_resnet18.onnx"


class _Graph:
    """Collects nodes and initializers; names every tensor after the layer that makes it."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, np.ndarray] = {}
        self.batch_norms: list[tuple[str, str]] = []  # (input name, batch norm prefix), in order

    def param(self, name: str, value: np.ndarray) -> str:
        self.initializers[name] = value.astype(np.float32)
        return name

    def conv_bn(self, x: str, name: str, cin: int, cout: int, kernel: int, stride: int, *,
                relu: bool = True, gamma: float = 1.0) -> str:
        std = np.sqrt(2.0 / (cin * kernel * kernel))
        w = self.param(f"{name}.weight", self.rng.standard_normal((cout, cin, kernel, kernel)) * std)
        pad = kernel // 2
        self.nodes.append(helper.make_node("Conv", [x, w], [f"{name}.conv"], name=f"{name}.conv",
                                           kernel_shape=[kernel, kernel], strides=[stride, stride],
                                           pads=[pad] * 4))
        bn = [self.param(f"{name}.bn.scale", gamma * self.rng.uniform(0.8, 1.2, cout)),
              self.param(f"{name}.bn.bias", self.rng.normal(0.0, 0.1, cout)),
              self.param(f"{name}.bn.mean", np.zeros(cout)),
              self.param(f"{name}.bn.var", np.ones(cout))]
        self.batch_norms.append((f"{name}.conv", f"{name}.bn"))
        self.nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv", *bn], [f"{name}.bn"],
                                           name=f"{name}.bn", epsilon=1e-5))
        if not relu:
            return f"{name}.bn"
        self.nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.relu"], name=f"{name}.relu"))
        return f"{name}.relu"

    def basic_block(self, x: str, name: str, cin: int, cout: int, stride: int) -> str:
        y = self.conv_bn(x, f"{name}.conv1", cin, cout, 3, stride)
        y = self.conv_bn(y, f"{name}.conv2", cout, cout, 3, 1, relu=False, gamma=0.5)
        skip = x if stride == 1 and cin == cout else self.conv_bn(x, f"{name}.down", cin, cout, 1, stride, relu=False)
        self.nodes.append(helper.make_node("Add", [y, skip], [f"{name}.add"], name=f"{name}.add"))
        self.nodes.append(helper.make_node("Relu", [f"{name}.add"], [f"{name}.out"], name=f"{name}.relu"))
        return f"{name}.out"


def build(rng: np.random.Generator) -> tuple[onnx.ModelProto, _Graph]:
    g = _Graph(rng)
    y = g.conv_bn("image", "stem", IMAGE[1], WIDTHS[0], 7, 2)
    g.nodes.append(helper.make_node("MaxPool", [y], ["stem.pool"], name="stem.pool", kernel_shape=[3, 3],
                                    strides=[2, 2], pads=[1, 1, 1, 1]))
    y, cin = "stem.pool", WIDTHS[0]
    for stage, cout in enumerate(WIDTHS, start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            y = g.basic_block(y, f"layer{stage}.{block}", cin, cout, stride)
            cin = cout
    g.nodes.append(helper.make_node("GlobalAveragePool", [y], ["pool"], name="pool"))
    g.nodes.append(helper.make_node("Flatten", ["pool"], ["features"], name="flatten", axis=1))
    fc_w = g.param("fc.weight", rng.standard_normal((CLASSES, cin)) * (LOGIT_STD / np.sqrt(cin)))
    fc_b = g.param("fc.bias", np.zeros(CLASSES))
    g.nodes.append(helper.make_node("Gemm", ["features", fc_w, fc_b], ["logits"], name="fc", transB=1))
    return _model(g), g


def _model(g: _Graph) -> onnx.ModelProto:
    graph = helper.make_graph(
        g.nodes, "demo_resnet18",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(IMAGE))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [IMAGE[0], CLASSES])],
        [numpy_helper.from_array(v, k) for k, v in g.initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="halfway scripts/make_demo_model.py", ir_version=8)
    model.doc_string = "ResNet-18 at quarter width with seeded weights (halfway's demo model)"
    onnx.checker.check_model(model, full_check=True)
    return model


def calibrate(g: _Graph, images: np.ndarray) -> None:
    """Set each batch norm's running statistics to those of its input on ``images``, in order,
    then standardize the classifier's input features."""
    for source, bn in g.batch_norms:
        x = _measure(g, source, images)
        g.initializers[f"{bn}.mean"] = x.mean(axis=(0, 2, 3)).astype(np.float32)
        g.initializers[f"{bn}.var"] = x.var(axis=(0, 2, 3)).astype(np.float32)
    features = _measure(g, "features", images)
    weight = g.initializers["fc.weight"] / (features.std(axis=0) + 1e-6)
    g.initializers["fc.weight"] = weight.astype(np.float32)
    g.initializers["fc.bias"] = (-weight @ features.mean(axis=0)).astype(np.float32)


def _measure(g: _Graph, name: str, images: np.ndarray) -> np.ndarray:
    """The values of tensor ``name`` for each of ``images``, stacked."""
    model = _model(g)
    model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run([name], {"image": image[None]})[0] for image in images])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the .onnx file")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    _, g = build(rng)
    calibrate(g, rng.standard_normal((CALIBRATION_IMAGES, *IMAGE[1:])).astype(np.float32))
    model = _model(g)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(model.SerializeToString())
    params = sum(v.size for v in g.initializers.values())
    print(f"wrote {args.out}: {len(g.nodes)} nodes, {params} parameters, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
