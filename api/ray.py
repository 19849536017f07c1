"""Batch inference on Ray Data (the ``ray`` extra): ``predict(dataset, model)`` maps a pool of
actors, each holding the model prepared once (``Predictor``), over a ``ray.data.Dataset``, on
CPUs or GPUs, one node or many. Actors that die are replaced and their batches run again, so each
row comes out once.

    import ray, halfway.api.ray
    ds = ray.data.read_parquet("tokens.parquet")
    out = halfway.api.ray.predict(ds, "model.onnx", fp16=True, concurrency=4)
    out.write_parquet("out/")
"""

from __future__ import annotations

import re
from typing import Any

from ..ir import errors
from ..ir.errors import HalfwayError
from .batch.predictor import Calibration, Predictor
from .batch.tables import MissingExtraError

try:
    import ray
    import ray.data
except ImportError:
    raise MissingExtraError("halfway.api.ray needs Ray Data: pip install 'halfway[ray]'") from None

__all__ = ["predict", "Predictor", "actor_pool", "cause"]

Concurrency = int | tuple[int, int] | None


def predict(dataset: ray.data.Dataset, model: str, *, passes: str | None = None, fp16: bool = False,
            calibration: Calibration = None, place: str = "cpu", batch_size: int = 32,
            concurrency: Concurrency = None, num_gpus: float = 0) -> ray.data.Dataset:
    """``dataset`` with the outputs of ``model`` as new columns (lazy, like every Dataset).

    Each actor builds a ``Predictor(model, passes=..., fp16=..., calibration=..., place=...)``
    once and runs batches of ``batch_size`` rows: the model's inputs are columns, its outputs
    become columns, the input columns are dropped and the others pass through. ``concurrency``
    is the number of actors (an int), or (min, max) for a pool that grows with the work; None:
    one to as many as the cluster has CPUs (GPUs with ``num_gpus``). GPU actors:
    ``place="opencl"`` with ``num_gpus=1``.
    """
    options = {"passes": passes, "fp16": fp16, "calibration": calibration, "place": place}
    return dataset.map_batches(Predictor, fn_constructor_args=(model,), fn_constructor_kwargs=options,
                               batch_size=batch_size, batch_format="numpy",
                               compute=actor_pool(concurrency, num_gpus), num_gpus=num_gpus or None)


def actor_pool(concurrency: Concurrency, num_gpus: float = 0) -> Any:
    """The actor pool strategy for ``concurrency`` (see ``predict``)."""
    if isinstance(concurrency, int):
        return ray.data.ActorPoolStrategy(size=concurrency)
    if concurrency is None:
        resources = ray.cluster_resources()
        slots = resources.get("GPU", 0) / num_gpus if num_gpus else resources.get("CPU", 1)
        concurrency = (1, max(1, int(slots)))
    return ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])


def cause(error: BaseException) -> HalfwayError | None:
    """The halfway error an actor raised, rebuilt from a Ray error. Ray Data hands a failed
    batch's exception back as the text of its traceback only, so the last ``halfway...Error:``
    line is the message; None where there is none."""
    found = [line for line in str(error).splitlines() if re.match(r"halfway\.[\w.]*Error: ", line)]
    if not found:
        return None
    name, _, message = found[-1].partition(": ")
    kind = getattr(errors, name.rpartition(".")[2], HalfwayError)
    return kind(message) if isinstance(kind, type) and issubclass(kind, HalfwayError) else HalfwayError(message)
