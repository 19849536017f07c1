"""The ``halfway`` command line: one parser, plugins loaded, one subcommand run, and every
error reported as one line (the traceback only with --debug)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from ..api.version import version
from .command_table import COMMANDS, Listed, listed
from .exits import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE
from .interrupts import raise_from_now_on

__all__ = ["main", "build_parser", "one_line", "COMMANDS"]

EPILOG = """\
MODEL is an .onnx file, a .pdmodel file or its path prefix, or a folder holding a Paddle/halfway
inference model. `halfway COMMAND --help` explains a command.

exit codes: 0 done; 1 an error (a bad model, input or option value: one line on stderr);
2 a malformed command line; 3 `diff` found outputs differing beyond its tolerance;
130 interrupted (Ctrl-C, also while starting); 141 the reader of the output went away.

plugins: modules registering passes, ops and kernels load from the `halfway.plugins` entry-point
group of installed packages, and from --plugin MODULE_OR_FILE.py (repeatable).
"""


def _common_options() -> argparse.ArgumentParser:
    """Options accepted both before and after the subcommand name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    common.add_argument("--plugin", action="append", default=argparse.SUPPRESS, metavar="MODULE",
                        help="load a plugin: a module name or a .py file (repeatable)")
    return common


def one_line(message: str, keep: int = 2) -> str:
    """An error message as one line: its first ``keep`` unindented lines (indented lines are
    context, such as the ops around a verifier finding), and how many more there were."""
    lines = [line.strip() for line in message.splitlines() if line.strip() and not line[0].isspace()]
    text = "; ".join(lines[:keep])
    if len(lines) > keep:
        text += f"; and {len(lines) - keep} more (--debug shows everything)"
    return text


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the command line ``argv`` (default: this process's): every subcommand listed
    with its summary, and the one ``argv`` names configured (its module imported); None: all."""
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="halfway", parents=[common], epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A graph transpiler for inference programs: import a model, fuse ops, transpile it "
                    "to float16, run it on numpy or OpenCL.")
    parser.add_argument("--version", action="version", version=f"halfway {version()}")
    commands = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    chosen = _chosen(common, sys.argv[1:] if argv is None else argv)
    for entry in COMMANDS:
        sub = commands.add_parser(entry.name, parents=[common], help=entry.summary,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        if entry is chosen:
            command = entry.load()
            sub.description = command.description
            command.configure(sub)
            sub.set_defaults(run=command.run)
    return parser


def _chosen(common: argparse.ArgumentParser, argv: Sequence[str]) -> Listed | None:
    """The subcommand ``argv`` names: its first word after the common options."""
    _, rest = common.parse_known_args(argv)
    words = [word for word in rest if not word.startswith("-")]
    return listed(words[0]) if words else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    from ..api.errors import SpecError  # after the parse: --help loads neither the IR nor a command's library
    from ..ir.errors import HalfwayError
    from .commands.base import UsageError
    from .plugins import load_plugins
    from .report.console import Output

    debug = getattr(args, "debug", False)
    if not debug:  # overflow in a float16 run shows in the results; numpy's warnings only add noise
        warnings.simplefilter("ignore", RuntimeWarning)
    output = Output(json_mode=getattr(args, "json", False))
    try:
        args.loaded_plugins = load_plugins(getattr(args, "plugin", None) or ())
        raise_from_now_on()
        code = args.run(args, output)
        output.finish()
        return code
    except BrokenPipeError:  # the reader went away (`halfway inspect --text | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except (UsageError, SpecError) as e:
        output.error(str(e))
        return EXIT_USAGE
    except (HalfwayError, OSError) as e:
        if debug:
            raise
        output.error(one_line(str(e)))
        return EXIT_ERROR
    except KeyboardInterrupt:
        output.error("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
