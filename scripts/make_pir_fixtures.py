"""Write Paddle 3 model fixtures into tests/fixtures/paddle3/, in both of Paddle 3's formats.

Needs paddlepaddle 3.x (3.3.1 was used); it is not a dependency of halfway itself:

    /work/paddlevenv/bin/python scripts/make_pir_fixtures.py

Models (seeded, small configs, random weights):
    resnet     a ResNet: conv-BN-ReLU stem, basic blocks (one with a strided 1x1 shortcut),
               max and adaptive average pools, Linear; "image" [-1, 3, 32, 32]
    mobilenet  paddle.vision's MobileNetV3Small at scale 0.35 (hardswish, hardsigmoid SE);
               "image" [-1, 3, 64, 64]
    encoder    an ERNIE/BERT-style encoder: word/position/type embeddings (positions from
               cumsum(ones_like(ids))), LayerNorm, two post-norm transformer layers (GELU), a tanh pooler;
               int64 "input_ids" and "attention_mask" [-1, -1]; fetches the sequence and pooled
               outputs
    detector   a PP-OCR-style text detector: conv backbone, DBFPN (nearest upsampling by 2, bilinear
               resize to a size taken from `paddle.shape`), DB head with conv2d_transpose;
               "image" [1, 3, 64, 64]
    ops        (PIR only) one of each further op the importer converts: activations, pow, clip,
               reductions, split, stack, gather, where, expand, tile, pad3d, group_norm, prelu,
               argmax; "x" [-1, 8] and "index" [3]

Layout: ``pir/<model>/model.json`` + ``model.pdiparams`` (paddle.jit.save's default in 3.x) and
``legacy/<model>.pdmodel`` + ``.pdiparams`` (written with FLAGS_enable_pir_api=0, which must be
set before paddle is imported, so each format is written by its own process). Beside each model
``<model>_io.npz`` (and ``<model>_io_<k>.npz`` for further input shapes) holds the inputs under
their feed names, paddle.inference's outputs under the fetch names and "__fetch_names__" (the
fetch names in order).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "paddle3"
SEED = 2025
FORMATS = ("pir", "legacy")
PIR_ONLY = {"ops"}
"""Models written as PIR only: Paddle 3.3.1 cannot trace most of their functions with the legacy API."""


def inputs(name: str) -> list[dict[str, np.ndarray]]:
    """The seeded input sets each model is run on (the same for both formats): the encoder and
    the ResNet, whose inputs have unknown dims, at two shapes."""
    rng = np.random.default_rng(SEED + len(name))
    if name == "encoder":
        cases = []
        for batch, length in ((2, 7), (3, 4)):
            mask = np.ones((batch, length), dtype=np.int64)
            mask[1, length - 2:] = 0
            cases.append({"input_ids": rng.integers(0, 64, (batch, length)).astype(np.int64), "attention_mask": mask})
        return cases
    if name == "ops":
        return [{"x": rng.standard_normal((3, 8)).astype(np.float32), "index": np.array([0, 5, 7], np.int64)}]
    side = {"resnet": 32, "mobilenet": 64, "detector": 64}[name]
    batches = {"resnet": (2, 1), "mobilenet": (2,), "detector": (1,)}[name]
    return [{"image": rng.standard_normal((batch, 3, side, side)).astype(np.float32)} for batch in batches]


def unary(op: str, x):
    """``op`` (gelu, tanh, sigmoid) of ``x``. Paddle 3.3.1's functions for them fail to trace with
    FLAGS_enable_pir_api=0 ("must be Value, but got Variable"), so legacy programs append the op
    through LayerHelper, as Paddle 2's static functions did."""
    import paddle

    if os.environ.get("FLAGS_enable_pir_api") != "0":
        return getattr(paddle.nn.functional, op)(x)
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(op)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type=op, inputs={"X": [x]}, outputs={"Out": [out]})
    return out


def build_models():  # noqa: C901  (the model classes need paddle, imported by the caller)
    import paddle
    from paddle import nn
    from paddle.nn import functional as F

    class BasicBlock(nn.Layer):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2D(cin, cout, 3, stride, 1, bias_attr=False)
            self.bn1 = nn.BatchNorm2D(cout)
            self.conv2 = nn.Conv2D(cout, cout, 3, 1, 1, bias_attr=False)
            self.bn2 = nn.BatchNorm2D(cout)
            self.short = (nn.Sequential(nn.Conv2D(cin, cout, 1, stride, bias_attr=False), nn.BatchNorm2D(cout))
                          if stride != 1 or cin != cout else None)

        def forward(self, x):
            y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
            return F.relu(y + (x if self.short is None else self.short(x)))

    class ResNet(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2D(3, 8, 3, 1, 1), nn.BatchNorm2D(8), nn.ReLU(), nn.MaxPool2D(3, 2, 1))
            self.blocks = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2))
            self.pool = nn.AdaptiveAvgPool2D(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, image):
            return self.fc(paddle.flatten(self.pool(self.blocks(self.stem(image))), 1))

    class EncoderLayer(nn.Layer):
        """Post-norm BERT layer; its products are `@` (paddle.matmul fails to trace in the legacy mode)."""

        def __init__(self, hidden: int, heads: int) -> None:
            super().__init__()
            self.heads, self.size = heads, hidden // heads
            self.q, self.k, self.v, self.out = (nn.Linear(hidden, hidden) for _ in range(4))
            self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.ffn1, self.ffn2 = nn.Linear(hidden, 2 * hidden), nn.Linear(2 * hidden, hidden)
            self.dropout = nn.Dropout(0.1)

        def split(self, x):
            return paddle.reshape(x, [0, 0, self.heads, self.size]).transpose([0, 2, 1, 3])

        def forward(self, x, mask):
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = paddle.scale(q @ k.transpose([0, 1, 3, 2]), self.size ** -0.5) + mask
            context = (self.dropout(F.softmax(scores)) @ v).transpose([0, 2, 1, 3])
            x = self.norm1(x + self.out(paddle.reshape(context, [0, 0, self.heads * self.size])))
            return self.norm2(x + self.ffn2(unary("gelu", self.ffn1(x))))

    class Encoder(nn.Layer):
        def __init__(self, vocab: int = 64, hidden: int = 32, heads: int = 4, layers: int = 2) -> None:
            super().__init__()
            self.word = nn.Embedding(vocab, hidden)
            self.position = nn.Embedding(32, hidden)
            self.token_type = nn.Embedding(2, hidden)
            self.norm = nn.LayerNorm(hidden)
            self.layers = nn.LayerList([EncoderLayer(hidden, heads) for _ in range(layers)])
            self.pooler = nn.Linear(hidden, hidden)

        def forward(self, input_ids, attention_mask):
            ones = paddle.ones_like(input_ids)
            positions = paddle.cumsum(ones, axis=-1) - ones
            types = paddle.zeros_like(input_ids)
            x = self.norm(self.word(input_ids) + self.position(positions) + self.token_type(types))
            mask = paddle.unsqueeze((1.0 - attention_mask.astype("float32")) * -1e4, [1, 2])
            for layer in self.layers:
                x = layer(x, mask)
            return x, unary("tanh", self.pooler(x[:, 0]))

    class ConvBN(nn.Sequential):
        def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
            super().__init__(nn.Conv2D(cin, cout, 3, stride, 1, bias_attr=False), nn.BatchNorm2D(cout), nn.ReLU())

    class Detector(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.c2, self.c3, self.c4 = ConvBN(3, 8, 2), ConvBN(8, 16, 2), ConvBN(16, 24, 2)
            self.in2, self.in3, self.in4 = (nn.Conv2D(c, 16, 1, bias_attr=False) for c in (8, 16, 24))
            self.p2, self.p3, self.p4 = (nn.Conv2D(16, 4, 3, padding=1, bias_attr=False) for _ in range(3))
            self.head = nn.Sequential(nn.Conv2D(12, 4, 3, padding=1, bias_attr=False), nn.BatchNorm2D(4), nn.ReLU(),
                                      nn.Conv2DTranspose(4, 4, 2, 2), nn.BatchNorm2D(4), nn.ReLU(),
                                      nn.Conv2DTranspose(4, 1, 2, 2))

        def forward(self, image):
            c2 = self.c2(image)
            c3 = self.c3(c2)
            c4 = self.c4(c3)
            in4 = self.in4(c4)
            out3 = self.in3(c3) + F.upsample(in4, scale_factor=2, mode="nearest")
            out2 = self.in2(c2) + F.upsample(out3, scale_factor=2, mode="nearest")
            size = paddle.shape(out2)[2:]
            p4 = F.interpolate(self.p4(in4), size=size, mode="bilinear", align_corners=False)
            p3 = F.interpolate(self.p3(out3), size=size, mode="bilinear", align_corners=False)
            fuse = paddle.concat([p4, p3, self.p2(out2)], axis=1)
            return unary("sigmoid", self.head(fuse))

    class Ops(nn.Layer):
        """One of each of the other ops the importer converts, on a [-1, 8] input."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.norm = nn.GroupNorm(2, 4)
            self.prelu = nn.PReLU(4)

        def forward(self, x, index):
            a = F.leaky_relu(self.fc(x), 0.1) + F.relu6(x) + F.silu(x) + F.elu(x, 0.5) + F.softplus(x)
            b = paddle.pow(paddle.abs(a), 1.5) + paddle.sqrt(paddle.abs(x) + 1) * paddle.rsqrt(paddle.abs(x) + 1)
            c = paddle.clip(b, -2.0, 3.0) + paddle.exp(-paddle.abs(x)) + paddle.log(paddle.abs(x) + 1)
            stats = (paddle.mean(c, axis=-1, keepdim=True) + paddle.sum(c, axis=-1, keepdim=True)
                     + paddle.max(c, axis=-1, keepdim=True))
            left, right = paddle.split(c, 2, axis=-1)
            stacked = paddle.stack([left, right], axis=1)
            gathered = paddle.gather(c, index, axis=1)
            kept = paddle.where(c > 0.5, c, paddle.zeros_like(c))
            e = (paddle.expand(paddle.squeeze(paddle.unsqueeze(stats, 0), 0), [-1, 8])
                 + paddle.maximum(kept, c * 0.5) + paddle.tile(left, [1, 2]))
            image = self.prelu(self.norm(F.pad(paddle.reshape(e, [-1, 4, 2, 1]), [1, 1, 0, 0])))
            return e, stacked, gathered, image, paddle.argmax(c, axis=-1)

    def mobilenet():
        return paddle.vision.models.MobileNetV3Small(scale=0.35, num_classes=10)

    return {"resnet": ResNet, "mobilenet": mobilenet, "encoder": Encoder, "detector": Detector, "ops": Ops}


def randomize_norms(layer, rng: np.random.Generator) -> None:
    """Non-trivial BN and LayerNorm statistics and affine weights."""
    from paddle import nn

    for sub in layer.sublayers():
        if isinstance(sub, nn.BatchNorm2D):
            c = sub._mean.shape[0]
            sub._mean.set_value(rng.normal(0.0, 0.3, c).astype("float32"))
            sub._variance.set_value(rng.uniform(0.5, 2.0, c).astype("float32"))
        if isinstance(sub, (nn.BatchNorm2D, nn.LayerNorm)):
            c = sub.weight.shape[0]
            sub.weight.set_value(rng.uniform(0.5, 1.5, c).astype("float32"))
            sub.bias.set_value(rng.normal(0.0, 0.2, c).astype("float32"))


def input_specs(name: str):
    from paddle.static import InputSpec

    if name == "encoder":
        return [InputSpec([-1, -1], "int64", "input_ids"), InputSpec([-1, -1], "int64", "attention_mask")]
    if name == "ops":
        return [InputSpec([-1, 8], "float32", "x"), InputSpec([3], "int64", "index")]
    side = 32 if name == "resnet" else 64
    return [InputSpec([1 if name == "detector" else -1, 3, side, side], "float32", "image")]


def run_predictor(model: Path, params: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import paddle

    config = paddle.inference.Config(str(model), str(params))
    config.disable_gpu()
    config.disable_glog_info()
    config.disable_mkldnn()  # its interpolation refuses the scale attr PIR programs carry
    predictor = paddle.inference.create_predictor(config)
    for name in predictor.get_input_names():
        predictor.get_input_handle(name).copy_from_cpu(feeds[name])
    predictor.run()
    return {n: predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()}


def write_format(fmt: str) -> None:
    """Export every model in ``fmt`` and record the predictor's outputs (run in a fresh process)."""
    import paddle

    paddle.set_device("cpu")
    for name, make in build_models().items():
        if fmt == "legacy" and name in PIR_ONLY:
            continue
        paddle.seed(SEED)
        with paddle.utils.unique_name.guard():
            layer = make()
            randomize_norms(layer, np.random.default_rng(SEED))
            layer.eval()
            if fmt == "pir":
                folder = OUT_DIR / "pir" / name
                prefix, model = folder / "model", folder / "model.json"
            else:
                folder = OUT_DIR / "legacy"
                prefix, model = folder / name, folder / f"{name}.pdmodel"
            folder.mkdir(parents=True, exist_ok=True)
            paddle.jit.save(layer, str(prefix), input_spec=input_specs(name))
        Path(f"{prefix}.pdiparams.info").unlink(missing_ok=True)
        for case, feeds in enumerate(inputs(name)):
            outs = run_predictor(model, Path(f"{prefix}.pdiparams"), feeds)
            io_name = f"{name}_io.npz" if case == 0 else f"{name}_io_{case}.npz"
            np.savez((folder if fmt == "legacy" else folder.parent) / io_name, **feeds, **outs,
                     __fetch_names__=np.array(list(outs), dtype=np.str_))
            print(fmt, name, case, {k: v.shape for k, v in outs.items()})


def main() -> None:
    if len(sys.argv) > 1:
        fmt = sys.argv[1]
        if fmt == "legacy":
            os.environ["FLAGS_enable_pir_api"] = "0"
        write_format(fmt)
        return
    for fmt in FORMATS:
        subprocess.run([sys.executable, __file__, fmt], check=True)


if __name__ == "__main__":
    main()
