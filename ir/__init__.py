"""The program IR: Program / Block / Variable / Operator, dtypes, attrs, schemas and serde."""

from . import (
                               layers,
                               ops,  # noqa: F401  (registers the built-in op schemas)
)
from .attrs import Attr, AttrType
from .block import Block
from .builder import default_main_program, init_scope, program_guard
from .dtypes import DType, VarKind
from .errors import (
                               FeedError,
                               HalfwayError,
                               IRError,
                               KernelNotFoundError,
                               PassError,
                               SchemaError,
                               SerdeError,
                               VerifyError,
)
from .io import load_inference_model, save_inference_model
from .operator import Operator
from .program import Program, topological_order
from .prune import prune
from .scope import Scope
from .variable import Variable
from .verifier import verify

__all__ = [
    "Attr", "AttrType", "Block", "DType", "VarKind", "Operator", "Program", "Variable", "Scope",
    "topological_order", "program_guard", "default_main_program", "init_scope", "layers", "verify", "prune",
    "save_inference_model", "load_inference_model",
    "HalfwayError", "IRError", "SchemaError", "VerifyError", "SerdeError", "FeedError",
    "KernelNotFoundError", "PassError",
]
