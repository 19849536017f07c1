"""The kernel registry: exact lookup, the documented fallback of ``select_kernel`` and its
reasons, misses listing what is registered, and backends' kernels known without importing them
by hand — checked in fresh interpreters, one of them without pyopencl."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from halfway.ir import DType, KernelNotFoundError
from halfway.ir.schema import TensorInfo
from halfway.kernels.registry import (
    KernelSpec,
    Unsupported,
    find_kernel,
    has_kernel,
    register_kernel,
    registered_kernels,
    select_kernel,
)


def _spec(op_type: str, dtype: DType = DType.float32, **attrs) -> KernelSpec:
    info = TensorInfo((2, 3), dtype)
    return KernelSpec(op_type, dtype, attrs, {"X": (info,)}, {"Out": (info,)})


def _negate(spec: KernelSpec):
    return lambda x: -x


def test_exact_match_is_made_from_the_spec():
    register_kernel("t_reg_exact", "numpy", (DType.float32,), override=True)(_negate)
    register_kernel("t_reg_exact", "opencl", (DType.float32,), override=True)(lambda spec: ("binder", spec.attrs))
    chosen = select_kernel(_spec("t_reg_exact", axis=1), "opencl")
    assert chosen.fallback is None and str(chosen.key) == "t_reg_exact/opencl/float32"
    assert chosen.kernel == ("binder", {"axis": 1})


def test_missing_backend_kernel_falls_back_to_numpy_saying_why():
    register_kernel("t_reg_numpy_only", "numpy", (DType.float32,), override=True)(_negate)
    chosen = select_kernel(_spec("t_reg_numpy_only"), "opencl")
    assert str(chosen.key) == "t_reg_numpy_only/numpy/float32"
    assert chosen.fallback == "no opencl kernel for float32"
    np.testing.assert_array_equal(chosen.kernel(np.ones(3, np.float32)), -np.ones(3))


def test_unsupported_configuration_falls_back_with_the_factory_reason():
    register_kernel("t_reg_unsupported", "numpy", (DType.float32,), override=True)(_negate)

    @register_kernel("t_reg_unsupported", "opencl", (DType.float32,), override=True)
    def nhwc_only(spec):
        if spec.attrs["layout"] != "NHWC":
            raise Unsupported(f"layout {spec.attrs['layout']} has no OpenCL kernel")
        return "binder"

    assert select_kernel(_spec("t_reg_unsupported", layout="NHWC"), "opencl").fallback is None
    chosen = select_kernel(_spec("t_reg_unsupported", layout="NCHW"), "opencl")
    assert chosen.key.backend == "numpy" and chosen.fallback == "layout NCHW has no OpenCL kernel"


def test_a_miss_lists_what_is_registered():
    register_kernel("t_reg_half", "opencl", (DType.float16,), override=True)(lambda spec: "binder")
    with pytest.raises(KernelNotFoundError, match=r"t_reg_half/opencl/float32 \(no opencl kernel for float32\) nor "
                                                  r"for t_reg_half/numpy/float32; registered for t_reg_half: "
                                                  r"t_reg_half/opencl/float16"):
        select_kernel(_spec("t_reg_half"), "opencl")
    with pytest.raises(KernelNotFoundError, match="no kernel for t_reg_half/numpy/float32; registered for "
                                                  "t_reg_half: t_reg_half/opencl/float16"):
        find_kernel("t_reg_half", "numpy", DType.float32)
    with pytest.raises(KernelNotFoundError, match="registered for t_reg_nothing: none"):
        select_kernel(_spec("t_reg_nothing"), "numpy")


def test_numpy_kernels_decline_without_a_fallback():
    @register_kernel("t_reg_declines", "numpy", (DType.float32,), override=True)
    def declines(spec):
        raise Unsupported("only float64")

    with pytest.raises(Unsupported, match="only float64"):
        select_kernel(_spec("t_reg_declines"), "numpy")


def test_replacing_a_built_in_needs_override():
    with pytest.raises(Exception, match="relu/numpy/float32 is already registered"):
        register_kernel("relu", "numpy", (DType.float32,))(_negate)


def _fresh(code: str, *, block_pyopencl: bool = False) -> dict:
    """Run ``code`` in a new interpreter (pyopencl unimportable there when asked) and return the
    JSON it prints last."""
    blocker = textwrap.dedent("""
        import sys

        class NoPyOpenCL:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "pyopencl":
                    raise ImportError("pyopencl is not installed here")

        sys.meta_path.insert(0, NoPyOpenCL())
    """) if block_pyopencl else ""
    done = subprocess.run([sys.executable, "-c", blocker + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_lookups_import_a_backends_kernels_on_first_use():
    found = _fresh("""
        import json, sys
        import halfway
        from halfway.ir import DType
        from halfway.kernels.registry import has_kernel
        before = "halfway.kernels.opencl" in sys.modules
        print(json.dumps([before, has_kernel("conv2d", "opencl", DType.float16), "pyopencl" in sys.modules]))
    """)
    assert found == [False, True, False]


TRANSPILE = """
    import json, sys
    import halfway
    from halfway import layers
    {imports}
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 3, 8, 8])
        y = layers.conv2d(x, num_filters=4, filter_size=3, padding=1, act="relu")
        y = layers.pool2d(y, pool_size=2, pool_type="max", pool_stride=2)
        y = layers.softmax(layers.fc(y, 5))
    scope = halfway.init_scope(prog, seed=0)
    fp16, report = halfway.float16_transpile(prog, scope, target="opencl")
    ops = [(op.type, [fp16.global_block().var(n).dtype.name for n in op.output_names()])
           for op in fp16.global_block().ops]
    print(json.dumps(ops))
"""


def test_float16_decisions_do_not_depend_on_imports_or_pyopencl():
    fresh = _fresh(TRANSPILE.format(imports=""))
    imported = _fresh(TRANSPILE.format(imports="import halfway.kernels.opencl"))
    without = _fresh(TRANSPILE.format(imports="assert 'pyopencl' not in sys.modules"), block_pyopencl=True)
    assert fresh == imported == without
    assert ["conv2d", ["float16"]] in fresh


def test_a_device_without_pyopencl_says_what_to_install():
    found = _fresh("""
        import json
        import halfway
        from halfway.executor import Executor, OpenCLPlace
        try:
            Executor(OpenCLPlace()).run(halfway.Program())
            print(json.dumps("ran"))
        except halfway.HalfwayError as e:
            print(json.dumps(str(e)))
    """, block_pyopencl=True)
    assert "needs pyopencl" in found and "pip install 'halfway[opencl]'" in found


def test_registered_kernels_lists_every_built_in_backend():
    backends = {key.backend for key in registered_kernels()}
    assert {"numpy", "opencl"} <= backends
    assert has_kernel("conv2d", "opencl", DType.float32) and has_kernel("conv2d", "numpy", DType.float16)
