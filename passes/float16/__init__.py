"""The float16 transpiler, as the pass ``float16`` (``transpile``) and the parts it is made of:

* ``lists``: the default white and black lists, the reductions kept float32, float16's limits;
* ``policy``: ALWAYS / FOLLOW / NEVER per op, and why;
* ``range``: what would overflow float16 (parameters, and vars on calibration feeds);
* ``values``: float16 copies of parameters, counting what they lose;
* ``casts``: one cast per var crossing a float32/float16 boundary;
* ``report``: ``Float16Report``, which the pass returns in ``PassResult.report``.
"""

from .lists import DEFAULT_BLACK_LIST, DEFAULT_WHITE_LIST, FLOAT16_MAX, FLOAT16_TINY, LARGE_REDUCTIONS
from .policy import Float16Target
from .report import CastEntry, Float16Report, OpEntry, ParamEntry
from .transpile import Float16Options, Float16Pass
from .values import Losses, to_float16

__all__ = ["Float16Pass", "Float16Options", "Float16Target", "Float16Report", "OpEntry", "CastEntry", "ParamEntry",
           "DEFAULT_WHITE_LIST", "DEFAULT_BLACK_LIST", "LARGE_REDUCTIONS", "FLOAT16_MAX", "FLOAT16_TINY",
           "Losses", "to_float16"]
