"""Schemas of the built-in ops, one module per family."""
