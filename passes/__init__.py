"""Passes and the pass manager (the registry and built-in passes live here)."""
