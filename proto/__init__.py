"""The ProgramDesc wire format (generated from framework.proto by scripts/gen_proto.py)."""

from . import framework_pb2

__all__ = ["framework_pb2"]
