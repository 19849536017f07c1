"""Places, the executor and prepared programs."""

from halfway.executor.executor import Executor, op_dtype
from halfway.executor.memory import MemoryPlan, plan_memory
from halfway.executor.place import CPUPlace, OpenCLPlace, Place
from halfway.executor.prepared import PreparedProgram, PrepareReport

__all__ = ["Executor", "op_dtype", "MemoryPlan", "plan_memory", "CPUPlace", "OpenCLPlace", "Place", "PreparedProgram",
           "PrepareReport"]
