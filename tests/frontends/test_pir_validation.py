"""The PIR importer checks a model.json's structure before it builds anything: each defect a
mutated file showed (a name of another type, a fetch without a result or a col, a tensor too
large to make, JSON nested 1,000 deep, a split into 10^9 pieces, ids undefined or defined twice,
dims and attrs of the wrong type, a number a dtype cannot hold, attrs nested deeper than
MAX_DEPTH) is one HalfwayError naming the
file, the op and the value; and an export folder's program is found among its other .json files
by its content."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import halfway
from halfway.frontends.paddle import load as load_pir
from halfway.frontends.paddle.pir import MAX_DEPTH
from halfway.ir.errors import HalfwayError, SerdeError
from tests.support.watchdog import watchdog

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle3" / "pir"
Ops = list[dict[str, Any]]


DEEP = "(an attr nested 1,000 deep)"
"""Written in the text as an a_array attr nested 500 deep (JSON 1,000 deep), so that the test
builds no structure that deep."""


def _edited(tmp_path: Path, edit: Callable[[Ops], None], name: str = "ops") -> Path:
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    data = json.loads((folder / "model.json").read_text())
    edit(data["program"]["regions"][0]["blocks"][0]["ops"])
    deep = '{"#": "0.a_array", "D": [' * 500 + '{"#": "0.a_i32", "D": 1}' + "]}" * 500
    (folder / "model.json").write_text(json.dumps(data).replace(json.dumps(DEEP), deep))
    return folder


def _op(ops: Ops, kind: str, nth: int = 0) -> dict[str, Any]:
    return [op for op in ops if op["#"] == kind][nth]


def _attr(op: dict[str, Any], name: str) -> dict[str, Any]:
    attr: dict[str, Any] = next(a["AT"] for a in op["A"] if a["N"] == name)
    return attr


def _refused(folder: Path, *fragments: str) -> str:
    with watchdog(20), pytest.raises(HalfwayError) as info:
        load_pir(folder)
    message = str(info.value)
    for fragment in ("model.json: ", *fragments):
        assert fragment in message, message
    return message


def _set(path: Callable[[Ops], Any], key: Any, value: Any) -> Callable[[Ops], None]:
    def edit(ops: Ops) -> None:
        path(ops)[key] = value
    return edit


def _drop_col(ops: Ops) -> None:
    fetch = _op(ops, "1.fetch")
    fetch["A"] = [a for a in fetch["A"] if a["N"] != "col"]


def _nested(ops: Ops) -> None:
    _op(ops, "1.full")["A"].append({"N": "nested", "AT": DEEP})


def _repeat_result(ops: Ops) -> None:
    fulls = [op for op in ops if op["#"] == "1.full"]
    fulls[1]["O"][0]["%"] = fulls[0]["O"][0]["%"]


def _undefined_operand(ops: Ops) -> None:
    _op(ops, "1.fetch")["I"] = [{"%": 999999}]


CASES = {
    "a name of another type": (_set(lambda ops: ops[5], "#", 5), ["op #5: ", "its name ('#') is 5, not a string"]),
    "a fetch without a result": (_set(lambda ops: _op(ops, "1.fetch"), "O", []),
                                 ["pd_op.fetch: expected one result and a name, got results []"]),
    "a fetch without a col": (_drop_col, ["pd_op.fetch (value %92): ", "col None"]),
    "a fetch's col repeated": (_set(lambda ops: _attr(_op(ops, "1.fetch", 1), "col"), "D", 0),
                               ["op #89 pd_op.fetch (value %93)", "(op #88 fetches col 0 too)"]),
    "a full of [25000, 25000]": (_set(lambda ops: _attr(_op(ops, "1.full"), "shape"), "D", [25000, 25000]),
                                 ["op #21 pd_op.full: value %22: a float32 tensor of shape [25000, 25000] would "
                                  "take 2,500,000,000 bytes"]),
    "a full of a negative dim": (_set(lambda ops: _attr(_op(ops, "1.full"), "shape"), "D", [-3]),
                                 ["op #21 pd_op.full: value %22: shape [-3] is not a list of dims"]),
    "an int full of inf": (_set(lambda ops: _attr(_op(ops, "1.full", 6), "value"), "D", float("inf")),
                           ["op #51 pd_op.full: value %52: value inf is not an int32"]),
    "JSON nested 1,000 deep": (_nested, ["nests"]),
    "a split into 10^9 pieces": (_set(lambda ops: _attr(_op(ops, "1.split_with_num"), "num"), "D", 10**9),
                                 ["op #52 pd_op.split_with_num: value %53: num 1000000000 must split the dim 8 "
                                  "along axis 1 into the 2 pieces its type declares"]),
    "a result defined twice": (_repeat_result, ["op #25 pd_op.full: ", "value %22 is also the result of op #21"]),
    "an operand nothing computes": (_undefined_operand, ["op #88 pd_op.fetch: ",
                                                         "operand %999999 is not the result of an op before it"]),
    "dims of another type": (_set(lambda ops: _op(ops, "1.full")["O"][0]["TT"]["D"], 1, ["a"]),
                             ["op #21 pd_op.full: ", "dims ['a'] are not ints of -1 or more"]),
    "an int attr of another type": (_set(lambda ops: _attr(_op(ops, "1.split_with_num"), "num"), "D", "2"),
                                    ["attr 'num' (0.a_i32) is '2', not an int"]),
    "a value id of another type": (_set(lambda ops: _op(ops, "1.fetch")["I"], 0, {"%": "77"}),
                                   ["op #88 pd_op.fetch: ", "an operand's value id ('%') is '77'"]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_malformed_program_is_one_error_naming_the_op_and_value(tmp_path, case):
    edit, fragments = CASES[case]
    _refused(_edited(tmp_path, edit), *fragments)


def test_attrs_nested_beyond_the_depth_limit_name_the_op(tmp_path):
    def nested(ops: Ops) -> None:
        value: dict[str, Any] = {"#": "0.a_i32", "D": 1}
        for _ in range(MAX_DEPTH + 2):
            value = {"#": "0.a_array", "D": [value]}
        _op(ops, "1.full")["A"].append({"N": "nested", "AT": value})

    _refused(_edited(tmp_path, nested), f"op #21 pd_op.full: malformed PIR program: attr 'nested' nests more than "
                                        f"{MAX_DEPTH} deep")


def test_json_nested_beyond_the_parser_is_refused(tmp_path):
    folder = _edited(tmp_path, lambda ops: None)
    text = (folder / "model.json").read_text()
    (folder / "model.json").write_text(text[:-2] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    _refused(folder, "its JSON nests too deeply")


# -- finding the program in an export folder ------------------------------------------------------------
def _export_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "export"
    shutil.copytree(FIXTURES / "resnet", folder)
    (folder / "config.json").write_text(json.dumps({"architectures": ["ResNet"], "hidden_size": 16}))
    (folder / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"vocab": {"a": 0}}}))
    (folder / "zz_generation_config.json").write_text("{}")
    return folder


def test_the_program_is_found_among_other_json_files(tmp_path):
    program, feeds, fetches, _ = halfway.load(_export_folder(tmp_path))
    reference, ref_feeds, ref_fetches, _ = halfway.load(FIXTURES / "resnet")
    assert (feeds, fetches) == (ref_feeds, ref_fetches)
    assert [op.type for op in program.global_block().ops] == [op.type for op in reference.global_block().ops]


def test_a_folder_of_two_programs_names_them(tmp_path):
    folder = _export_folder(tmp_path)
    shutil.copy(folder / "model.json", folder / "other.json")
    with pytest.raises(SerdeError, match=r"holds several Paddle PIR programs \(model\.json, other\.json\)"):
        halfway.load(folder)
