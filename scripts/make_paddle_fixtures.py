"""Write small Paddle-made model fixtures into tests/fixtures/paddle/.

Needs paddlepaddle (3.3.1 was used); it is not a dependency of halfway itself:

    /tmp/pdvenv/bin/python scripts/make_paddle_fixtures.py

Outputs (all seeded, so reruns give the same tensors):
    resnet_tiny.pdmodel / .pdiparams   tiny CNN: conv+BN+ReLU stem, one residual basic block,
                                       depthwise conv+BN+ReLU6, max pool, global avg pool,
                                       flatten, Linear(10), softmax; input "image" [1,3,16,16]
    resnet_tiny_io.npz                 a random "image" and Paddle's predictor output for it
    resnet_tiny_legacy/                the same program in the old layout: `__model__` plus
                                       one file per persistable variable
    mlp_tiny.pdmodel / .pdiparams      Linear(4,8)+ReLU+Linear(8,3); input "x" [2,4]
    mlp_tiny_io.npz                    a random "x" and Paddle's output for it

Each npz holds the inputs under their feed names, the outputs under their fetch names and
"__fetch_names__" (a numpy string array with the fetch names in fetch order).
"""

from __future__ import annotations

import os

# Must precede `import paddle`: otherwise paddle.jit.save writes the PIR .json format.
os.environ["FLAGS_enable_pir_api"] = "0"

import random  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle import nn  # noqa: E402
from paddle.static import InputSpec  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "paddle"
SEED = 2024


def seed_all(seed: int = SEED) -> None:
    """Seed Python, numpy and paddle."""
    random.seed(seed)
    np.random.seed(seed)
    paddle.seed(seed)


class BasicBlock(nn.Layer):
    """ResNet basic block: conv-BN-ReLU-conv-BN, plus the identity skip, then ReLU."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2D(channels, channels, 3, padding=1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(channels)
        self.conv2 = nn.Conv2D(channels, channels, 3, padding=1, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(channels)
        self.relu = nn.ReLU()

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + x)


class ResNetTiny(nn.Layer):
    """A ResNet-style CNN small enough for a checked-in fixture."""

    def __init__(self, channels: int = 8, num_classes: int = 10) -> None:
        super().__init__()
        # The stem conv keeps its bias so the fixture also covers reshape2 + elementwise_add.
        self.stem = nn.Sequential(
            nn.Conv2D(3, channels, 3, padding=1), nn.BatchNorm2D(channels), nn.ReLU()
        )
        self.block = BasicBlock(channels)
        self.dw = nn.Sequential(
            nn.Conv2D(channels, channels, 3, padding=1, groups=channels, bias_attr=False),
            nn.BatchNorm2D(channels),
            nn.ReLU6(),
        )
        self.maxpool = nn.MaxPool2D(2, 2)
        self.gap = nn.AdaptiveAvgPool2D(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.maxpool(self.dw(self.block(self.stem(x))))
        x = paddle.flatten(self.gap(x), 1)
        return nn.functional.softmax(self.fc(x))


class MLPTiny(nn.Layer):
    """Linear + ReLU + Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def randomize_batch_norms(layer: nn.Layer, rng: np.random.Generator) -> None:
    """Give every BN non-trivial scale, shift, running mean and (positive) running variance."""
    for sub in layer.sublayers():
        if isinstance(sub, nn.BatchNorm2D):
            c = sub._mean.shape[0]
            sub.weight.set_value(rng.uniform(0.5, 1.5, c).astype("float32"))
            sub.bias.set_value(rng.normal(0.0, 0.2, c).astype("float32"))
            sub._mean.set_value(rng.normal(0.0, 0.5, c).astype("float32"))
            sub._variance.set_value(rng.uniform(0.5, 2.0, c).astype("float32"))


def export(layer: nn.Layer, prefix: Path, spec: InputSpec) -> None:
    """Switch to eval mode and write prefix.pdmodel + prefix.pdiparams."""
    layer.eval()
    paddle.jit.save(layer, str(prefix), input_spec=[spec])
    # jit.save also pickles structured parameter names; inference does not need them.
    prefix.with_suffix(".pdiparams.info").unlink()


def run_predictor(
    model: Path, params: Path | None, feeds: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Run a saved model through paddle.inference; `params=None` means `model` is a legacy dir."""
    paths = [str(model)] if params is None else [str(model), str(params)]
    config = paddle.inference.Config(*paths)
    config.disable_gpu()
    config.disable_glog_info()
    predictor = paddle.inference.create_predictor(config)
    for name in predictor.get_input_names():
        predictor.get_input_handle(name).copy_from_cpu(feeds[name])
    predictor.run()
    return {n: predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()}


def write_io(prefix: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run prefix.pdmodel on `feeds` and save inputs + outputs to prefix_io.npz."""
    outs = run_predictor(prefix.with_suffix(".pdmodel"), prefix.with_suffix(".pdiparams"), feeds)
    np.savez(
        prefix.parent / f"{prefix.name}_io.npz",
        **feeds,
        **outs,
        __fetch_names__=np.array(list(outs), dtype=np.str_),
    )
    return outs


def write_legacy(prefix: Path, out_dir: Path) -> None:
    """Re-save prefix.pdmodel/.pdiparams as `__model__` plus one file per persistable var."""
    paddle.enable_static()
    try:
        exe = paddle.static.Executor(paddle.CPUPlace())
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            program, _, _ = paddle.static.load_inference_model(str(prefix), exe)
            if out_dir.exists():
                shutil.rmtree(out_dir)
            out_dir.mkdir(parents=True)
            # The program exactly as jit.save wrote it; only the parameter layout changes.
            shutil.copyfile(prefix.with_suffix(".pdmodel"), out_dir / "__model__")
            paddle.static.save_vars(
                exe,
                str(out_dir),
                main_program=program,
                predicate=paddle.framework.io_utils.is_persistable,
                filename=None,
            )
    finally:
        paddle.disable_static()


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)

    seed_all()
    with paddle.utils.unique_name.guard():
        resnet = ResNetTiny()
        randomize_batch_norms(resnet, np.random.default_rng(SEED))
        export(resnet, OUT_DIR / "resnet_tiny", InputSpec([1, 3, 16, 16], "float32", "image"))
    image = np.random.default_rng(SEED + 1).standard_normal((1, 3, 16, 16)).astype("float32")
    outs = write_io(OUT_DIR / "resnet_tiny", {"image": image})
    write_legacy(OUT_DIR / "resnet_tiny", OUT_DIR / "resnet_tiny_legacy")
    legacy_outs = run_predictor(OUT_DIR / "resnet_tiny_legacy", None, {"image": image})
    for name, value in outs.items():
        np.testing.assert_array_equal(legacy_outs[name], value, err_msg=f"legacy {name}")

    seed_all()
    with paddle.utils.unique_name.guard():
        export(MLPTiny(), OUT_DIR / "mlp_tiny", InputSpec([2, 4], "float32", "x"))
    x = np.random.default_rng(SEED + 2).standard_normal((2, 4)).astype("float32")
    write_io(OUT_DIR / "mlp_tiny", {"x": x})


if __name__ == "__main__":
    main()
