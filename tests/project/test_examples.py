import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parent.parent.parent


def test_custom_addn_example(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_addn.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "custom_addn ops: [(4, 'sum')]" in out
    assert "reloaded attrs: {'input_num': ('INT', 4), 'op_kind': ('STRING', 'sum')}" in out
    assert "unknown op type 'custom_addn'" in out and "register_op" in out
    results = np.load(tmp_path / "results.npz")
    # float16 kernel: float16 in and out, float32 sums (one float16 rounding of the exact sum)
    exact = sum(results[f"h{i}"].astype(np.float64) for i in range(5))
    assert results["float16_sum"].dtype == np.float16
    np.testing.assert_allclose(results["float16_sum"], exact.astype(np.float16), rtol=1e-3, atol=1e-3)
    # the transpiled float32 model computes what the original computes, before and after reloading
    np.testing.assert_allclose(results["model_transpiled"], results["model_original"], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(results["model_reloaded"], results["model_transpiled"])
