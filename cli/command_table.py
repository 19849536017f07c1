"""The subcommands as ``halfway --help`` lists them: each one's name and summary, and the module
that defines it, imported only when that command runs (or explains itself), so that the help and
each command load what they need and no more. A command's name and summary are written here
only; its module holds the rest (``halfway.cli.commands.base.Command``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .commands.base import Command

__all__ = ["Listed", "COMMANDS", "listed"]


class Listed(NamedTuple):
    """A subcommand before it is imported: its ``Command`` is ``attribute`` of
    ``halfway.cli.commands.<module>``, and ``summary`` is its line in ``halfway --help``."""

    name: str
    summary: str
    module: str
    attribute: str = "COMMAND"

    def load(self) -> Command:
        command: Command = getattr(importlib.import_module(f".commands.{self.module}", __package__), self.attribute)
        return command


COMMANDS: tuple[Listed, ...] = (
    Listed("demo", "the main job: import, fuse, transpile to float16, run and compare, in one table", "demo"),
    Listed("inspect", "summarize a model: ops by type and dtype, parameters, inputs and outputs", "inspect"),
    Listed("transpile", "run passes (and the float16 transpile) and save the result", "transpile"),
    Listed("run", "run a model once on given or random inputs", "run"),
    Listed("batch", "run a model over every row of a dataset, here or on Ray", "batch"),
    Listed("generate", "generate text with a decoder LLM from a transformers checkpoint folder", "generate"),
    Listed("bench", "time a model on each place, side by side with ONNX Runtime", "bench"),
    Listed("diff", "run two models on the same inputs and compare their outputs", "diff"),
    Listed("warmup", "compile the CPU loops (numba) ahead of the first run", "warmup"),
    Listed("graph", "draw the program: float16 ops and casts coloured, fused ops marked", "graph"),
    Listed("devices", "list OpenCL platforms and devices with their float16 mode", "devices"),
    Listed("passes", "list the registered passes (built-in and from plugins)", "registry", "PASSES"),
    Listed("ops", "list the registered ops and their kernels (built-in and from plugins)", "registry", "OPS"),
)
"""The subcommands, in the order ``halfway --help`` lists them."""


def listed(name: str) -> Listed | None:
    return next((entry for entry in COMMANDS if entry.name == name), None)
