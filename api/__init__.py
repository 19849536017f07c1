"""Library services over the IR, passes, frontends and executor: float16 transpile, layers,
batch inference and Ray; and what they and the command line share: models loaded, passed,
prepared and saved (``models``), feeds (``feeds``, ``tokens``), places (``places``), atomic files
(``files``), timings and accuracy (``measure``)."""
