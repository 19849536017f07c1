"""The builder API: one function per op (``halfway.layers.conv2d(x, num_filters=8, ...)``).

Functions live in one module per op family, next to the schemas in ``halfway.ir.ops``.
"""

from halfway.ir.builder import data
from halfway.ir.layers.math import *  # noqa: F401,F403
from halfway.ir.layers.nn import *  # noqa: F401,F403
from halfway.ir.layers.tensor import *  # noqa: F401,F403
from halfway.ir.layers import math as _math, nn as _nn, tensor as _tensor

__all__ = ["data", *_math.__all__, *_nn.__all__, *_tensor.__all__]
