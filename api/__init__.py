"""halfway: a graph transpiler for inference programs."""

from halfway import openblas as _openblas

_openblas.choose_core()  # before anything loads numpy, and with it OpenBLAS

from halfway.ir import *  # noqa: F401,F403
from halfway.ir import __all__ as _ir_all
from halfway import passes
from halfway.passes import PassManager
from halfway.float16 import float16_transpile
from halfway.frontends.load import load
from halfway.executor import CPUPlace, Executor, OpenCLPlace

__all__ = list(_ir_all) + ["passes", "PassManager", "float16_transpile", "load", "Executor", "CPUPlace", "OpenCLPlace"]
