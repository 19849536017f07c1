"""Parameter files: records of every dtype, Paddle's files byte for byte, and hostile bytes."""

import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from halfway.ir import DType, Program, SerdeError, VarKind, serde
from halfway.ir.params import (
    MAX_RANK,
    ParamSpec,
    decode_tensor,
    encode_tensor,
    param_specs,
    read_param_file,
    read_params,
    write_params,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"
PDIPARAMS = FIXTURES / "resnet_tiny.pdiparams"
LEGACY = FIXTURES / "resnet_tiny_legacy"
NO_NUMPY = {DType.float8_e4m3fn, DType.float8_e5m2}


def _resnet_specs() -> list[ParamSpec]:
    return param_specs(Program.from_bytes((FIXTURES / "resnet_tiny.pdmodel").read_bytes()))


def _record(*, version=0, lod=(), tensor_version=0, desc=None, desc_size=None, data=b"",
            lod_count=None, lod_sizes=None) -> bytes:
    """A record built field by field, so a test can break any one of them."""
    desc = serde.tensor_desc_to_bytes(DType.float32, (2,)) if desc is None else desc
    out = struct.pack("<IQ", version, len(lod) if lod_count is None else lod_count)
    for i, level in enumerate(lod):
        raw = np.asarray(level, "<u8").tobytes()
        out += struct.pack("<Q", len(raw) if lod_sizes is None else lod_sizes[i]) + raw
    out += struct.pack("<Ii", tensor_version, len(desc) if desc_size is None else desc_size)
    return out + desc + data


def _sample(dtype: DType, shape=(2, 3)) -> np.ndarray:
    rng = np.random.default_rng(int(dtype))
    held = dtype.numpy
    if held.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if held.kind in "iu":
        info = np.iinfo(held)
        return rng.integers(info.min, info.max, shape, dtype=held, endpoint=True)
    if held.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(held)
    return rng.standard_normal(shape).astype(held)


# -- records ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [d for d in DType if d not in NO_NUMPY], ids=lambda d: d.name)
def test_every_dtype_round_trips(dtype):
    array = _sample(dtype)
    data = encode_tensor(array, dtype)
    record = decode_tensor(data)
    assert record.dtype is dtype
    assert record.array.dtype == dtype.numpy
    np.testing.assert_array_equal(record.array, array)
    assert record.end == len(data)
    assert data.endswith(array.astype(dtype.numpy.newbyteorder("<")).tobytes())


def test_record_layout_is_paddles():
    array = np.arange(3, dtype=np.float32)
    desc = serde.tensor_desc_to_bytes(DType.float32, (3,))
    assert encode_tensor(array) == _record(desc=desc, data=array.astype("<f4").tobytes())


def test_float16_is_stored_as_float16_and_bfloat16_as_its_bits():
    half = np.array([1.5, -2.0, 65504.0], dtype=np.float16)
    data = encode_tensor(half)
    assert data.endswith(half.astype("<f2").tobytes())
    assert decode_tensor(data).dtype is DType.float16
    bits = np.array([0x3F80, 0xC000], dtype=np.uint16)  # bfloat16 1.0, -2.0
    record = decode_tensor(encode_tensor(bits, DType.bfloat16))
    assert record.dtype is DType.bfloat16 and record.array.dtype == np.uint16
    np.testing.assert_array_equal(record.array, bits)
    assert decode_tensor(encode_tensor(bits)).dtype is DType.uint16


def test_zero_d_tensor_has_no_dims_and_one_element():
    data = encode_tensor(np.array(3.5, dtype=np.float32))
    assert data == _record(desc=serde.tensor_desc_to_bytes(DType.float32, ()), data=struct.pack("<f", 3.5))
    record = decode_tensor(data)
    assert record.array.shape == () and record.array == 3.5


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)])
def test_empty_dims(shape):
    record = decode_tensor(encode_tensor(np.zeros(shape, dtype=np.int64)))
    assert record.array.shape == shape and record.array.dtype == np.int64


def test_lod_round_trips():
    data = encode_tensor(np.ones((5, 2), np.float32), lod=[[0, 2, 5], [0, 1]])
    record = decode_tensor(data)
    assert [level.tolist() for level in record.lod] == [[0, 2, 5], [0, 1]]
    np.testing.assert_array_equal(record.array, np.ones((5, 2)))


def test_decoded_array_owns_its_memory():
    data = bytearray(encode_tensor(np.ones(4, np.float32)))
    array = decode_tensor(bytes(data)).array
    assert array.flags.owndata and array.flags.writeable


def test_encode_rejects_arrays_that_cannot_hold_the_dtype():
    with pytest.raises(SerdeError, match="bfloat16 tensor must be held as a numpy uint16 array, got float32"):
        encode_tensor(np.ones(2, np.float32), DType.bfloat16)
    with pytest.raises(SerdeError, match="cannot store an array of dtype object"):
        encode_tensor(np.array([object()]))
    with pytest.raises(SerdeError, match="expected a numpy array"):
        encode_tensor([1.0, 2.0])


# -- files ----------------------------------------------------------------------------------------------
def test_paddle_combined_file_decodes_and_reencodes_byte_identically():
    data = PDIPARAMS.read_bytes()
    specs = _resnet_specs()
    values = read_params(data, specs, source="resnet_tiny.pdiparams")
    assert len(values) == len(specs) == 23
    assert list(values) == sorted(values)
    assert values["conv2d_0.w_0"].shape == (8, 3, 3, 3) and values["conv2d_0.w_0"].dtype == np.float32
    assert write_params(values) == data
    assert write_params(list(reversed(values.items()))) == data


def test_paddle_legacy_files_each_hold_one_record_of_their_var():
    values = read_params(PDIPARAMS.read_bytes(), _resnet_specs())
    files = sorted(p.name for p in LEGACY.iterdir() if p.name != "__model__")
    assert files == sorted(values)
    for spec in _resnet_specs():
        data = (LEGACY / spec.name).read_bytes()
        assert data == encode_tensor(values[spec.name])
        np.testing.assert_array_equal(read_param_file(data, spec, source=spec.name), values[spec.name])


def test_records_are_sorted_by_name_bytewise():
    data = write_params({"conv2d_2.w_0": np.zeros(1, np.float32), "conv2d_10.w_0": np.ones(1, np.float32)})
    first = decode_tensor(data)
    assert first.array[0] == 1.0
    values = read_params(data, [("conv2d_2.w_0", "float32", (1,)), ("conv2d_10.w_0", "float32", (1,))])
    assert list(values) == ["conv2d_10.w_0", "conv2d_2.w_0"]


def test_write_params_takes_the_wire_dtype_from_dtypes():
    bits = np.array([0x3F80], np.uint16)
    data = write_params([("w", bits)], dtypes={"w": DType.bfloat16})
    assert decode_tensor(data).dtype is DType.bfloat16
    with pytest.raises(SerdeError, match="given more than once: 'w'"):
        write_params([("w", bits), ("w", bits)])
    with pytest.raises(SerdeError, match="parameter 'w': a bfloat16 tensor"):
        write_params([("w", np.ones(1, np.float32))], dtypes={"w": DType.bfloat16})


def test_param_specs_picks_persistable_tensors_sorted():
    prog = Program()
    block = prog.global_block()
    block.create_var("b", dtype="float16", shape=[4], persistable=True)
    block.create_var("a", shape=[-1, 4], persistable=True)
    block.create_var("act", shape=[4])
    block.create_var("feed", kind=VarKind.FEED_MINIBATCH, persistable=True)
    block.create_var("fetch", kind=VarKind.FETCH_LIST, persistable=True)
    block.create_var("reader", kind=VarKind.READER, persistable=True)
    block.create_var("raw", kind=VarKind.RAW, persistable=True)
    prog.create_block(0).create_var("c", dtype="int64", shape=[], persistable=True)
    assert param_specs(prog) == [ParamSpec("a", DType.float32, (-1, 4)), ParamSpec("b", DType.float16, (4,)),
                                 ParamSpec("c", DType.int64, ())]


def test_param_specs_rejects_kinds_it_cannot_store():
    prog = Program()
    prog.global_block().create_var("rows", kind=VarKind.SELECTED_ROWS, shape=[4, 2], persistable=True)
    with pytest.raises(SerdeError, match=r"'rows' \(SELECTED_ROWS\)"):
        param_specs(prog)


def test_unknown_dims_match_any_size_of_that_dim():
    data = encode_tensor(np.zeros((5, 3), np.float32))
    assert read_params(data, [("w", "float32", (-1, 3))])["w"].shape == (5, 3)
    with pytest.raises(SerdeError, match=r"'w' is float32\[-1, 4\] in the program but the value is "
                                         r"float32\[5, 3\]"):
        read_params(data, [("w", "float32", (-1, 4))])
    with pytest.raises(SerdeError, match=r"is float32\[-1\] in the program"):
        read_params(data, [("w", "float32", (-1,))])


# -- hostile bytes ----------------------------------------------------------------------------------------
def _fails(data: bytes, match: str, expected=(("w", "float32", (2,)),)) -> SerdeError:
    with pytest.raises(SerdeError, match=match) as info:
        read_params(data, list(expected), source="bad.pdiparams")
    assert str(info.value).startswith("bad.pdiparams: ")
    return info.value


GOOD = _record(data=np.ones(2, "<f4").tobytes())


@pytest.mark.parametrize("cut", range(len(GOOD)))
def test_every_truncation_is_an_error(cut):
    if cut == 0:
        _fails(GOOD[:cut], r"ends after 0 records but the program has 1 parameters; no values for 'w'")
    else:
        _fails(GOOD[:cut], r"record #0 \('w'\) at byte 0: truncated: .* needs \d+ bytes")


def test_wrong_version_fields():
    _fails(_record(version=1, data=GOOD[-8:]), "version is 1; only version 0 exists")
    _fails(_record(tensor_version=7, data=GOOD[-8:]), "tensor version is 7; only version 0 exists")


def test_absurd_lod():
    _fails(_record(lod_count=2**60, data=GOOD[-8:]), r"claims 1152921504606846976 LoD levels; only \d+ bytes")
    _fails(_record(lod=[[0, 2]], lod_sizes=[2**63], data=GOOD[-8:]),
           "truncated: the LoD level 0 needs 9223372036854775808 bytes")
    _fails(_record(lod=[[0, 2]], lod_sizes=[12], data=GOOD[-8:]), "not a whole number of uint64 offsets")


def test_desc_sizes():
    _fails(_record(desc_size=10**6, data=GOOD[-8:]), "truncated: the tensor description needs 1000000 bytes")
    _fails(_record(desc_size=-1, data=GOOD[-8:]), "tensor description size is -1")
    _fails(_record(desc=b"\xff\xff\xff", data=GOOD[-8:]), "bad tensor description")


def test_negative_and_absurd_dims_allocate_nothing():
    _fails(_record(desc=serde.tensor_desc_to_bytes(DType.float32, (-5, 2))),
           r"dims \[-5, 2\] hold a negative size")
    tracemalloc.start()
    try:
        for dims in [(2**40, 2**40), (2**62,), (2**31, 2**31, 2**31)]:
            _fails(_record(desc=serde.tensor_desc_to_bytes(DType.float64, dims), data=b"\0" * 64),
                   r"truncated: a float64 tensor of dims .* needs \d+ bytes of data, 64 left")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    _fails(_record(desc=serde.tensor_desc_to_bytes(DType.float32, (1,) * (MAX_RANK + 1)), data=GOOD[-4:]),
           f"tensor has {MAX_RANK + 1} dims; at most {MAX_RANK}")


def test_unknown_dtypes():
    _fails(_record(desc=b"\x08\x07\x10\x02", data=GOOD[-8:]), "data type 7, which is not an element type")
    _fails(_record(desc=b"\x08\x63\x10\x02", data=GOOD[-8:]), "required fields missing or invalid")
    _fails(_record(desc=serde.tensor_desc_to_bytes(DType.float8_e4m3fn, (2,)), data=b"\0\0"),
           "holds float8_e4m3fn data, which halfway cannot load")


def test_trailing_bytes():
    _fails(GOOD + b"\0", "1 bytes left after the last of 1 parameters")
    data = PDIPARAMS.read_bytes()
    with pytest.raises(SerdeError, match="bad.pdiparams: 2 bytes left after the last of 23"):
        read_params(data + b"\x01\x02", _resnet_specs(), source="bad.pdiparams")


def test_fewer_records_than_parameters():
    data = PDIPARAMS.read_bytes()
    last = encode_tensor(read_params(data, _resnet_specs())["linear_0.w_0"])
    assert data.endswith(last)
    with pytest.raises(SerdeError, match="ends after 22 records but the program has 23 parameters; "
                                         "no values for 'linear_0.w_0'"):
        read_params(data[:-len(last)], _resnet_specs(), source="bad.pdiparams")


def test_record_disagreeing_with_its_var_names_it():
    error = _fails(GOOD, r"record #0 \('w'\) at byte 0: var 'w' is float16\[2\] in the program "
                         r"but the value is float32\[2\]", expected=[("w", "float16", (2,))])
    assert "bad.pdiparams" in str(error)
    _fails(GOOD, r"var 'w' is float32\[3\] in the program but the value is float32\[2\]",
           expected=[("w", "float32", (3,))])
    data = PDIPARAMS.read_bytes()
    specs = [s._replace(shape=(8, 3, 3, 4)) if s.name == "conv2d_0.w_0" else s for s in _resnet_specs()]
    with pytest.raises(SerdeError, match=r"record #17 \('conv2d_0.w_0'\) at byte \d+: var 'conv2d_0.w_0' is "
                                         r"float32\[8, 3, 3, 4\] in the program but the value is "
                                         r"float32\[8, 3, 3, 3\]"):
        read_params(data, specs, source="bad.pdiparams")


def test_legacy_file_holds_exactly_one_record():
    with pytest.raises(SerdeError, match="w_0: 4 bytes left after the record of 'w'; "
                                         "a parameter file holds exactly one"):
        read_param_file(GOOD + b"\0\0\0\0", ("w", "float32", (2,)), source="dir/w_0")
    with pytest.raises(SerdeError, match=r"dir/w_0: parameter 'w' at byte 0: truncated"):
        read_param_file(GOOD[:-1], ("w", "float32", (2,)), source="dir/w_0")
