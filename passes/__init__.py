"""Passes and the pass manager (the registry and built-in passes live here)."""

from halfway.passes.base import Pass, PassInfo, PassResult, get_pass, register_pass, registered_passes

__all__ = ["Pass", "PassInfo", "PassResult", "get_pass", "register_pass", "registered_passes"]
