"""Places, the executor and prepared programs."""

from halfway.executor.executor import Executor
from halfway.executor.memory import MemoryPlan, plan_memory
from halfway.executor.place import CPUPlace, OpenCLPlace, Place
from halfway.executor.prepared import PreparedProgram, PrepareReport

__all__ = ["Executor", "MemoryPlan", "plan_memory", "CPUPlace", "OpenCLPlace", "Place", "PreparedProgram",
           "PrepareReport"]
