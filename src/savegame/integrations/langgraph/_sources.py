"""The LangGraph databases a migration reads: a SqliteSaver file, a PostgresSaver URL.

Checkpoints and their writes are read by LangGraph's own savers (``get_tuple``,
``list``), so every format version they read is read as they read it. What a saver
has no method for is asked of its tables directly, read-only: the thread ids, a
thread's checkpoint ids (to write them oldest first without loading each twice),
each pending write's ``task_path`` (LangGraph orders a step's writes by it, and a
checkpoint tuple does not carry it) and the bytes a thread takes.

Nothing here writes: the SQLite file is opened ``mode=ro`` (LangGraph's ``setup``, which
creates tables and switches the journal to WAL, is never run) and the PostgreSQL
session is ``default_transaction_read_only``.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from savegame.errors import ConfigurationError
from savegame.integrations.langgraph import _guard
from savegame.redaction import redact, redact_url

#: (thread's namespace, checkpoint id, task id) -> the task path of its writes.
TaskPaths = dict[tuple[str, str, str], str]


def _missing(package: str, exc: ImportError) -> ConfigurationError:
    return ConfigurationError(f"reading this source needs {package}: pip install {package} ({exc})")


class Source:
    """A LangGraph database opened read-only, with its saver."""

    label: str
    """The source as given, without a password."""
    saver: Any
    """The LangGraph saver over it (``get_tuple``, ``list``)."""

    _threads = "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
    _ids = (
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = {p} "
        "ORDER BY checkpoint_id"
    )
    _paths = ""
    _bytes: tuple[str, ...] = ()

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def threads(self) -> list[str]:
        return [str(row[0]) for row in self._rows(self._threads)]

    def checkpoints(self, thread_id: str) -> list[tuple[str, str]]:
        """The thread's (namespace, checkpoint id), oldest first: parents before children."""
        return [(str(ns), str(cid)) for ns, cid in self._rows(self._ids, (thread_id,))]

    def task_paths(self, thread_id: str) -> TaskPaths:
        if not self._paths:
            return {}
        rows = self._rows(self._paths, (thread_id,))
        return {(str(ns), str(cid), str(task)): str(path) for ns, cid, task, path in rows}

    def thread_bytes(self, thread_id: str) -> int:
        """The bytes of the thread's rows as stored: checkpoints, their values, their writes."""
        return sum(int(self._rows(sql, (thread_id,))[0][0] or 0) for sql in self._bytes)

    def database_bytes(self) -> int | None:
        return None

    def close(self) -> None:
        raise NotImplementedError


class SqliteSource(Source):
    _paths = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, task_path FROM writes WHERE thread_id = ?"
    )
    # length() of a BLOB reads its size from the row header, not the value (SqliteSaver
    # writes bytes to all three; a TEXT metadata of an old file counts characters).
    _bytes = (
        "SELECT sum(length(checkpoint) + coalesce(length(metadata), 0))"
        " FROM checkpoints WHERE thread_id = ?",
        "SELECT sum(length(value)) FROM writes WHERE thread_id = ?",
    )

    def __init__(self, path: Path, serde: Any) -> None:
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError as exc:
            raise _missing("langgraph-checkpoint-sqlite", exc) from None
        if not path.is_file():
            raise ConfigurationError(f"source {path}: no such file")
        self.path = path
        self.label = str(path)
        uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        self._ids = self._ids.format(p="?")
        tables = {
            str(r[0]) for r in self._rows("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not {"checkpoints", "writes"} <= tables:
            self._conn.close()
            what = "a savegame store" if "runs" in tables else "not a LangGraph SqliteSaver file"
            raise ConfigurationError(
                f"source {path} is {what}: it has no `checkpoints` and `writes` tables"
            )
        columns = {str(r[1]) for r in self._rows("PRAGMA table_info(writes)")}
        self.saver = SqliteSaver(self._conn, serde=serde)
        # LangGraph's setup() creates tables and switches the file to WAL: writes, never
        # run on a source. A file from before task paths is read as LangGraph's own setup
        # reads a read-only one (its private flag; "" paths).
        self.saver.is_setup = True
        if "task_path" not in columns:
            self.saver._has_task_path = False
            self._paths = ""

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._conn.execute(sql, tuple(params)).fetchall())

    def database_bytes(self) -> int | None:
        wal = self.path.with_name(self.path.name + "-wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

    def close(self) -> None:
        self._conn.close()


class PostgresSource(Source):
    _paths = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, task_path FROM checkpoint_writes "
        "WHERE thread_id = %s"
    )
    # pg_column_size: the bytes a value takes as stored (after TOAST compression).
    _bytes = (
        "SELECT sum(pg_column_size(checkpoint) + pg_column_size(metadata)) FROM checkpoints "
        "WHERE thread_id = %s",
        "SELECT sum(pg_column_size(blob)) FROM checkpoint_blobs WHERE thread_id = %s",
        "SELECT sum(pg_column_size(blob)) FROM checkpoint_writes WHERE thread_id = %s",
    )
    _tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")

    def __init__(self, url: str, serde: Any) -> None:
        try:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg import conninfo
            from psycopg.rows import dict_row
        except ImportError as exc:
            raise _missing("langgraph-checkpoint-postgres", exc) from None
        self.label = redact_url(url)
        try:
            params = conninfo.conninfo_to_dict(url)
            # Read-only for the session: whatever runs on this connection cannot write.
            params["options"] = f"{params.get('options') or ''} -c default_transaction_read_only=on"
            self._conn = psycopg.connect(
                conninfo.make_conninfo("", **params),
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
            )
        except (psycopg.ProgrammingError, psycopg.OperationalError) as exc:
            # Not chained: libpq quotes a password it could not parse.
            raise ConfigurationError(
                f"cannot read source {self.label}: {redact(str(exc), url)}"
            ) from None
        self._ids = self._ids.format(p="%s")
        found = self._rows(
            "SELECT " + ", ".join(f"to_regclass('{t}') IS NOT NULL" for t in self._tables)
        )[0]
        if not all(found):
            self._conn.close()
            raise ConfigurationError(
                f"source {self.label} has no LangGraph PostgresSaver tables "
                f"({', '.join(self._tables)}) on its search_path"
            )
        self.saver = PostgresSaver(self._conn, serde=serde)

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._conn.cursor() as cur:
            cur.execute(sql, tuple(params))
            return [tuple(row.values()) for row in cur.fetchall()]

    def database_bytes(self) -> int | None:
        sql = " + ".join(f"pg_total_relation_size(to_regclass('{t}'))" for t in self._tables)
        return int(self._rows(f"SELECT {sql}")[0][0])

    def close(self) -> None:
        self._conn.close()


def open_source(source: str, allowed: Iterable[type[Any]]) -> Source:
    """A SqliteSaver file (a path or ``sqlite:///path``) or a PostgresSaver URL, read-only.

    Raises:
        ConfigurationError: no such file, the driver package is missing, or the
            database holds no LangGraph checkpoint tables.
    """
    serde = _guard.serializer(allowed)
    scheme = source.partition("://")[0].lower() if "://" in source else ""
    if scheme in ("postgresql", "postgres"):
        return PostgresSource(source, serde)
    if scheme == "sqlite":
        return SqliteSource(Path(source.partition("://")[2][1:] or "."), serde)
    if scheme:
        raise ConfigurationError(
            f"source {source!r}: a SqliteSaver file (path or sqlite:///path) or a "
            "PostgresSaver URL (postgresql://...)"
        )
    return SqliteSource(Path(os.path.expanduser(source)), serde)
