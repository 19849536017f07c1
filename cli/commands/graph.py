"""``halfway graph MODEL -o OUT``: the program as a picture (.dot, .svg or .html)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

from ...api.files import write_file
from ...api.models import load_model
from ...ir.errors import HalfwayError
from ..report.console import Output
from ..report.graph import program_graph, to_dot
from ..report.graph_html import to_html
from .base import Command, add_model
from .outputs import check_target

__all__ = ["COMMAND", "render_svg"]

FORMATS = (".dot", ".svg", ".html")


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="OUT.dot (Graphviz text), OUT.svg (needs Graphviz's `dot`), or OUT.html (a "
                             "self-contained page to pan, zoom and search, no Graphviz needed)")


def render_svg(dot: str) -> bytes:
    """SVG from dot text through Graphviz's ``dot`` binary."""
    binary = shutil.which("dot")
    if binary is None:
        raise HalfwayError("writing .svg needs Graphviz's `dot` program, which is not installed: install graphviz "
                           "(e.g. apt install graphviz), or write .dot or .html instead")
    done = subprocess.run([binary, "-Tsvg"], input=dot.encode(), capture_output=True, check=False)
    if done.returncode != 0:
        raise HalfwayError(f"dot -Tsvg failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _run(args: argparse.Namespace, output: Output) -> int:
    check_target(args.output, FORMATS)
    suffix = Path(args.output).suffix.lower()
    model = load_model(args.model)
    graph = program_graph(model.program)
    title = Path(model.path).name
    dot = to_dot(graph, title)
    if suffix == ".dot":
        data = dot.encode()
    elif suffix == ".svg":
        data = render_svg(dot)
    else:
        data = to_html(graph, title).encode()
    write_file(args.output, data)
    ops = sum(1 for n in graph.nodes if n.kind not in ("input", "output"))
    output.print(f"wrote {args.output}: {ops} ops, {len(graph.edges)} edges")
    return 0


COMMAND = Command(
    "Draw the program of MODEL: inputs, ops and outputs top to bottom, edges labelled with the\n"
    "dtype and shape of the tensor they carry; float16 ops green, float32 ops blue, casts orange,\n"
    "fused ops with a bold double border.\n\n"
    "  -o OUT.dot   Graphviz text (always available)\n"
    "  -o OUT.svg   rendered by Graphviz's `dot` program, which must be installed\n"
    "  -o OUT.html  one self-contained page with its own layered layout (works offline, no\n"
    "               Graphviz): pan, zoom, search ops (Paddle or ONNX names) and tensors, click an\n"
    "               op for its attributes and the dtypes and shapes of its tensors",
    _configure, _run)
