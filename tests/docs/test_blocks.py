"""Every python block of the README and the docs runs as a reader would run it, unless
its marker says which test runs it or that it is a fragment (tests/docs/pages.py has
the convention). A snippet the API moved away from fails here, not in a reader's hands."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.docs.pages import KINDS, ROOT, Block, all_blocks, program, run_example

BLOCKS = all_blocks()
PYTHON = [b for b in BLOCKS if b.lang == "python"]

FRAGMENTS = 3
"""How many python blocks are marked ``fragment``: a new one is a choice, made here."""


def runnable() -> list[Block]:
    return [b for b in PYTHON if b.kind() in ("run", "continues", "store")]


@pytest.fixture
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    backend = request.param
    if backend is None:
        yield None
        return
    with services.BACKENDS[backend](tmp_path) as url:
        yield url


@pytest.mark.parametrize(
    ("block", "fresh_store"),
    [pytest.param(b, b.option("store"), id=b.where) for b in runnable()],
    indirect=["fresh_store"],
)
def test_the_block_runs_as_written(block: Block, fresh_store: str | None, tmp_path: Path) -> None:
    env = {"SAVEGAME_STORE": fresh_store} if fresh_store else {}
    out = run_example(tmp_path, program(block), env=env, name=block.title or "example.py")
    assert out.returncode == 0, f"{block.where} ({block.section}):\n{out.stderr}"


def test_every_marker_is_known() -> None:
    unknown = [
        f"{b.where}: {' '.join(b.marker)}" for b in BLOCKS if b.marker and b.kind() not in KINDS
    ]
    assert unknown == [], "markers the harness does not know (tests/docs/pages.py)"
    stores = {b.option("store") for b in BLOCKS if b.kind() == "store"}
    assert stores <= set(services.BACKENDS), stores


def test_a_block_run_by_its_own_test_is_read_there() -> None:
    claimed = [b for b in BLOCKS if b.kind() == "by"]
    assert claimed, "no block says a test of its own runs it"
    for block in claimed:
        assert len(block.marker) == 2, f"{block.where}: 'by' names one test file"
        test = ROOT / block.marker[1]
        assert test.is_file(), f"{block.where}: {block.marker[1]} does not exist"
        assert block.page in test.read_text(), (
            f"{block.where}: {block.marker[1]} does not read {block.page}"
        )


def test_the_fragments_are_few_and_listed() -> None:
    fragments = [f"{b.where} ({b.section})" for b in PYTHON if b.kind() == "fragment"]
    assert len(fragments) == FRAGMENTS, "python blocks not run:\n" + "\n".join(fragments)


def test_every_python_block_is_fenced_as_python() -> None:
    # A block fenced ```py or ```python3 would be left out of every test above.
    odd = [b.where for b in BLOCKS if re.fullmatch(r"py|python3|pycon|ipython", b.lang)]
    assert odd == []
