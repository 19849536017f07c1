"""Write tiny exports of today's architectures into tests/fixtures/modern/.

Thirteen ``transformers`` families (BERT, DistilBERT, RoBERTa, GPT-2, LLaMA, the T5 encoder, ViT,
ConvNeXt, EfficientNet, MobileViT, Swin, SegFormer, the Whisper encoder), each built from a tiny
config object (2 layers, hidden 32, a 128-token vocabulary, 32-64 px images) with seeded random
weights, and two plain PyTorch models (a YOLO-style detector and a MobileNetV3), all in eval mode.
Each is exported with PyTorch's TorchScript exporter (opset 17, ``dynamic_axes``) and its dynamo
exporter (opset 18, ``dynamic_shapes``), dynamic in batch and sequence (text), batch, height and
width (images) or batch (Whisper's fixed-length features); transformers models once per attention
implementation they have (``eager``, ``sdpa``).

Node names, doc strings and metadata (the dynamo exporter's stack traces) are dropped to keep the files
small. Every export runs on ONNX Runtime (CPU) at two batch sizes and two sequence lengths (or image
sizes where the model takes any); a case is kept where ONNX Runtime agrees with PyTorch (an
exporter may bake a traced size into the graph). Written per export:

    <name>.onnx        the model
    <name>_io.npz      every case: ``case<i>/<input>`` and ``case<i>/<output>`` arrays
    MANIFEST.json      per fixture: family, exporter, attention, opset, inputs and outputs with their
                       dims, the cases, file sizes and digests; the exports that failed and why;
                       the torch, transformers, onnx and onnxruntime versions

Text models take ``input_ids`` (int64) and ``attention_mask`` (int64, right-padded with zeros in
the reference inputs); GPT-2 and LLaMA are causal language models returning logits.

The tools live in their own virtual environment, not halfway's (torch 2.13.0 is the CPU wheel
on this machine; pin it so that pip never picks another)::

    python3 -m venv /work/torchvenv
    /work/torchvenv/bin/python -m pip install torch==2.13.0
    /work/torchvenv/bin/python -m pip install torch==2.13.0 transformers onnx onnxruntime onnxscript
    /work/torchvenv/bin/python scripts/make_modern_fixtures.py [--only bert,gpt2]

The script rewrites the folder (all of it, or the fixtures of ``--only`` families, keeping the
others' manifest entries; run it from the repository root or anywhere, not with the root as the
working directory of an interactive ``python``, whose ``kernels/`` folder would shadow a package of
that name); then ``.venv/bin/python -m tests.support.modern`` prints each fixture's first failure in
halfway, from which ``EXPECTED_FAILURES`` in ``tests/support/modern.py`` is updated.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import itertools
import json
import math
import re
import warnings
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import onnxscript
import torch
import transformers
from torch import nn

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "modern"
SEED = 0
VOCAB = 128
TEXT_CASES = (1, 3), (6, 13)
"""Batch sizes, sequence lengths: every pair is a case."""
IMAGE_BATCHES = 1, 2
"""Batch sizes of images; with a family's image sizes, every pair is a case."""
AGREEMENT = 1e-3
"""Largest ONNX Runtime error against PyTorch, over the output's magnitude, for a case to be kept."""
EXPORTERS = {"torchscript": 17, "dynamo": 18}
"""Exporter -> opset."""


@dataclass(frozen=True)
class Family:
    """One architecture: how to build it and what it is fed."""

    name: str
    build: Callable[[str | None], nn.Module]
    """The attention implementation (None: the family has one) -> the model, returning a tensor."""
    kind: str
    """text, causal, image, fixed_image or audio: the inputs and which of their dims vary."""
    output: str
    attentions: tuple[str | None, ...] = ("eager", "sdpa")
    image_sizes: tuple[int, int] = (32, 48)
    """Square image sizes of the cases (the first alone for a fixed_image)."""
    audio: tuple[int, int] = (16, 32)
    """Mel bins and frames of audio features."""


class HFOutput(nn.Module):
    """A transformers model as a module of positional tensors returning one tensor: its subclasses
    name the inputs, which the exporters take as the graph's input names."""

    def __init__(self, model: nn.Module, output: str, **call: Any) -> None:
        super().__init__()
        self.model, self.output, self.call = model, output, call

    def result(self, **inputs: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(**inputs, **self.call), self.output)


class TextModel(HFOutput):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.result(input_ids=input_ids, attention_mask=attention_mask)


class ImageModel(HFOutput):
    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.result(pixel_values=pixel_values)


class AudioEncoder(HFOutput):
    """The encoder of an encoder-decoder model."""

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return getattr(self.model.get_encoder()(input_features=input_features), self.output)


def hf(model_class: str, config_class: str, wrapper: type[HFOutput], output: str, **config: Any
       ) -> Callable[[str | None], nn.Module]:
    """A builder of a transformers model from its config, for one attention implementation."""

    def build(attention: str | None) -> nn.Module:
        cfg = getattr(transformers, config_class)(**config)
        extra = {"attn_implementation": attention} if attention else {}
        model = getattr(transformers, model_class)._from_config(cfg, **extra)
        if attention and model.config._attn_implementation != attention:
            raise RuntimeError(f"asked for {attention} attention, got {model.config._attn_implementation}")
        call = {"use_cache": False} if wrapper is TextModel and "Causal" in model_class else {}
        return wrapper(model, output, **call)

    return build


# --- plain PyTorch models -------------------------------------------------------------------------

class ConvBnAct(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int = 3, s: int = 1, act: type[nn.Module] = nn.SiLU,
                 groups: int = 1) -> None:
        super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), act())


class Bottleneck(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.cv1, self.cv2 = ConvBnAct(c, c), ConvBnAct(c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.cv2(self.cv1(x))


class C2f(nn.Module):
    """YOLOv8's split-bottlenecks-concat block."""

    def __init__(self, cin: int, cout: int, n: int = 1) -> None:
        super().__init__()
        self.c = cout // 2
        self.cv1 = ConvBnAct(cin, 2 * self.c, 1)
        self.blocks = nn.ModuleList(Bottleneck(self.c) for _ in range(n))
        self.cv2 = ConvBnAct((2 + n) * self.c, cout, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ys = list(self.cv1(x).chunk(2, 1))
        for block in self.blocks:
            ys.append(block(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class SPPF(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.cv1, self.cv2 = ConvBnAct(c, c // 2, 1), ConvBnAct(c * 2, c, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(self.pool(y[-1]))
        return self.cv2(torch.cat(y, 1))


class TinyYolo(nn.Module):
    """An anchor-free detector: a C2f backbone, SPPF, an upsampling neck over strides 8-32 and a
    head that decodes boxes on grids made from the feature maps' run-time sizes."""

    def __init__(self, classes: int = 4, widths: tuple[int, int, int, int] = (8, 16, 24, 32), depth: int = 1) -> None:
        """``widths``: channels of the stem and of the stride 8, 16 and 32 maps; ``depth``: bottlenecks per C2f."""
        super().__init__()
        c1, c3, c4, c5 = widths
        self.p3 = nn.Sequential(ConvBnAct(3, c1, s=2), ConvBnAct(c1, c3, s=2), C2f(c3, c3, depth),
                                ConvBnAct(c3, c3, s=2), C2f(c3, c3, depth))
        self.p4 = nn.Sequential(ConvBnAct(c3, c4, s=2), C2f(c4, c4, depth))
        self.p5 = nn.Sequential(ConvBnAct(c4, c5, s=2), SPPF(c5))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4, self.n3 = C2f(c5 + c4, c4, depth), C2f(c4 + c3, c3, depth)
        self.heads = nn.ModuleList(nn.Conv2d(c, 4 + classes, 1) for c in (c3, c4, c5))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        p3 = self.p3(pixel_values)
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.n4(torch.cat([self.up(p5), p4], 1))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        return torch.cat([self.decode(h(f), 8 * 2**i) for i, (h, f) in enumerate(zip(self.heads, (n3, n4, p5)))], 1)

    @staticmethod
    def decode(x: torch.Tensor, stride: int) -> torch.Tensor:
        b, c, h, w = x.shape
        ys, xs = torch.meshgrid(torch.arange(h, dtype=x.dtype), torch.arange(w, dtype=x.dtype), indexing="ij")
        grid = torch.stack([xs, ys], 0).reshape(1, 2, h * w)
        x = x.reshape(b, c, h * w)
        xy = (x[:, :2].sigmoid() * 2 - 0.5 + grid) * stride
        wh = (x[:, 2:4].sigmoid() * 2) ** 2 * (4 * stride)
        return torch.cat([xy, wh, x[:, 4:].sigmoid()], 1).transpose(1, 2)


class SqueezeExcite(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, max(8, c // 4), 1), nn.Conv2d(max(8, c // 4), c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * nn.functional.hardsigmoid(self.fc2(nn.functional.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, expand: int, cout: int, k: int, se: bool, act: type[nn.Module], s: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBnAct(cin, expand, 1, act=act)] if expand != cin else []
        layers.append(ConvBnAct(expand, expand, k, s, act=act, groups=expand))
        layers += [SqueezeExcite(expand)] if se else []
        layers.append(ConvBnAct(expand, cout, 1, act=nn.Identity))
        self.body, self.residual = nn.Sequential(*layers), s == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


MOBILENETV3_TINY = ((8, 8, 8, 3, True, False, 2), (8, 24, 16, 3, False, False, 2), (16, 32, 16, 3, False, False, 1),
                    (16, 48, 24, 5, True, True, 2), (24, 64, 24, 5, True, True, 1))
"""MobileNetV3-Small's first blocks at a quarter of its width: (in, expand, out, kernel, squeeze-excite,
hardswish (else ReLU), stride) per inverted residual."""


class MobileNetV3(nn.Module):
    """A MobileNetV3 of ``blocks`` (default: ``MOBILENETV3_TINY``), a 3x3 stem of ``blocks[0][0]``
    channels, a last 1x1 conv of ``last`` channels and a classifier of ``hidden`` units."""

    def __init__(self, classes: int = 10, blocks: tuple[tuple, ...] = MOBILENETV3_TINY, last: int = 96,
                 hidden: int = 64) -> None:
        super().__init__()
        hs, re = nn.Hardswish, nn.ReLU
        body = [InvertedResidual(cin, e, cout, k, se, hs if swish else re, s) for cin, e, cout, k, se, swish, s in blocks]
        self.features = nn.Sequential(ConvBnAct(3, blocks[0][0], s=2, act=hs), *body,
                                      ConvBnAct(blocks[-1][2], last, 1, act=hs))
        self.classifier = nn.Sequential(nn.Linear(last, hidden), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(hidden, classes))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(pixel_values).mean((2, 3)))


def plain(cls: type[nn.Module]) -> Callable[[str | None], nn.Module]:
    return lambda _attention: cls()


# --- the families ---------------------------------------------------------------------------------

_TEXT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=32)
FAMILIES = [
    Family("bert", hf("BertModel", "BertConfig", TextModel, "last_hidden_state", **_TEXT), "text",
           "last_hidden_state"),
    Family("distilbert", hf("DistilBertModel", "DistilBertConfig", TextModel, "last_hidden_state", vocab_size=VOCAB,
                            dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32), "text",
           "last_hidden_state"),
    Family("roberta", hf("RobertaModel", "RobertaConfig", TextModel, "last_hidden_state",
                         **{**_TEXT, "max_position_embeddings": 34}), "text", "last_hidden_state"),
    Family("gpt2", hf("GPT2LMHeadModel", "GPT2Config", TextModel, "logits", vocab_size=VOCAB, n_positions=32, n_embd=32,
                      n_layer=2, n_head=2, n_inner=64, bos_token_id=1, eos_token_id=1), "causal", "logits"),
    Family("llama", hf("LlamaForCausalLM", "LlamaConfig", TextModel, "logits", vocab_size=VOCAB, hidden_size=32,
                       intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=8, max_position_embeddings=32), "causal", "logits"),
    Family("t5_encoder", hf("T5EncoderModel", "T5Config", TextModel, "last_hidden_state", vocab_size=VOCAB, d_model=32,
                            d_kv=8, d_ff=64, num_layers=2, num_heads=4, relative_attention_num_buckets=8,
                            feed_forward_proj="gated-gelu"), "text", "last_hidden_state"),
    Family("vit", hf("ViTModel", "ViTConfig", ImageModel, "last_hidden_state", image_size=32, patch_size=8,
                     hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     add_pooling_layer=False), "fixed_image", "last_hidden_state"),
    Family("convnext", hf("ConvNextForImageClassification", "ConvNextConfig", ImageModel, "logits", num_stages=2,
                          hidden_sizes=[16, 32], depths=[1, 1], num_labels=10, image_size=32), "image", "logits",
           (None,)),
    Family("efficientnet", hf("EfficientNetForImageClassification", "EfficientNetConfig", ImageModel, "logits",
                              image_size=32, width_coefficient=0.25, depth_coefficient=0.5, kernel_sizes=[3, 3, 5, 3],
                              in_channels=[32, 16, 24, 40], out_channels=[16, 24, 40, 80], strides=[1, 2, 2, 2],
                              num_block_repeats=[1, 2, 2, 1], expand_ratios=[1, 4, 4, 4], hidden_dim=320,
                              num_labels=10), "image", "logits", (None,)),
    Family("mobilevit", hf("MobileViTForImageClassification", "MobileViTConfig", ImageModel, "logits", image_size=32,
                           patch_size=2, hidden_sizes=[8, 8, 8], neck_hidden_sizes=[8, 8, 8, 16, 16, 16, 32],
                           num_attention_heads=2, expand_ratio=2.0, mlp_ratio=2.0, num_labels=10), "image", "logits",
           (None,), image_sizes=(32, 64)),
    Family("swin", hf("SwinForImageClassification", "SwinConfig", ImageModel, "logits", image_size=32, patch_size=4,
                      embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, mlp_ratio=2.0, num_labels=10),
           "image", "logits", image_sizes=(32, 64)),
    Family("segformer", hf("SegformerForSemanticSegmentation", "SegformerConfig", ImageModel, "logits",
                           num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                           patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                           decoder_hidden_size=32, num_labels=4), "image", "logits"),
    Family("whisper_encoder", hf("WhisperModel", "WhisperConfig", AudioEncoder, "last_hidden_state",
                                 vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2,
                                 encoder_attention_heads=2, encoder_ffn_dim=64, decoder_layers=1,
                                 decoder_attention_heads=2, decoder_ffn_dim=64, max_source_positions=16,
                                 max_target_positions=16, pad_token_id=1, bos_token_id=2, eos_token_id=2,
                                 decoder_start_token_id=2), "audio", "last_hidden_state"),
    Family("yolo", plain(TinyYolo), "image", "detections", (None,), image_sizes=(32, 64)),
    Family("mobilenetv3", plain(MobileNetV3), "image", "logits", (None,)),
]


# --- inputs ---------------------------------------------------------------------------------------

def input_names(family: Family) -> tuple[str, ...]:
    return {"text": ("input_ids", "attention_mask"), "causal": ("input_ids", "attention_mask"),
            "audio": ("input_features",)}.get(family.kind, ("pixel_values",))


def dynamic_dims(family: Family) -> dict[str, dict[int, str]]:
    """Input -> axis -> symbolic name."""
    if family.kind in ("text", "causal"):
        return {name: {0: "batch", 1: "sequence"} for name in input_names(family)}
    if family.kind == "image":
        return {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    return {input_names(family)[0]: {0: "batch"}}


def case_shapes(family: Family) -> list[dict[str, int]]:
    """The reference cases: batch and sequence length or image size."""
    if family.kind in ("text", "causal"):
        return [{"batch": b, "sequence": s} for b, s in itertools.product(*TEXT_CASES)]
    sizes = family.image_sizes if family.kind == "image" else family.image_sizes[:1]
    return [{"batch": b, "size": s} for b, s in itertools.product(IMAGE_BATCHES, sizes)]


def make_inputs(family: Family, case: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    b = case["batch"]
    if family.kind in ("text", "causal"):
        s = case["sequence"]
        ids = rng.integers(3, VOCAB, (b, s), dtype=np.int64)
        mask = np.ones((b, s), np.int64)
        for row in range(b):  # right padding: row r keeps s - 2 - 3r tokens (at least 2)
            mask[row, max(2, s - 2 - 3 * row):] = 0
        return {"input_ids": ids, "attention_mask": mask}
    if family.kind == "audio":
        return {"input_features": coarse_normal(rng, (b, *family.audio))}
    return {"pixel_values": coarse_normal(rng, (b, 3, case["size"], case["size"]))}


def coarse_normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal values rounded to 1/32: exact in float32, and the npz compresses them."""
    return (np.round(rng.standard_normal(shape) * 32) / 32).astype(np.float32)


def trace_case(family: Family) -> dict[str, int]:
    """The inputs an export traces: sizes of 2 and up, none a reference case's."""
    return {"batch": 2, "sequence": 11} if family.kind in ("text", "causal") else {"batch": 2, "size": 32}


# --- building and exporting -----------------------------------------------------------------------

def build(family: Family, attention: str | None) -> nn.Module:
    """The model with seeded weights: every float parameter perturbed (so biases and norms are
    not 0 and 1) and batch norm statistics drawn, in eval mode."""
    torch.manual_seed(SEED)
    model = family.build(attention).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                p.add_(torch.randn_like(p) * 0.05)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn_like(m.running_mean) * 0.1)
                m.running_var.copy_(torch.rand_like(m.running_var) + 0.5)
    return model


def export(model: nn.Module, family: Family, exporter: str, path: Path) -> None:
    feeds = make_inputs(family, trace_case(family), np.random.default_rng(SEED))
    args = tuple(torch.from_numpy(feeds[n]) for n in input_names(family))
    names = list(input_names(family))
    common = dict(input_names=names, output_names=[family.output], opset_version=EXPORTERS[exporter])
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(model, args, str(path), dynamo=False, dynamic_axes=dynamic_dims(family), **common)
        else:
            dims = {n: {axis: torch.export.Dim.DYNAMIC for axis in axes} for n, axes in dynamic_dims(family).items()}
            program = torch.onnx.export(model, args, dynamo=True, dynamic_shapes=dims, external_data=False, **common)
            program.save(str(path), external_data=False)
    strip_debug_info(path)


def strip_debug_info(path: Path) -> None:
    """Drop the nodes' names, doc strings and metadata (the dynamo exporter's stack traces and
    module paths: half of a tiny model's bytes); the graph is unchanged, and its tensors keep
    their names."""
    model = onnx.load(str(path))
    for node in model.graph.node:
        node.name = node.doc_string = ""
        del node.metadata_props[:]
    onnx.save(model, str(path))


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


def reference_cases(model: nn.Module, family: Family, path: Path) -> tuple[list[dict], dict[str, np.ndarray], list]:
    """ONNX Runtime's outputs at every case that agrees with PyTorch; the dropped cases and why."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(SEED + 1)
    kept, arrays, dropped = [], {}, []
    for case in case_shapes(family):
        feeds = make_inputs(family, case, rng)
        try:
            (got,) = session.run([family.output], feeds)
        except Exception as e:  # noqa: BLE001 - ONNX Runtime's own errors: the case is recorded as dropped
            dropped.append({"case": case, "why": f"onnxruntime: {first_line(e)}"})
            continue
        with torch.no_grad():
            want = model(*(torch.from_numpy(feeds[n]) for n in input_names(family))).numpy()
        if got.shape != want.shape or not np.isfinite(got).all() or relative_error(got, want) > AGREEMENT:
            why = f"onnxruntime {got.shape} disagrees with torch {want.shape}"
            if got.shape == want.shape:
                why += f": relative error {relative_error(got, want):.2e}"
            dropped.append({"case": case, "why": why})
            continue
        index = len(kept)
        kept.append(case)
        arrays.update({f"case{index}/{n}": v for n, v in feeds.items()})
        arrays[f"case{index}/{family.output}"] = got
    return kept, arrays, dropped


def first_line(error: BaseException) -> str:
    """The error's first line, and its root cause's (the exporters wrap the cause in a generic
    "step 1/3" message)."""
    root = error
    while root.__cause__ is not None:
        root = root.__cause__
    lines = [f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}" for e in dict.fromkeys((error, root))]
    return re.sub(r"\x1b\[[0-9;]*m", "", " <- ".join(lines))[:400]


def value_dims(values: Any) -> list[dict]:
    """Graph inputs or outputs: name, element type and dims (ints or symbolic names)."""
    out = []
    for v in values:
        t = v.type.tensor_type
        dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]
        out.append({"name": v.name, "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name, "dims": dims})
    return out


def file_entry(path: Path) -> dict:
    data = path.read_bytes()
    return {"file": path.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def make_fixture(family: Family, exporter: str, attention: str | None) -> dict:
    """Export one fixture and write its files; the manifest entry, or a failure entry."""
    name = "_".join(p for p in (family.name, attention, exporter) if p)
    entry: dict[str, Any] = {"name": name, "family": family.name, "exporter": exporter, "attention": attention,
                             "opset": EXPORTERS[exporter]}
    path = OUT_DIR / f"{name}.onnx"
    stage = "build"
    try:
        model = build(family, attention)
        stage = "export"
        export(model, family, exporter, path)
        stage = "onnxruntime"
        cases, arrays, dropped = reference_cases(model, family, path)
    except Exception as e:  # noqa: BLE001 - any failure of torch, its exporters or ONNX Runtime is recorded
        path.unlink(missing_ok=True)
        return {**entry, "failed": stage, "error": first_line(e)}
    if not cases:
        path.unlink()
        return {**entry, "failed": "onnxruntime", "error": "no case agrees with torch", "dropped_cases": dropped}
    np.savez_compressed(OUT_DIR / f"{name}_io.npz", **arrays)
    graph = onnx.load(str(path)).graph
    entry.update(inputs=value_dims(graph.input), outputs=value_dims(graph.output), cases=cases,
                 files=[file_entry(path), file_entry(OUT_DIR / f"{name}_io.npz")])
    if dropped:
        entry["dropped_cases"] = dropped
    return entry


def versions() -> dict[str, str]:
    return {"torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__,
            "onnxscript": onnxscript.__version__, "onnxruntime": ort.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated families to rewrite (default: all)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else {f.name for f in FAMILIES}
    unknown = only - {f.name for f in FAMILIES}
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; known: {[f.name for f in FAMILIES]}")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT_DIR / "MANIFEST.json"
    old = json.loads(manifest_path.read_text()) if args.only and manifest_path.exists() else {}
    entries = [e for e in old.get("fixtures", []) + old.get("failures", []) if e["family"] not in only]
    for family in FAMILIES:
        if family.name not in only:
            continue
        for stale in itertools.chain(OUT_DIR.glob(f"{family.name}_*.onnx"), OUT_DIR.glob(f"{family.name}_*.npz")):
            stale.unlink()
        for exporter, attention in itertools.product(EXPORTERS, family.attentions):
            entry = make_fixture(family, exporter, attention)
            print(f"{entry['name']:40s} {entry.get('failed', 'ok')} {entry.get('error', '')}", flush=True)
            entries.append(entry)
    order = {(f.name, e, a): i for i, (f, e, a) in enumerate(
        (f, e, a) for f in FAMILIES for e in EXPORTERS for a in f.attentions)}
    entries.sort(key=lambda e: order[e["family"], e["exporter"], e["attention"]])
    manifest = {"versions": versions(), "seed": SEED, "fixtures": [e for e in entries if "failed" not in e],
                "failures": [e for e in entries if "failed" in e]}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f["bytes"] for e in manifest["fixtures"] for f in e["files"])
    print(f"{len(manifest['fixtures'])} fixtures, {len(manifest['failures'])} failures, {math.ceil(total / 1024)} KiB")


if __name__ == "__main__":
    main()
