"""Library services over the IR, passes, frontends and executor: float16 transpile, layers,
batch inference and Ray."""
