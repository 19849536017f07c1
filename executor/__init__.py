"""Places, the executor, the backend interface and prepared programs."""

from .backend import Backend, Binding, backend_for, register_backend, registered_backends
from .device_tensor import DeviceTensor
from .executor import Executor
from .float16_range import Float16RangeError
from .memory import MemoryPlan, plan_memory
from .place import CPUPlace, OpenCLPlace, Place
from .prepared import PreparedProgram, PrepareReport
from .signatures import PreparedBySignature

__all__ = ["Backend", "Binding", "backend_for", "register_backend", "registered_backends", "DeviceTensor", "Executor",
           "Float16RangeError",
           "MemoryPlan", "plan_memory", "CPUPlace", "OpenCLPlace", "Place", "PreparedProgram", "PrepareReport",
           "PreparedBySignature"]
