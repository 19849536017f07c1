"""Batch inference throughput: rows/s of the demo model (``halfway demo``'s ResNet-18, 128x128)
over N seeded random images, in this process (``halfway.api.batch.Predictor``, batch by batch) and on
a local Ray runtime with 1 and 2 actors (``halfway.api.ray.predict``). Each figure is the wall time
from the model's load to the last row's outputs, so Ray's includes starting its actors (the
runtime itself is started once, before timing). Ray gives each actor one CPU, so its OpenBLAS
runs one thread per actor; in this process OpenBLAS uses every core.

    .venv/bin/python benchmarks/bench_batch.py [--rows 256] [--batch-size 32] [--actors 1,2]
        [--place opencl --gpus 1]   # one OpenCL actor per GPU, on a GPU machine
        [--json OUT]                # the figures as JSON, for the documentation's benchmark pages
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import halfway  # noqa: F401 (before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import Results, add_json_option  # noqa: E402
from halfway.api.batch import Predictor  # noqa: E402
from halfway.cli.demo import demo_model_path  # noqa: E402


def images(rows: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((rows, 3, 128, 128)).astype(np.float32)


def in_process(model: str, data: np.ndarray, batch_size: int, place: str) -> float:
    """Seconds to prepare the model and run every row here."""
    start = time.perf_counter()
    predictor = Predictor(model, place=place)
    for first in range(0, len(data), batch_size):
        predictor({"image": data[first:first + batch_size]})
    return time.perf_counter() - start


def on_ray(model: str, data: np.ndarray, batch_size: int, place: str, actors: int, gpus: float) -> float:
    """Seconds for ``actors`` Ray actors to start, prepare the model and run every row."""
    import ray

    from halfway.api.ray import predict

    dataset = ray.data.from_items([{"id": i, "image": row} for i, row in enumerate(data)])
    dataset = dataset.materialize()  # the rows in the object store before timing
    start = time.perf_counter()
    out = predict(dataset, model, place=place, batch_size=batch_size, concurrency=actors, num_gpus=gpus)
    rows = sum(len(batch["id"]) for batch in out.iter_batches(batch_format="numpy", batch_size=None))
    seconds = time.perf_counter() - start
    assert rows == len(data), (rows, len(data))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--actors", default="1,2", help="comma-separated actor counts for the Ray runs")
    parser.add_argument("--place", default="cpu")
    parser.add_argument("--gpus", type=float, default=0, help="GPUs per Ray actor")
    parser.add_argument("--no-local", action="store_true", help="skip the in-process run")
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_batch", args.json)
    model, data = str(demo_model_path()), images(args.rows)
    print(f"{args.rows} rows of the demo model, batch size {args.batch_size}, place {args.place}")
    if not args.no_local:
        seconds = in_process(model, data, args.batch_size, args.place)
        print(f"in process          {seconds:7.2f} s  {args.rows / seconds:7.1f} rows/s")
        results.add("throughput", runtime="in process", actors=0, rows=args.rows, batch_size=args.batch_size,
                    place=args.place, seconds=seconds, rows_per_s=args.rows / seconds)
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, logging_level="warning")
    ray.data.DataContext.get_current().enable_progress_bars = False
    for actors in (int(a) for a in args.actors.split(",")):
        seconds = on_ray(model, data, args.batch_size, args.place, actors, args.gpus)
        print(f"ray, {actors} actor(s)      {seconds:7.2f} s  {args.rows / seconds:7.1f} rows/s")
        results.add("throughput", runtime="ray", actors=actors, rows=args.rows, batch_size=args.batch_size,
                    place=args.place, seconds=seconds, rows_per_s=args.rows / seconds)
    ray.shutdown()
    results.write()


if __name__ == "__main__":
    main()
