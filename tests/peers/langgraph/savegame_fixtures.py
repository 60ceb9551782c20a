"""SavegameSaver as the checkpointer of LangGraph's own test suite.

``run.py`` appends one line to the suite's ``tests/conftest.py`` that imports the two
fixtures below, which then stand for LangGraph's ``sync_checkpointer`` and
``async_checkpointer``: every graph test that takes a checkpointer runs once per store
of :data:`KINDS`, a SQLite file and PostgreSQL with a fresh schema. Importing this
module also points the prune tests' PostgresSaver factories at SavegameSaver
(:func:`_point_prune_tests`), since ``test_prune_postgres.py`` imports them by name.

Not a test module of savegame's (pytest never collects it there): the suite imports it
from ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
import pytest

from savegame.integrations.langgraph import SavegameSaver

POSTGRES = os.environ.get("SAVEGAME_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
#: The stores each checkpointer test runs on (``SAVEGAME_LANGGRAPH_STORES`` narrows them).
KINDS = os.environ.get("SAVEGAME_LANGGRAPH_STORES", "savegame_sqlite,savegame_postgres").split(",")


@contextmanager
def saver(kind: str) -> Iterator[SavegameSaver]:
    """A SavegameSaver on a fresh store of ``kind``, removed afterwards."""
    if kind == "savegame_sqlite":
        with tempfile.TemporaryDirectory() as folder:
            opened = SavegameSaver(f"sqlite:///{folder}/langgraph.db")
            try:
                yield opened
            finally:
                opened.close()
        return
    if kind != "savegame_postgres":
        raise ValueError(f"unknown store {kind!r}: savegame_sqlite or savegame_postgres")
    # Not uuid4: LangGraph's ``deterministic_uuids`` fixture patches it for the test's ids.
    schema = "lgsuite_" + os.urandom(8).hex()
    opened = SavegameSaver(f"{POSTGRES}{'&' if '?' in POSTGRES else '?'}schema={schema}")
    try:
        yield opened
    finally:
        opened.close()
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=KINDS)
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[SavegameSaver]:
    with saver(request.param) as opened:
        yield opened


@pytest.fixture(params=KINDS)
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[SavegameSaver]:
    with saver(request.param) as opened:
        yield opened


def _point_prune_tests() -> None:
    """The prune tests take PostgresSaver factories by name (three sync, three async):
    the first of each runs SavegameSaver on SQLite, the other two on PostgreSQL (the
    third's tests named ``savegame_postgres_again``)."""
    from tests import conftest_checkpointer as factories

    def sync(kind: str, name: str) -> Any:
        def opened() -> Any:
            return saver(kind)

        opened.__name__ = name  # the test's id: "[savegame_sqlite-sync]"
        return opened

    def async_(kind: str, name: str) -> Any:
        @asynccontextmanager
        async def opened() -> AsyncIterator[SavegameSaver]:
            with saver(kind) as made:
                yield made

        opened.__name__ = name
        return opened

    for suffix, kind in (
        ("", "savegame_sqlite"),
        ("_pipe", "savegame_postgres"),
        ("_pool", "savegame_postgres"),
    ):
        name = kind + ("_again" if suffix == "_pool" else "")
        setattr(factories, f"_checkpointer_postgres{suffix}", sync(kind, name))
        setattr(factories, f"_checkpointer_postgres_aio{suffix}", async_(kind, name))


_point_prune_tests()
