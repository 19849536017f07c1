"""Check that Paddle 3 accepts halfway's float16 programs saved as .pdmodel.

Run with halfway's interpreter, naming one that has paddlepaddle (3.3.1 was used):

    .venv/bin/python scripts/check_paddle_float16.py --paddle-python /work/paddlevenv/bin/python

1. (halfway) transpiles the legacy ResNet and encoder fixtures of ``tests/fixtures/paddle3/legacy``
   to float16 (``halfway.float16.float16_transpile``, float32 inputs and outputs kept) and saves
   them as ``tests/fixtures/paddle3/float16/<model>.pdmodel`` + ``.pdiparams``;
2. (paddle, ``--check``) gives each to ``paddle.inference.Config`` and ``create_predictor``, runs it
   on the fixture's inputs and writes what happened to ``float16/paddle_check.json``: per model
   the predictor's input and output names, and the run's outcome (its outputs' largest error
   relative to the float32 model's, or Paddle's error message: Paddle 3.3.1's CPU build has no
   float16 kernels for conv2d or elementwise_add).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "paddle3"
OUT_DIR = FIXTURES / "float16"
MODELS = ("resnet", "encoder")


def write_float16_models() -> None:
    import halfway
    from halfway.float16 import float16_transpile
    from halfway.ir.io import save_inference_model

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        program, feeds, fetches, scope = halfway.load(FIXTURES / "legacy" / f"{name}.pdmodel")
        half, _ = float16_transpile(program, scope)
        save_inference_model(OUT_DIR / name, feeds, fetches, half, scope)


def check_with_paddle() -> None:
    import paddle

    results = {}
    for name in MODELS:
        config = paddle.inference.Config(str(OUT_DIR / f"{name}.pdmodel"), str(OUT_DIR / f"{name}.pdiparams"))
        config.disable_gpu()
        config.disable_glog_info()
        predictor = paddle.inference.create_predictor(config)
        entry: dict[str, object] = {"inputs": predictor.get_input_names(), "outputs": predictor.get_output_names()}
        io = np.load(FIXTURES / "legacy" / f"{name}_io.npz")
        for feed in predictor.get_input_names():
            predictor.get_input_handle(feed).copy_from_cpu(io[feed])
        try:
            predictor.run()
        except Exception as e:  # Paddle's missing-kernel errors are what this records
            entry["run"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
        else:
            entry["run"] = {out: float(np.abs(predictor.get_output_handle(out).copy_to_cpu() - io[out]).max()
                                       / np.abs(io[out]).max()) for out in predictor.get_output_names()}
        results[name] = entry
    (OUT_DIR / "paddle_check.json").write_text(json.dumps({"paddle": paddle.__version__, "models": results},
                                                          indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="step 2 only (run by an interpreter with paddle)")
    parser.add_argument("--paddle-python", help="the interpreter with paddlepaddle, for step 2")
    args = parser.parse_args()
    if args.check:
        check_with_paddle()
        return
    write_float16_models()
    subprocess.run([args.paddle_python or sys.executable, __file__, "--check"], check=True)


if __name__ == "__main__":
    main()
