"""The builder API: one function per op (``halfway.api.layers.conv2d(x, num_filters=8, ...)``).

Functions live in one module per op family, next to the schemas in ``halfway.ir.ops``.
"""

from ..builder import data
from . import math as _math
from . import nn as _nn
from . import tensor as _tensor
from .math import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .tensor import *  # noqa: F401,F403

__all__ = ["data", *_math.__all__, *_nn.__all__, *_tensor.__all__]
