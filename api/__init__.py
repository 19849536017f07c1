"""Library services over the IR, passes, frontends and executor: float16 transpile, layers,
batch inference and Ray; and what they and the command line share: models loaded and saved
(``models``), passed (``pipelines``), prepared (``prepare``) and described (``model_facts``), feeds
(``feeds``, ``tokens``), places (``places``), atomic files (``files``), timings and accuracy
(``measure``)."""
