"""The program IR: Program / Block / Variable / Operator, dtypes, attrs, schemas and serde."""

from halfway.ir import ops  # noqa: F401  (registers the built-in op schemas)
from halfway.ir.attrs import Attr, AttrType
from halfway.ir.block import Block
from halfway.ir.dtypes import DType, VarKind
from halfway.ir.errors import (FeedError, HalfwayError, IRError, KernelNotFoundError, PassError,
                               SchemaError, SerdeError, VerifyError)
from halfway.ir.operator import Operator
from halfway.ir.program import Program, topological_order
from halfway.ir.variable import Variable
from halfway.ir.scope import Scope
from halfway.ir.builder import program_guard, default_main_program, init_scope
from halfway.ir import layers
from halfway.ir.verifier import verify
from halfway.ir.prune import prune
from halfway.ir.io import load_inference_model, save_inference_model

__all__ = [
    "Attr", "AttrType", "Block", "DType", "VarKind", "Operator", "Program", "Variable", "Scope",
    "topological_order", "program_guard", "default_main_program", "init_scope", "layers", "verify", "prune",
    "save_inference_model", "load_inference_model",
    "HalfwayError", "IRError", "SchemaError", "VerifyError", "SerdeError", "FeedError",
    "KernelNotFoundError", "PassError",
]
