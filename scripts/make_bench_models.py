"""Write today's models at realistic sizes, with seeded random weights, as ONNX files for
``benchmarks/bench_modern.py``.

BERT-base (sequence 128, fed token types), GPT-2 small (sequence 128), the T5-small encoder (T5 v1.1's gated GELU,
sequence 128), ViT-B/16 (224 px), ConvNeXt-T (224 px), MobileNetV3-Large (224 px) and a
YOLOv8n-like detector (640 px), all at batch 1, exported with PyTorch's TorchScript exporter
(opset 17) with fixed shapes, with eager attention. The architectures are the ``transformers``
configs' defaults or the plain PyTorch models of ``scripts/make_modern_fixtures.py`` at full size.
Each model is written to ``<folder>/<name>.onnx`` with ``<name>_inputs.npz`` (the inputs the
benchmark feeds); a model whose files are there is skipped, and files appear only when complete
(written beside, then renamed). The tools live in the torch virtual environment (see
``make_modern_fixtures.py``)::

    /work/torchvenv/bin/python scripts/make_bench_models.py [--out DIR] [--only bert,vit]

``DIR`` defaults to ``~/.cache/halfway/bench_models`` (or ``$HALFWAY_BENCH_MODELS``).
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import warnings
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import torch
import transformers
from make_modern_fixtures import HFOutput, ImageModel, MobileNetV3, TextModel, TinyYolo, build
from torch import nn

DEFAULT_DIR = Path(os.environ.get("HALFWAY_BENCH_MODELS", Path.home() / ".cache" / "halfway" / "bench_models"))
SEQUENCE = 128
OPSET = 17

MOBILENETV3_LARGE = (
    (16, 16, 16, 3, False, False, 1), (16, 64, 24, 3, False, False, 2), (24, 72, 24, 3, False, False, 1),
    (24, 72, 40, 5, True, False, 2), (40, 120, 40, 5, True, False, 1), (40, 120, 40, 5, True, False, 1),
    (40, 240, 80, 3, False, True, 2), (80, 200, 80, 3, False, True, 1), (80, 184, 80, 3, False, True, 1),
    (80, 184, 80, 3, False, True, 1), (80, 480, 112, 3, True, True, 1), (112, 672, 112, 3, True, True, 1),
    (112, 672, 160, 5, True, True, 2), (160, 960, 160, 5, True, True, 1), (160, 960, 160, 5, True, True, 1))
"""MobileNetV3-Large's inverted residuals, in ``make_modern_fixtures.MOBILENETV3_TINY``'s form."""


class TokenTypesModel(HFOutput):
    """BERT fed its token types too, as its usual exports are."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
                ) -> torch.Tensor:
        return self.result(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def hf_model(model_class: str, config_class: str, wrapper: type[HFOutput], output: str, **config: object
             ) -> Callable[[], nn.Module]:
    """A builder of a ``transformers`` model from its config's defaults and ``config``."""

    def make() -> nn.Module:
        cfg = getattr(transformers, config_class)(**config)
        model = getattr(transformers, model_class)._from_config(cfg, attn_implementation="eager")
        call = {"use_cache": False} if "Causal" in model_class else {}
        return wrapper(model, output, **call)

    return make


MODELS: dict[str, tuple[Callable[[], nn.Module], str]] = {
    "bert_base": (hf_model("BertModel", "BertConfig", TokenTypesModel, "last_hidden_state"), "bert"),
    "gpt2_small": (hf_model("GPT2LMHeadModel", "GPT2Config", TextModel, "logits"), "text"),
    "t5_small_encoder": (hf_model("T5EncoderModel", "T5Config", TextModel, "last_hidden_state",
                                  feed_forward_proj="gated-gelu"), "text"),
    "vit_b16": (hf_model("ViTModel", "ViTConfig", ImageModel, "last_hidden_state", add_pooling_layer=False), "224"),
    "convnext_tiny": (hf_model("ConvNextForImageClassification", "ConvNextConfig", ImageModel, "logits"), "224"),
    "mobilenetv3_large": (lambda: MobileNetV3(1000, MOBILENETV3_LARGE, last=960, hidden=1280), "224"),
    "yolo_640": (lambda: TinyYolo(80, widths=(16, 64, 128, 256), depth=2), "640"),
}
"""Name -> (builder, inputs: ``text``, ``bert`` or the square image size)."""


def make_inputs(kind: str) -> dict[str, np.ndarray]:
    """``text`` (ids and mask), ``bert`` (and token types) or an image size's inputs."""
    rng = np.random.default_rng(0)
    if kind in ("text", "bert"):
        text = {"input_ids": rng.integers(3, 1000, (1, SEQUENCE), dtype=np.int64),
                "attention_mask": np.ones((1, SEQUENCE), np.int64)}
        return text | ({"token_type_ids": np.zeros((1, SEQUENCE), np.int64)} if kind == "bert" else {})
    size = int(kind)
    return {"pixel_values": rng.standard_normal((1, 3, size, size)).astype(np.float32)}


def seeded(builder: Callable[[], nn.Module]) -> nn.Module:
    """The model with ``make_modern_fixtures.build``'s seeded perturbation of every weight."""
    return build(SimpleNamespace(build=lambda _attention: builder()), None)


def export(name: str, out_dir: Path) -> None:
    """Write ``name``'s model and inputs into ``out_dir``, each through a temporary file renamed
    into place, the model last (its presence marks the pair complete)."""
    builder, kind = MODELS[name]
    model = seeded(builder)
    feeds = make_inputs(kind)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        onnx_tmp, npz_tmp = Path(tmp) / f"{name}.onnx", Path(tmp) / f"{name}_inputs.npz"
        args = tuple(torch.from_numpy(v) for v in feeds.values())
        with warnings.catch_warnings(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()), \
                torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, str(onnx_tmp), dynamo=False, opset_version=OPSET,
                              input_names=list(feeds), output_names=["output"])
        onnx.checker.check_model(str(onnx_tmp))
        np.savez(npz_tmp, **feeds)
        os.replace(npz_tmp, out_dir / npz_tmp.name)
        os.replace(onnx_tmp, out_dir / onnx_tmp.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", help=f"comma-separated models (default: all of {', '.join(MODELS)})")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = set(names) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; known: {list(MODELS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = args.out / f"{name}.onnx"
        if path.exists():
            print(f"{name:20s} exists", flush=True)
            continue
        export(name, args.out)
        print(f"{name:20s} {path.stat().st_size / 2**20:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
