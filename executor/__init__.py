"""Places, the executor, the backend interface and prepared programs."""

from halfway.executor.backend import Backend, Binding, backend_for, register_backend, registered_backends
from halfway.executor.device_tensor import DeviceTensor
from halfway.executor.executor import Executor
from halfway.executor.float16_range import Float16RangeError
from halfway.executor.memory import MemoryPlan, plan_memory
from halfway.executor.place import CPUPlace, OpenCLPlace, Place
from halfway.executor.prepared import PreparedProgram, PrepareReport
from halfway.executor.signatures import PreparedBySignature

__all__ = ["Backend", "Binding", "backend_for", "register_backend", "registered_backends", "DeviceTensor", "Executor",
           "Float16RangeError",
           "MemoryPlan", "plan_memory", "CPUPlace", "OpenCLPlace", "Place", "PreparedProgram", "PrepareReport",
           "PreparedBySignature"]
