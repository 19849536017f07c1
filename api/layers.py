"""``halfway.api.layers``: the builder API (see ``halfway.ir.layers``)."""

from ..ir.layers import *  # noqa: F401,F403
from ..ir.layers import __all__  # noqa: F401
