"""Today's models at realistic sizes: per-model latency of halfway's prepared numpy run against
ONNX Runtime (CPU, as many intra-op threads as numpy's BLAS: OPENBLAS_NUM_THREADS, default 2),
fp32, batch 1, same inputs, in the same run, with the default pass pipeline applied to halfway's
program; the geomean ratio; and where halfway is slower, the time per op type of its prepared run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_modern.py \\
        [--models bert_base,vit_b16] [--repeats 20] [--block 2] [--dir DIR] [--under-load N] [--json OUT]

The models (BERT-base, GPT-2 small, the T5-small encoder, ViT-B/16, ConvNeXt-T, MobileNetV3-Large
and a YOLO-style detector at 640 px) are made by ``scripts/make_bench_models.py`` into ``DIR``
(default ``~/.cache/halfway/bench_models``, or ``$HALFWAY_BENCH_MODELS``) with their inputs.
Timing is ``bench_zoo.py``'s: blocks of runs of each runtime alternating round by round, medians,
the ratio paired per round. Outputs are checked against ONNX Runtime's first (the largest error
over the largest magnitude is printed); a model halfway fails to import or run is listed with
its error and left out of the geomean.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import halfway  # noqa: E402,F401 (before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_zoo import alternate, geomean, paired_ratio, prepare_halfway, print_profiles, profile_by_op_type  # noqa: E402

from benchmarks.competing_load import add_load_option  # noqa: E402
from benchmarks.results import Results, add_json_option  # noqa: E402
from tests.support.onnx_zoo import ort_session  # noqa: E402

MODELS = ["bert_base", "gpt2_small", "t5_small_encoder", "vit_b16", "convnext_tiny", "mobilenetv3_large", "yolo_640"]
DEFAULT_DIR = Path(os.environ.get("HALFWAY_BENCH_MODELS", Path.home() / ".cache" / "halfway" / "bench_models"))
MAKE = "/work/torchvenv/bin/python scripts/make_bench_models.py"
THREADS = int(os.environ["OPENBLAS_NUM_THREADS"])
"""ONNX Runtime's intra-op threads: numpy's BLAS threads (on a busy machine, 1 each gives steadier ratios)."""


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


def bench_model(path: Path, repeats: int, block: int, load: int = 0) -> tuple[float, float, float, dict[str, float] | None]:
    """halfway's and ONNX Runtime's median ms, their paired ratio, and halfway's ms per op type
    where it is the slower one. Raises AssertionError where the outputs disagree."""
    model = onnx.load(str(path))
    feeds = dict(np.load(path.with_name(f"{path.stem}_inputs.npz")))
    prepared = prepare_halfway(model, feeds, passes=True)
    session = ort_session(model, THREADS)
    ours, theirs = prepared.run(feeds)[0], session.run(None, feeds)[0]
    error = relative_error(ours, theirs)
    print(f"{path.stem}: max rel error against onnxruntime {error:.1e}", flush=True)
    assert error < 1e-3, f"{path.stem}: halfway's output differs from ONNX Runtime's (relative error {error:.1e})"
    ours, theirs = alternate([lambda: prepared.run(feeds), lambda: session.run(None, feeds)],
                             -(-repeats // block), block, load)
    t_ours, t_ort = (statistics.median(t for b in side for t in b) * 1e3 for side in (ours, theirs))
    by_type = profile_by_op_type(prepared, feeds, max(3, repeats // 4)) if t_ours > t_ort else None
    return t_ours, t_ort, paired_ratio(ours, theirs), by_type


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--repeats", type=int, default=20, help="timed runs of each runtime")
    parser.add_argument("--block", type=int, default=2, help="runs of one runtime before the other's")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where make_bench_models.py wrote the models")
    add_load_option(parser)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_modern", args.json)
    paths = [args.dir / f"{name}.onnx" for name in args.models.split(",")]
    missing = [p.stem for p in paths if not p.exists()]
    if missing:
        print(f"no model files for {', '.join(missing)} in {args.dir}: make them with\n    {MAKE} --out {args.dir}"
              + (f" --only {','.join(missing)}" if len(missing) < len(paths) else ""), file=sys.stderr)
        if len(missing) == len(paths):
            sys.exit(1)
    print(f"numpy BLAS threads: {os.environ['OPENBLAS_NUM_THREADS']}, ONNX Runtime threads: {THREADS}, "
          f"competing busy processes: {args.under_load}")
    rows, failed, slow = [], {}, {}
    for path in (p for p in paths if p.exists()):
        try:
            t_ours, t_ort, ratio, by_type = bench_model(path, args.repeats, args.block, args.under_load)
        except (halfway.HalfwayError, AssertionError) as e:
            failed[path.stem] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            print(f"{path.stem}: {failed[path.stem]}", flush=True)
            continue
        rows.append((path.stem, t_ours, t_ort, ratio))
        if by_type:
            slow[path.stem] = by_type
    print(f"\n{'model':20} {'halfway ms':>11} {'onnxruntime ms':>15} {'ratio':>7}")
    for name, t_ours, t_ort, ratio in rows:
        print(f"{name:20} {t_ours:11.1f} {t_ort:15.1f} {ratio:7.2f}")
        results.add("latency", model=name, halfway_ms=t_ours, onnxruntime_ms=t_ort, ratio=ratio)
    if rows:
        print(f"geomean ratio (halfway / onnxruntime) over {len(rows)} models: {geomean([r[3] for r in rows]):.2f}")
        results.summary(geomean_ratio=geomean([r[3] for r in rows]), threads=THREADS,
                        competing_processes=args.under_load)
    for name, why in failed.items():
        print(f"{name}: not measured: {why}")
    print_profiles(slow, 6)
    results.write()


if __name__ == "__main__":
    main()
