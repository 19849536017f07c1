"""``halfway graph``: .dot text, .svg through Graphviz's ``dot``, and the self-contained .html."""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter

import onnx

from halfway.cli.report.graph import FUSED_TYPES, STYLES
from tests.support.clirun import RESNET_TINY, halfway, one_line_error, proto_op_types

NODE = re.compile(r'^  "(op\d+|in:[^"]+|out:[^"]+)" \[label="([^"\\]*)', re.M)
EDGE = re.compile(r'^  "([^"]+)" -> "([^"]+)"', re.M)
ONNX_NAMES = re.compile(r"\(([^)]+)\)")


def _fused_fp16(tmp_path):
    done = halfway("transpile", RESNET_TINY, "-o", tmp_path / "half", "--fp16")
    assert done.returncode == 0, done.stderr
    return tmp_path / "half.pdmodel"


def test_dot_has_every_op_and_its_data_flow(tmp_path):
    assert halfway("graph", RESNET_TINY, "-o", tmp_path / "g.dot").returncode == 0
    dot = (tmp_path / "g.dot").read_text()
    nodes = {node: label.split(" (")[0] for node, label in NODE.findall(dot)}  # conv2d (Conv): the ONNX ops after
    ops = Counter(label for node, label in nodes.items() if node.startswith("op"))
    assert ops == proto_op_types(RESNET_TINY)
    named = {label for _, label in NODE.findall(dot) if " (" in label}
    assert any(label.startswith("conv2d (Conv") for label in named), named  # Conv first of the ONNX ops it stands for
    listed = {name for label in named for name in ONNX_NAMES.search(label)[1].split("/")} - {"…"}
    assert listed and all(onnx.defs.has(name) for name in listed)
    assert [n for n in nodes if n.startswith(("in:", "out:"))] == ["in:image", "out:softmax_0.tmp_0"]
    edges = EDGE.findall(dot)
    assert all(source in nodes and target in nodes for source, target in edges)
    assert ("in:image", next(n for n, label in nodes.items() if label == "conv2d")) in edges
    assert dot.count(STYLES["float32"][0]) == sum(ops.values())


def test_float16_ops_casts_and_fused_ops_are_marked(tmp_path):
    half = _fused_fp16(tmp_path)
    assert halfway("graph", half, "-o", tmp_path / "g.dot").returncode == 0
    dot = (tmp_path / "g.dot").read_text()
    lines = [line for line in dot.splitlines() if '"op' in line and "label=" in line]
    casts = [line for line in lines if 'label="cast' in line]
    assert len(casts) == proto_op_types(half)["cast"] >= 2 and all(STYLES["cast"][0] in line for line in casts)
    fused = [line for line in lines if "fused_conv2d" in line]
    assert fused and all('peripheries="2"' in line and STYLES["float16"][0] in line for line in fused)


def test_html_is_one_offline_page_holding_the_laid_out_program(tmp_path):
    half = _fused_fp16(tmp_path)
    done = halfway("graph", half, "-o", tmp_path / "g.html")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "g.html").read_text()
    assert not re.search(r'(src|href)="(https?:)?//', page) and "<script src" not in page
    assert "function zoomAt" in page  # the script is inlined, not fetched
    data = json.loads(re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', page, re.S)[1])
    types = proto_op_types(half)
    ops = [n for n in data["nodes"] if n["id"].startswith("op")]
    assert len(ops) == sum(types.values()) and len(data["nodes"]) == len(ops) + 2  # one input, one output
    assert Counter(n["kind"] for n in ops)["cast"] == types["cast"]
    fused = Counter(n["lines"][0].removeprefix("⚡ ").split(" ")[0] for n in ops if n["fused"])
    assert fused and fused == {t: c for t, c in types.items() if t in FUSED_TYPES or t.startswith("fused_")}
    boxes = [(n["x"], n["y"], n["w"], n["h"]) for n in data["nodes"]]
    for i, a in enumerate(boxes):  # no two nodes overlap
        for b in boxes[i + 1:]:
            assert a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0] or a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1]
    ids = {n["id"] for n in data["nodes"]}
    assert all(e["s"] in ids and e["t"] in ids and e["d"].startswith("M") for e in data["edges"])
    assert {e["var"] for e in data["edges"]} >= {"image"}


def _fake_dot(folder, script: str) -> dict[str, str]:
    folder.mkdir()
    dot = folder / "dot"
    dot.write_text("#!/bin/sh\n" + script)
    dot.chmod(dot.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_svg_goes_through_graphviz(tmp_path):
    """A stand-in ``dot`` that checks its arguments and wraps its stdin shows what halfway hands
    Graphviz and that its output lands in the file; without ``dot`` the error says what to do."""
    env = _fake_dot(tmp_path / "bin", '[ "$1" = "-Tsvg" ] || exit 9\necho "<svg>"; cat; echo "</svg>"\n')
    assert halfway("graph", RESNET_TINY, "-o", tmp_path / "g.svg", env=env).returncode == 0
    svg = (tmp_path / "g.svg").read_text()
    assert svg.startswith("<svg>") and 'digraph "resnet_tiny.pdmodel"' in svg
    failing = _fake_dot(tmp_path / "bad", 'echo "syntax error in line 1" >&2; exit 1\n')
    one_line_error(halfway("graph", RESNET_TINY, "-o", tmp_path / "x.svg", env=failing), "syntax error")
    no_dot = {"PATH": str(tmp_path / "empty")}
    one_line_error(halfway("graph", RESNET_TINY, "-o", tmp_path / "y.svg", env=no_dot), "graphviz", ".dot", ".html")
    assert not (tmp_path / "x.svg").exists() and not (tmp_path / "y.svg").exists()


def test_unknown_formats_are_refused(tmp_path):
    done = halfway("graph", RESNET_TINY, "-o", tmp_path / "g.png")
    one_line_error(done, ".dot, .svg or .html")
    assert done.returncode == 2 and list(tmp_path.iterdir()) == []
