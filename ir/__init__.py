"""The program IR: Program / Block / Variable / Operator, dtypes, attrs, schemas and serde."""

from halfway.ir.attrs import Attr, AttrType
from halfway.ir.block import Block
from halfway.ir.dtypes import DType, VarKind
from halfway.ir.errors import (FeedError, HalfwayError, IRError, KernelNotFoundError, PassError,
                               SchemaError, SerdeError, VerifyError)
from halfway.ir.operator import Operator
from halfway.ir.program import Program, topological_order
from halfway.ir.variable import Variable

__all__ = [
    "Attr", "AttrType", "Block", "DType", "VarKind", "Operator", "Program", "Variable",
    "topological_order", "HalfwayError", "IRError", "SchemaError", "VerifyError", "SerdeError",
    "FeedError", "KernelNotFoundError", "PassError",
]
