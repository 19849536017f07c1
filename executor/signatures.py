"""Programs whose feeds have unknown dims (a symbolic batch or sequence length): prepared once per
distinct set of fed shapes, on the first run with those shapes, and kept for the next ones."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.errors import FeedError
from .device_tensor import DeviceTensor
from .prepared import PreparedProgram, PrepareReport, check_feeds, check_names

__all__ = ["Signature", "PreparedBySignature"]

Signature = tuple[tuple[int, ...], ...]
"""The shapes of the feeds with unknown dims, in feed order."""


class PreparedBySignature:
    """Runs one program for fixed feed and fetch names at any shapes of the feeds whose dims the
    program leaves unknown. The first run at a new signature prepares the program for it (shape
    inference, shape arithmetic computed on the host, kernels, memory plan); later runs at that
    signature reuse it. At most ``capacity`` signatures are kept, the least recently used
    dropped first. Runs may come from several threads.
    """

    def __init__(self, prepare: Callable[[Mapping[str, Sequence[int]]], PreparedProgram], feed_names: Sequence[str],
                 fetch_names: Sequence[str], dynamic: Sequence[str], capacity: int = 16) -> None:
        self._prepare = prepare
        self.feed_names = list(feed_names)
        self.fetch_names = list(fetch_names)
        self._dynamic = list(dynamic)
        self._capacity = capacity
        self._prepared: OrderedDict[Signature, PreparedProgram] = OrderedDict()
        self._lock = threading.Lock()
        self._last: PreparedProgram | None = None

    @property
    def signatures(self) -> list[Signature]:
        """The signatures prepared and kept, least recently used first."""
        with self._lock:
            return list(self._prepared)

    @property
    def report(self) -> PrepareReport:
        """The report of the signature run last (a FeedError before the first run)."""
        if self._last is None:
            raise FeedError(f"the program has not been run yet: feeds {self._dynamic} have unknown dims, so it is "
                            f"prepared when their shapes are known")
        return self._last.report

    def run(self, feed: Mapping[str, Any], *, on_device: bool = False) -> list[Any]:
        """``PreparedProgram.run`` at the feed's signature."""
        return self.for_feed(feed).run(feed, on_device=on_device)

    def to_device(self, feed: Mapping[str, np.ndarray]) -> dict[str, DeviceTensor]:
        """``PreparedProgram.to_device`` of the program for the feed's signature (of the feeds with
        unknown dims given; the tensors feed the program at any signature)."""
        return self.for_feed(feed).to_device(feed)

    def profile(self, feed: Mapping[str, Any]) -> list[tuple[str, float]]:
        """``PreparedProgram.profile`` at the feed's signature."""
        return self.for_feed(feed).profile(feed)

    def for_feed(self, feed: Mapping[str, Any]) -> PreparedProgram:
        """The program prepared for the shapes of ``feed`` (prepared now if they are new)."""
        check_feeds(feed, devices=True)
        check_names(feed, self.feed_names, self._dynamic)
        signature = tuple(tuple(feed[name].shape) for name in self._dynamic)
        with self._lock:
            prepared = self._prepared.get(signature)
            if prepared is None:
                prepared = self._prepare(dict(zip(self._dynamic, signature)))
                self._prepared[signature] = prepared
                if len(self._prepared) > self._capacity:
                    self._prepared.popitem(last=False)
            self._prepared.move_to_end(signature)
            self._last = prepared
        return prepared
