"""The OpenBLAS core type halfway forces before numpy loads (halfway.api.openblas)."""

import os
import subprocess
import sys

import pytest

from halfway import openblas

ZEN5_FLAGS = "fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16"


def cpuinfo(vendor: str, flags: str, cores: int = 2) -> str:
    core = f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 26\nflags\t\t: {flags}\n\n"
    return core * cores


def test_amd_with_avx512_gets_skylakex():
    assert openblas.core_for(cpuinfo("AuthenticAMD", ZEN5_FLAGS)) == "SkylakeX"


@pytest.mark.parametrize("vendor, flags", [
    ("GenuineIntel", ZEN5_FLAGS),  # OpenBLAS recognises Intel's AVX-512 cores itself
    ("AuthenticAMD", "fpu sse2 avx avx2 fma"),  # Zen 3: no AVX-512, its own choice stands
    ("AuthenticAMD", "avx2 avx512f avx512cd"),  # part of the subsets only
])
def test_other_cpus_keep_openblas_choice(vendor, flags):
    assert openblas.core_for(cpuinfo(vendor, flags)) is None


def test_not_linux_keeps_openblas_choice():
    assert openblas.core_for("") is None


def test_sets_the_variable_only_when_unset(tmp_path, monkeypatch):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo("AuthenticAMD", ZEN5_FLAGS))
    monkeypatch.delitem(sys.modules, "numpy")
    env: dict[str, str] = {}
    assert openblas.choose_core(env, str(path)) == "SkylakeX"
    assert env == {"OPENBLAS_CORETYPE": "SkylakeX"}
    user = {"OPENBLAS_CORETYPE": "Haswell"}
    assert openblas.choose_core(user, str(path)) is None
    assert user == {"OPENBLAS_CORETYPE": "Haswell"}
    assert openblas.choose_core({}, str(tmp_path / "missing")) is None


def test_too_late_once_numpy_is_loaded(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo("AuthenticAMD", ZEN5_FLAGS))
    import numpy  # noqa: F401

    env: dict[str, str] = {}
    assert openblas.choose_core(env, str(path)) is None
    assert env == {}


def test_tune_first_configures_openblas():
    """In a fresh interpreter, the variable OpenBLAS reads is set (or not) before numpy loads."""
    code = ("import os, halfway; halfway.openblas.tune(); import halfway.api.openblas as o; "
            "print(os.environ.get('OPENBLAS_CORETYPE'), o.core_for(open('/proc/cpuinfo').read()))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    try:
        open("/proc/cpuinfo").close()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    seen, expected = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout.split()
    assert seen == expected


def test_thread_timeout_is_set_only_when_unset_and_before_numpy(monkeypatch):
    monkeypatch.delitem(sys.modules, "numpy")
    env: dict[str, str] = {}
    assert openblas.choose_thread_timeout(env) == openblas.THREAD_TIMEOUT
    assert env == {"OPENBLAS_THREAD_TIMEOUT": openblas.THREAD_TIMEOUT}
    user = {"OPENBLAS_THREAD_TIMEOUT": "28"}
    assert openblas.choose_thread_timeout(user) is None and user == {"OPENBLAS_THREAD_TIMEOUT": "28"}
    monkeypatch.undo()
    import numpy  # noqa: F401

    assert openblas.choose_thread_timeout({}) is None


def test_importing_halfway_changes_no_environment():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    code = "import os, halfway.ir, halfway.kernels; print(sorted(k for k in os.environ if k.startswith('OPENBLAS_')))"
    seen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert seen.strip() == "[]"


def test_tune_first_shortens_openblas_spin():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    code = "import os, halfway; halfway.openblas.tune(); import numpy; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"
    seen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert seen.strip() == openblas.THREAD_TIMEOUT
