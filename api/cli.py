"""The ``halfway`` command line."""

from __future__ import annotations

import argparse
import sys

from halfway.ir.errors import HalfwayError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="halfway", description="A graph transpiler for inference programs.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="build a small CNN, verify, save, reload and print it")
    demo.add_argument("--out", help="folder to keep the saved model in (default: a temporary one)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the parameter values")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            from halfway.demo import run_demo

            return run_demo(args.out, args.seed)
    except HalfwayError as e:
        if args.debug:
            raise
        print(f"halfway: error: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
