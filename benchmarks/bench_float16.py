"""float16 conversion side by side with onnxconverter-common on the ONNX light model zoo.

For each model (the zoo's graphs with seeded random weights): the time to convert, the casts
inserted, the parameter bytes after conversion, and the float16 run against the float32 run of
the same system on the same input — max |error|, whether outputs are finite, top-1 agreement.
halfway converts with ``float16_transpile`` (keep_io_types=True) and runs on its numpy backend,
once with its defaults and once calibrated on another input (seed 2; its time includes the
float32 calibration run); onnxconverter-common with ``convert_float_to_float16(keep_io_types=True)``
and runs on ONNX Runtime. Loading the model is timed for neither. ``fp32 ops``: ops halfway kept
float32. With random weights some zoo models (ShuffleNet) compute float32 values beyond float16's
range; only a calibrated conversion stays finite there.

    .venv/bin/python benchmarks/bench_float16.py [--models vgg19,bvlc_alexnet] [--repeats 3] [--json OUT]

``--suite modern`` compares instead on today's architectures (``tests/support/modern.py``'s fixtures,
every saved case): halfway's float16 (plain; calibrated on the cases; ``tolerance=1e-3`` on them)
against onnxconverter-common's ``convert_float_to_float16(keep_io_types=True)`` and
onnxruntime.transformers' ``convert_float_to_float16(keep_io_types=True)`` with its default op
block list (both run on ONNX Runtime CPU, against ONNX Runtime's float32 run; halfway against its
own float32 run), and onnxconverter-common's ``auto_convert_mixed_precision`` (the same
tolerance, checked by the same error, searching on the first case) against halfway's tolerance
search. ``error``: max |float16 - float32| over max |float32|, the worst output and case;
``fp32 ops``: ops left computing float32 (halfway's report; for ONNX, the nodes other than Cast
writing a float32 tensor after shape inference); ``casts``: Cast nodes / ops added.

    .venv/bin/python benchmarks/bench_float16.py --suite modern [--models bert_eager_torchscript,...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnxconverter_common.float16 import convert_float_to_float16

import halfway  # before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import Results, add_json_option  # noqa: E402
from halfway.executor import Executor  # noqa: E402
from tests.support.modern import FIXTURE_DIR, expected_failure, fixtures  # noqa: E402
from tests.support.modern import cases as modern_cases
from tests.support.onnx_zoo import LIGHT_MODELS, dummy_inputs, light_model, ort_session, with_random_weights  # noqa: E402

MODERN_MODELS = [e["name"] for e in fixtures() if expected_failure(e["name"]) is None]


def seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compare(ref: np.ndarray, got: np.ndarray) -> tuple[float, bool, float]:
    """(max |error| where both are finite, all finite, top-1 agreement over the batch)."""
    got = got.astype(np.float32)
    finite = bool(np.all(np.isfinite(got)))
    both = np.isfinite(got) & np.isfinite(ref)
    error = float(np.abs(got - ref)[both].max()) if both.any() else float("nan")
    flat_ref, flat_got = ref.reshape(ref.shape[0], -1), got.reshape(got.shape[0], -1)
    top1 = float(np.mean(flat_ref.argmax(-1) == flat_got.argmax(-1))) if finite else 0.0
    return error, finite, top1


def standalone_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its initializers no longer listed as graph inputs (IR version 4 and up
    allows it): otherwise the converter's float16 initializers clash with float32 input types."""
    inits = {t.name for t in model.graph.initializer}
    kept = [v for v in model.graph.input if v.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.ir_version = max(model.ir_version, 4)
    return model


def onnx_side(model: onnx.ModelProto, feed: dict[str, np.ndarray], repeats: int) -> dict[str, object]:
    converted = convert_float_to_float16(model, keep_io_types=True)
    took = seconds(lambda: convert_float_to_float16(model, keep_io_types=True), repeats)
    casts = sum(n.op_type == "Cast" for n in converted.graph.node) - sum(n.op_type == "Cast" for n in model.graph.node)
    params = sum(onnx.numpy_helper.to_array(t).nbytes for t in converted.graph.initializer)
    ref = ort_session(model).run(None, feed)[0]
    got = ort_session(converted).run(None, feed)[0]
    return {"seconds": took, "casts": casts, "param_bytes": params, **_scores(ref, got)}


def halfway_side(model: onnx.ModelProto, feed: dict[str, np.ndarray], repeats: int,
                 calibration: dict[str, np.ndarray] | None) -> dict[str, object]:
    program, feeds, fetches, loaded = halfway.load(model)
    weights = {n: loaded[n] for n in loaded}
    scope = halfway.Scope(weights)
    half, report = halfway.float16_transpile(program, scope, calibration_feeds=calibration)
    # each timed run starts from the float32 weights only, so it converts every parameter again
    took = seconds(lambda: halfway.float16_transpile(program, halfway.Scope(weights), calibration_feeds=calibration),
                   repeats)
    ref = Executor().run(program, feed, fetches[:1], scope)[0]
    got = Executor().run(half, feed, fetches[:1], scope)[0]
    return {"seconds": took, "casts": len(report.casts), "param_bytes": report.param_bytes_after,
            "float32_ops": len(report.float32_ops), **_scores(ref, got)}


def _scores(ref: np.ndarray, got: np.ndarray) -> dict[str, object]:
    error, finite, top1 = compare(ref, got)
    return {"max_error": error, "finite": finite, "top1": top1}


MODERN_TOLERANCE = 1e-3


def relative(ref: np.ndarray, got: np.ndarray) -> float:
    """max |got - ref| / max |ref|; inf where got is not finite."""
    got64 = np.asarray(got, np.float64)
    if not np.all(np.isfinite(got64)):
        return float("inf")
    return float(np.abs(got64 - ref).max() / max(float(np.abs(ref).max()), 1e-30))


def float32_nodes(model: onnx.ModelProto) -> int:
    """Nodes other than Cast that write a float32 tensor (after ONNX shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in [*inferred.graph.value_info, *inferred.graph.output]}
    return sum(n.op_type != "Cast" and any(types.get(o) == onnx.TensorProto.FLOAT for o in n.output)
               for n in inferred.graph.node)


def onnx_row(model: onnx.ModelProto, convert: Callable[[], onnx.ModelProto],
             cases: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]) -> dict[str, object]:
    """The converter's row; {"failed": why} where converting or running the result fails."""
    start = time.perf_counter()
    try:
        converted = convert()
        took = time.perf_counter() - start
        reference, session = ort_session(model), ort_session(converted)
        names = [o.name for o in model.graph.output]
        errors = [relative(ref, got) for feed, _ in cases
                  for ref, got in zip(reference.run(names, feed), session.run(names, feed))]
    except Exception as e:  # a peer's failure is a result of the comparison
        return {"failed": " ".join(f"{type(e).__name__}: {e}".split())[:90]}
    casts = sum(n.op_type == "Cast" for n in converted.graph.node) - sum(n.op_type == "Cast" for n in model.graph.node)
    return {"seconds": took, "error": max(errors), "finite": all(np.isfinite(errors)), "casts": casts,
            "float32_ops": float32_nodes(converted)}


def halfway_row(name: str, cases: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]],
                **options: object) -> dict[str, object]:
    program, _, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"))
    start = time.perf_counter()
    half, report = halfway.float16_transpile(program, scope, fetch_names=fetches, **options)
    took = time.perf_counter() - start
    errors = [relative(ref, got) for feed, _ in cases
              for ref, got in zip(Executor().run(program, feed, fetches, scope), Executor().run(half, feed, fetches, scope))]
    return {"seconds": took, "error": max(errors), "finite": all(np.isfinite(errors)), "casts": len(report.casts),
            "float32_ops": len(report.float32_ops), "ops": len(report.ops)}


def modern_rows(name: str) -> list[tuple[str, dict[str, object]]]:
    from onnxconverter_common.auto_mixed_precision import auto_convert_mixed_precision
    from onnxruntime.transformers.float16 import convert_float_to_float16 as ort_convert

    model = onnx.load(str(FIXTURE_DIR / f"{name}.onnx"))
    cases = modern_cases(name)
    feeds = [feed for feed, _ in cases]

    def within(ref: list[np.ndarray], got: list[np.ndarray]) -> bool:
        return all(relative(r, g) <= MODERN_TOLERANCE for r, g in zip(ref, got))

    def auto() -> onnx.ModelProto:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints every attempt
            return auto_convert_mixed_precision(onnx.load(str(FIXTURE_DIR / f"{name}.onnx")), cases[0][0],
                                                validate_fn=within, keep_io_types=True)

    return [("occ convert_float_to_float16", onnx_row(model, lambda: convert_float_to_float16(model, keep_io_types=True),
                                                      cases)),
            ("ort.transformers float16", onnx_row(model, lambda: ort_convert(model, keep_io_types=True), cases)),
            ("halfway", halfway_row(name, cases)),
            ("halfway, calibrated", halfway_row(name, cases, calibration_feeds=feeds)),
            (f"halfway, tolerance {MODERN_TOLERANCE:g}",
             halfway_row(name, cases, calibration_feeds=feeds, tolerance=MODERN_TOLERANCE)),
            (f"occ auto_mixed_precision {MODERN_TOLERANCE:g}", onnx_row(model, auto, cases))]


def modern(models: list[str], results: Results) -> None:
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)  # the peers' own sessions warn about their casts
    header = (f"{'model':<34} {'system':<32} {'convert s':>10} {'error':>9} {'finite':>6} {'casts':>6} "
              f"{'fp32 ops':>8}")
    print(header)
    print("-" * len(header))
    for name in models:
        for system, row in modern_rows(name):
            if "failed" in row:
                print(f"{name:<34} {system:<32} failed: {row['failed']}")
                results.add("modern", model=name, system=system, failed=row["failed"])
                continue
            print(f"{name:<34} {system:<32} {row['seconds']:>10.3f} {row['error']:>9.2e} {str(row['finite']):>6} "
                  f"{row['casts']:>6} {row['float32_ops']:>8}")
            results.add("modern", model=name, system=system, convert_s=row["seconds"], error=row["error"],
                        finite=row["finite"], casts=row["casts"], float32_ops=row["float32_ops"])
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("zoo", "modern"), default="zoo")
    parser.add_argument("--models", default=None, help="comma-separated (default: every model of the suite)")
    parser.add_argument("--repeats", type=int, default=3)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_float16", args.json)
    if args.suite == "modern":
        modern(args.models.split(",") if args.models else MODERN_MODELS, results)
        results.write()
        return
    header = (f"{'model':<14} {'system':<22} {'convert s':>10} {'speedup':>8} {'casts':>6} {'fp32 ops':>8} "
              f"{'param MiB':>10} "
              f"{'max error':>10} {'finite':>6} {'top-1':>6}")
    print(header)
    print("-" * len(header))
    for name in (args.models or ",".join(LIGHT_MODELS)).split(","):
        model = standalone_weights(with_random_weights(light_model(name), seed=0))
        feed = dummy_inputs(model, seed=1)
        theirs = onnx_side(model, feed, args.repeats)
        ours = halfway_side(model, feed, args.repeats, None)
        calibrated = halfway_side(model, feed, args.repeats, dummy_inputs(model, seed=2))
        for system, row in (("onnxconverter-common", theirs), ("halfway", ours), ("halfway, calibrated", calibrated)):
            speedup = theirs["seconds"] / row["seconds"]
            kept = row.get("float32_ops", "-")
            print(f"{name:<14} {system:<22} {row['seconds']:>10.4f} {speedup:>7.1f}x {row['casts']:>6} "
                  f"{kept:>8} {row['param_bytes'] / 2 ** 20:>10.2f} {row['max_error']:>10.3g} "
                  f"{str(row['finite']):>6} {row['top1']:>6.2f}")
            results.add("zoo", model=name, system=system, convert_s=row["seconds"], speedup=speedup,
                        casts=row["casts"], float32_ops=row.get("float32_ops"), param_mib=row["param_bytes"] / 2 ** 20,
                        max_error=row["max_error"], finite=row["finite"], top1=row["top1"])
        sys.stdout.flush()
    results.write()


if __name__ == "__main__":
    main()
