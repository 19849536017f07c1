"""``halfway transpile MODEL -o OUT``: run passes (and the float16 transpile), save the result."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import RenderableType

from ...api.feeds import parse_inputs
from ...api.model_facts import op_label
from ...api.models import load_model, save_model
from ...api.pipelines import NO_PASSES, float16_pass, ops_fused, run_passes
from ...passes import Pass, PipelineResult
from ...passes.pipeline import DEFAULT_PIPELINE
from ..report.console import Output
from ..report.tables import table
from .base import Command, UsageError, add_json, add_model, tolerance
from .outputs import check_target

__all__ = ["COMMAND", "pass_rows", "pass_table"]


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="where to save: an .onnx file (an ONNX model), a path prefix (OUT.pdmodel + "
                             "OUT.pdiparams), a .pdmodel file, or an existing folder")
    parser.add_argument("--passes", default=None, metavar="LIST",
                        help=f"comma-separated pass names (`halfway passes` lists them), or '{NO_PASSES}'; "
                             f"default: {DEFAULT_PIPELINE}")
    parser.add_argument("--fp16", action="store_true", help="transpile to float16 after the passes")
    parser.add_argument("--keep-io-types", action=argparse.BooleanOptionalAction, default=True,
                        help="with --fp16: keep float32 inputs and outputs, casting at the edges (default: keep)")
    parser.add_argument("--black-list", default="", metavar="OPS",
                        help="with --fp16: comma-separated op types kept float32, besides the default list")
    parser.add_argument("--calibrate", metavar="INPUTS.npz",
                        help="with --fp16: inputs (arrays named after the model's inputs) to run the float32 "
                             "program on; ops whose values would overflow float16 stay float32")
    parser.add_argument("--tolerance", type=tolerance, metavar="REL",
                        help="with --fp16 --calibrate: keep float32 the fewest ops for every output to stay "
                             "within this error of float32 on the calibration inputs (max abs error over max "
                             "abs float32 value); a tolerance that cannot be met is an error")
    parser.add_argument("--onnx-opset", type=int, default=None, metavar="N",
                        help="with an .onnx OUT: the opset to write (default: 17; Gelu is one op from 20, "
                             "Attention and RMSNormalization from 23)")
    parser.add_argument("--onnx-contrib", action="store_true",
                        help="with an .onnx OUT: write fused ops as ONNX Runtime's contrib ops (com.microsoft "
                             "FusedConv, Gelu, FastGelu, MultiHeadAttention) where they compute them")
    parser.add_argument("--onnx-manifest", action="store_true",
                        help="with an .onnx OUT: also write OUT.sha256, its digest in `sha256sum -c`'s form")
    parser.add_argument("--dump-dir", metavar="DIR", help="write the program text before and after every pass")
    add_json(parser)


def pass_rows(result: PipelineResult) -> list[dict[str, Any]]:
    return [{"pass": r.name, "modified": r.modified, "stats": dict(r.stats), "op_delta": r.op_delta,
             "seconds": r.seconds} for r in result.records]


def pass_table(result: PipelineResult) -> RenderableType:
    rows = [(r["pass"], "yes" if r["modified"] else "-",
             ", ".join(f"{k} {v}" for k, v in r["stats"].items() if v) or "-",
             ", ".join(f"{k} {v:+d}" for k, v in r["op_delta"].items()) or "-",
             f"{r['seconds'] * 1e3:.1f} ms" if r["seconds"] is not None else "-") for r in pass_rows(result)]
    return table("passes", ["pass", "changed", "stats", "ops", "time"], rows, numeric=["time"])


def _run(args: argparse.Namespace, output: Output) -> int:
    check_target(args.output, (".onnx", ".pdmodel"), prefix=True, folder=True)
    if args.tolerance is not None and not (args.fp16 and args.calibrate and args.tolerance > 0):
        raise UsageError(f"--tolerance {args.tolerance:g} needs --fp16 and --calibrate INPUTS.npz (the inputs the "
                         f"error is measured on), and a tolerance above 0")
    model = load_model(args.model)
    calibration = None
    if args.calibrate:
        calibration = parse_inputs([args.calibrate], model.program, model.feed_names)
    after: list[Pass] = []
    if args.fp16:
        black = tuple(op for op in args.black_list.split(",") if op)
        after.append(float16_pass(keep_io_types=args.keep_io_types, black_list=black, calibration=calibration,
                                  tolerance=args.tolerance))
    with output.task("running passes" + (" and the float16 transpile" if args.fp16 else "")):
        model, result = run_passes(model, args.passes, args.dump_dir, after)
    report = result.records[-1].report if args.fp16 else None
    files = save_model(args.output, model, onnx_opset=args.onnx_opset, onnx_contrib=args.onnx_contrib,
                       onnx_manifest=args.onnx_manifest)
    if args.json:
        output.json({"model": args.model, "output": [str(f) for f in files], "passes": pass_rows(result),
                     "ops_fused": ops_fused(result, len(result.records) - len(after)),
                     "float16": dict(report.summary()) if report is not None else None})
        return 0
    output.print(pass_table(result))
    if report is not None:
        output.print(report.rich(op_label))
    output.print(f"wrote {', '.join(str(f) for f in files)}")
    return 0


COMMAND = Command(
    "Load MODEL, run a pipeline of passes (default: the fusion pipeline), optionally transpile\n"
    "to float16, and save the result at OUT: an ONNX model for an .onnx OUT, else a halfway\n"
    "(Paddle-format) inference model — all files or none.\n"
    "Prints what each pass changed and the float16 report.\n\n"
    "examples:\n"
    "  halfway transpile model.onnx -o out/model\n"
    "  halfway transpile model.onnx -o out/model_fp16 --fp16 --black-list softmax\n"
    "  halfway transpile model.onnx -o out/model_fp16 --fp16 --calibrate inputs.npz --tolerance 1e-3\n"
    "  halfway transpile model.onnx -o out/fused.onnx --onnx-contrib\n"
    "  halfway transpile model.onnx -o out/model --plugin my_passes.py --passes my_pass,fuse_conv_bn",
    _configure, _run)
