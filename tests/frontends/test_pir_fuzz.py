"""Structural fuzzing of the Paddle 3 PIR importer: the fixtures' ``model.json`` mutated the ways
malformed files are (records deleted, values of another type, huge or negative numbers, ids
that are undefined or defined twice, ops moved or repeated, nesting 1,000 deep) must each load or
fail with a HalfwayError, within a watchdog's time, and write nothing.

``HALFWAY_FUZZ_CASES`` (default 150) and ``HALFWAY_FUZZ_SEED`` (default 0) size a run; a larger
run by hand: ``HALFWAY_FUZZ_CASES=5000 python -m pytest -q tests/frontends/test_pir_fuzz.py -s``.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from halfway.frontends.paddle import load as load_pir
from tests.support.fuzzing import Tally, outcome, snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle3" / "pir"
MODELS = ("ops", "resnet")
CASES = int(os.environ.get("HALFWAY_FUZZ_CASES", "150"))
SEED = int(os.environ.get("HALFWAY_FUZZ_SEED", "0"))
TIMEOUT_S = 20.0


DEEP = "(nested 1000 deep)"
"""A value written as a list nested 1,000 deep (put in the text, so that the test itself recurses
through no such list)."""
VALUES = [None, 0, -1, 1, 7, 10**9, 2**63, -(2**40), 1.5, "", "x", "1.relu", "0.t_vec", True, [], {}, [0],
          [25000, 25000], [-7, 3], {"%": 0}, {"%": 999999}, {"#": "0.a_i32", "D": 10**9}, DEEP]
"""What a mutation puts in place of a value: other types, huge and negative numbers, ids, deep nesting."""


# -- mutations of the JSON tree ---------------------------------------------------------------------
def _places(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value below the root."""
    places = [path] if path else []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        places.extend(_places(value, (*path, key)))
    return places


def _at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _delete(tree: Any, path: tuple[Any, ...], rng: random.Random) -> None:
    del _at(tree, path[:-1])[path[-1]]


def _replace(tree: Any, path: tuple[Any, ...], rng: random.Random) -> None:
    _at(tree, path[:-1])[path[-1]] = copy.deepcopy(rng.choice(VALUES))


def _renumber(tree: Any, path: tuple[Any, ...], rng: random.Random) -> None:
    """A number nudged or blown up: an id made another op's or undefined, a dim or a count huge."""
    parent, key = _at(tree, path[:-1]), path[-1]
    if isinstance(parent[key], int) and not isinstance(parent[key], bool):
        parent[key] = rng.choice([parent[key] - 1, parent[key] + 1, -parent[key], parent[key] * 10**6])


def _move(tree: Any, path: tuple[Any, ...], rng: random.Random) -> None:
    """An op (or any list item) moved elsewhere in its list, or repeated there."""
    parent, key = _at(tree, path[:-1]), path[-1]
    if isinstance(parent, list):
        item = parent[key] if rng.random() < 0.5 else parent.pop(key)
        parent.insert(rng.randrange(len(parent) + 1), copy.deepcopy(item))


def _graft(tree: Any, path: tuple[Any, ...], rng: random.Random) -> None:
    """A value replaced by another part of the tree (a type where an attr was, an op where an id was)."""
    _at(tree, path[:-1])[path[-1]] = copy.deepcopy(_at(tree, rng.choice(_places(tree))))


MUTATIONS = (_delete, _replace, _replace, _renumber, _renumber, _move, _graft)


def _case(index: int) -> tuple[str, str, str]:
    """(label, model name, mutated JSON text) of case ``index``."""
    rng = random.Random(SEED * 1_000_003 + index)
    name = rng.choice(MODELS)
    tree = json.loads((FIXTURES / name / "model.json").read_text())
    names = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        mutation = rng.choice(MUTATIONS)
        mutation(tree, rng.choice(_places(tree)), rng)
        names.append(mutation.__name__.lstrip("_"))
    text = json.dumps(tree).replace(json.dumps(DEEP), "[" * 1000 + "]" * 1000)
    return f"#{index} {name}: {', '.join(names)}", name, text


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """A copy of each fixture model whose model.json each case replaces."""
    made = {}
    for name in MODELS:
        made[name] = tmp_path / name
        made[name].mkdir()
        shutil.copy(FIXTURES / name / "model.pdiparams", made[name])
    return made


def test_mutated_programs_load_or_fail_with_a_halfway_error(folders):
    tally = Tally("pir fuzz")
    for index in range(CASES):
        label, name, text = _case(index)
        folder = folders[name]
        (folder / "model.json").write_text(text)
        before = snapshot(folder)
        tally.add(label, *outcome(lambda: load_pir(folder), TIMEOUT_S), changed=snapshot(folder) != before)
    tally.check(SEED)
