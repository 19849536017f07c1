"""``halfway.layers``: the builder API (see ``halfway.ir.layers``)."""

from halfway.ir.layers import *  # noqa: F401,F403
from halfway.ir.layers import __all__  # noqa: F401
