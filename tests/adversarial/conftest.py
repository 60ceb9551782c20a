"""Fixtures for the attacks: a real store and raw write access to its tables.

An attacker here has what a leaked database password gives: they can read and
change any row, but hold no encryption key. ``Raw`` runs SQL straight against
the store's own SQLite file or PostgreSQL schema, bypassing savegame.
``coarse_dir`` is a directory whose files are stamped by a coarse clock, where a
rewrite can leave a file's stat as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import services
from tests.adversarial.coarse_fs import ext2_mount

# The UI's own fixtures, for the attacks on who may decide from it (test_ui_roles.py).
from tests.ui.conftest import client, ui_url  # noqa: F401

TABLES = ("runs", "checkpoints", "effects", "blobs", "checkpoint_blobs")


@dataclass
class Raw:
    """A store's URL and a way around it."""

    url: str
    kind: str
    path: Path | None = None
    conninfo: str = ""
    schema: str = ""

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` (``?`` placeholders) and commit; return the rows it gave."""
        if self.kind == "sqlite":
            assert self.path is not None
            conn = sqlite3.connect(self.path)
            try:
                rows = conn.execute(sql, params).fetchall()
                conn.commit()
            finally:
                conn.close()
            return rows
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{self.schema}"')
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    def dump(self) -> bytes:
        """Every byte the store keeps: the SQLite file with its WAL, or every row."""
        if self.kind == "sqlite":
            assert self.path is not None
            return b"".join(
                Path(f"{self.path}{suffix}").read_bytes()
                for suffix in ("", "-wal", "-shm")
                if Path(f"{self.path}{suffix}").exists()
            )
        out = bytearray()
        for table in TABLES:
            for row in self.execute(f"SELECT * FROM {table}"):
                for value in row:
                    out += value if isinstance(value, (bytes, memoryview)) else repr(value).encode()
                    out += b"\n"
        return bytes(out)


@pytest.fixture(params=services.SQL_BACKENDS)
def raw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Raw]:
    if request.param == "sqlite":
        path = tmp_path / "attacked.db"
        yield Raw(f"sqlite:///{path}", "sqlite", path=path)
        return
    conninfo = services.postgres_conninfo()
    with services.postgres_schema("sgattack") as schema:
        yield Raw(services.postgres_url(schema), "postgres", conninfo=conninfo, schema=schema)


@pytest.fixture
def coarse_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on a loop-mounted ext2 filesystem: mtimes from the kernel's coarse
    clock (skipped, with the reason, where the machine refuses to mount one)."""
    with ext2_mount(tmp_path) as mnt:
        yield mnt
