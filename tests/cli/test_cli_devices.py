"""``halfway devices``: the listing against pyopencl's own view of the machine."""

from __future__ import annotations

from tests.support.clirun import halfway, halfway_json
from tests.support.extras import import_pyopencl

cl = import_pyopencl()


def builds(device: cl.Device) -> bool:
    try:
        cl.Program(cl.Context([device]), "__kernel void k(__global int *x) { x[0] = 1; }").build()
    except cl.Error:
        return False
    return True


def test_devices_are_listed_in_place_order_with_their_float16_mode():
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    rows = halfway_json("devices")
    assert [r["device"] for r in rows] == [d.name.strip() for d in devices]
    assert [r["place"] for r in rows] == [f"opencl:{i}" for i in range(len(devices))]
    for row, device in zip(rows, devices):
        fp16 = "cl_khr_fp16" in device.extensions.split()
        assert row["cl_khr_fp16"] == fp16
        assert row["float16_mode"]["normal"] == "storage" and row["float16_mode"]["high"] == "high"
        assert row["float16_mode"]["low"] == ("native" if fp16 else "storage")
        assert row["global_memory_bytes"] == device.global_mem_size
        assert (row["build_error"] is None) == builds(device)
    done = halfway("devices")
    assert done.returncode == 0 and all(d.name.strip()[:12] in done.stdout for d in devices)
