"""The error hierarchy: everything halfway raises on purpose derives from HalfwayError.

Each layer adds its context (the file, the op, the pass) with ``raise ... from e`` so a message
reads from the outside in: ``model.pdmodel: block 0, op #12 conv2d: ...``.
"""

from __future__ import annotations

__all__ = [
    "HalfwayError",
    "IRError",
    "SchemaError",
    "VerifyError",
    "SerdeError",
    "FeedError",
    "KernelNotFoundError",
    "PassError",
]


class HalfwayError(Exception):
    """Root of every error halfway raises on purpose."""


class IRError(HalfwayError):
    """An invalid edit of a program: a missing or duplicate var, a detached op, a bad attr value."""


class SchemaError(HalfwayError):
    """An unknown op type, slot or attr, or a schema registered twice."""


class VerifyError(HalfwayError):
    """The verifier found the program inconsistent."""


class SerdeError(HalfwayError):
    """A model or parameter file could not be read or written."""


class FeedError(HalfwayError):
    """A feed is missing, unknown, or of the wrong shape or dtype."""


class KernelNotFoundError(HalfwayError):
    """No kernel is registered for an (op type, backend, dtype)."""


class PassError(HalfwayError):
    """A pass failed or broke its contract."""
