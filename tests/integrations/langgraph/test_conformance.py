"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) against
SavegameSaver on every persistent backend of tests/services.py: FULL, that is every
base capability (put, put_writes, get_tuple, list, delete_thread) and every extended one
(delete_for_runs, copy_thread, prune) detected and passed."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from savegame.langgraph import SavegameSaver
from tests.services import BACKENDS


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_conformance_is_full(backend: str, tmp_path: Path) -> None:
    fresh = itertools.count()

    @checkpointer_test(name=f"SavegameSaver[{backend}]")
    async def saver() -> AsyncIterator[SavegameSaver]:
        # A fresh, empty store per capability suite, as the suite expects.
        place = tmp_path / str(next(fresh))
        place.mkdir()
        with BACKENDS[backend](place) as url:
            made = SavegameSaver(url)
            try:
                yield made
            finally:
                made.close()

    report = asyncio.run(validate(saver))
    failures = {
        name: result.failures for name, result in report.results.items() if not result.passed
    }
    assert failures == {}
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    assert report.conformance_level() == "FULL"
    counts = {name: result.tests_passed for name, result in report.results.items()}
    base = ("put", "put_writes", "get_tuple", "list", "delete_thread")
    assert sum(counts[name] for name in base) == 58
    assert sum(n for name, n in counts.items() if name not in base) == 23
