"""Check that Paddle 3 reads the .pdmodel files halfway writes: float16 programs, and Paddle 3
PIR programs imported by halfway.

Run with halfway's interpreter, naming one that has paddlepaddle (3.3.1 was used):

    .venv/bin/python scripts/check_paddle_reads_halfway.py --paddle-python /work/paddlevenv/bin/python

1. (halfway) writes into ``tests/fixtures/paddle3/``:
   ``float16/<model>.pdmodel`` + ``.pdiparams``: the legacy ResNet and encoder fixtures transpiled
   to float16 (``halfway.api.float16.float16_transpile``, float32 inputs and outputs kept);
   ``from_pir/<model>.pdmodel`` + ``.pdiparams``: the PIR ResNet, encoder, detector and ops
   fixtures as halfway imports them;
2. (paddle, ``--check``) gives each to ``paddle.inference.Config`` and ``create_predictor``, runs it
   on the inputs its source fixture was recorded with and writes ``<folder>/paddle_check.json``:
   per model the predictor's input and output names and the run's outcome (per output the largest
   error relative to the source model's recorded outputs, or Paddle's error message: Paddle
   3.3.1's CPU build has no float16 kernels for conv2d or elementwise_add).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "paddle3"
FLOAT16 = ("resnet", "encoder")
FROM_PIR = ("resnet", "encoder", "detector", "ops")
SOURCES = {"float16": (FIXTURES / "legacy", FLOAT16), "from_pir": (FIXTURES / "pir", FROM_PIR)}


def write_models() -> None:
    import halfway
    from halfway.api.float16 import float16_transpile
    from halfway.ir.io import save_inference_model

    for folder in SOURCES:
        (FIXTURES / folder).mkdir(parents=True, exist_ok=True)
    for name in FLOAT16:
        program, feeds, fetches, scope = halfway.load(FIXTURES / "legacy" / f"{name}.pdmodel")
        half, _ = float16_transpile(program, scope)
        save_inference_model(FIXTURES / "float16" / name, feeds, fetches, half, scope)
    for name in FROM_PIR:
        program, feeds, fetches, scope = halfway.load(FIXTURES / "pir" / name)
        save_inference_model(FIXTURES / "from_pir" / name, feeds, fetches, program, scope)


def run_paddle(model: Path, io: dict[str, np.ndarray]) -> dict[str, object]:
    """What paddle.inference makes of ``model``: its names and the run's relative errors (or error)."""
    import paddle

    config = paddle.inference.Config(str(model), str(model.with_suffix(".pdiparams")))
    config.disable_gpu()
    config.disable_glog_info()
    config.disable_mkldnn()  # its interpolation refuses some attrs; the reference ran without it too
    predictor = paddle.inference.create_predictor(config)
    entry: dict[str, object] = {"inputs": predictor.get_input_names(), "outputs": predictor.get_output_names()}
    for feed in predictor.get_input_names():
        predictor.get_input_handle(feed).copy_from_cpu(io[feed])
    try:
        predictor.run()
    except Exception as e:  # Paddle's missing-kernel errors are what this records
        entry["run"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
        return entry
    entry["run"] = {out: float(np.abs(predictor.get_output_handle(out).copy_to_cpu() - io[out]).max()
                               / max(float(np.abs(io[out]).max()), 1e-30)) for out in predictor.get_output_names()}
    return entry


def check_with_paddle() -> None:
    import paddle

    for folder, (source, names) in SOURCES.items():
        models = {name: run_paddle(FIXTURES / folder / f"{name}.pdmodel", dict(np.load(source / f"{name}_io.npz")))
                  for name in names}
        (FIXTURES / folder / "paddle_check.json").write_text(
            json.dumps({"paddle": paddle.__version__, "models": models}, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="step 2 only (run by an interpreter with paddle)")
    parser.add_argument("--paddle-python", help="the interpreter with paddlepaddle, for step 2")
    args = parser.parse_args()
    if args.check:
        check_with_paddle()
        return
    write_models()
    subprocess.run([args.paddle_python or sys.executable, __file__, "--check"], check=True)


if __name__ == "__main__":
    main()
