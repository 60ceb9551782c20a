"""A store that cannot be opened is said the same way on every backend: one line naming
the store (its password hidden), exit 2, from a real ``savegame`` process."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.cli.conftest import clean_env


def _closed_port() -> int:
    # Bound, then closed: nothing listens there, and a connection is refused at once.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _savegame(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "savegame", *args],
        cwd=cwd,
        env={**clean_env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _backends(tmp_path: Path, port: int) -> dict[str, tuple[str, str]]:
    """Backend -> (the URL given, with a password where it takes one; the store as named)."""
    (tmp_path / "a-file").write_text("not a folder")
    unwritable = tmp_path / "a-file" / "runs.db"  # under a file: no one can make it, root neither
    objects = f"objects=s3://bucket/sg&endpoint=http://127.0.0.1:{port}"
    return {
        "redis": (f"redis://app:s3cret@127.0.0.1:{port}/0", f"redis://app@127.0.0.1:{port}/0"),
        "postgres": (
            f"postgresql://app:s3cret@127.0.0.1:{port}/prod",
            f"postgresql://app@127.0.0.1:{port}/prod",
        ),
        "sqlite": (f"sqlite:///{unwritable}", f"sqlite:///{unwritable}"),
        "objects": (
            f"sqlite:///{tmp_path / 'meta.db'}?{objects}",
            f"sqlite:///{tmp_path / 'meta.db'}?{objects}",
        ),
    }


@pytest.mark.parametrize("backend", ["redis", "postgres", "sqlite", "objects"])
def test_a_store_that_cannot_be_opened_is_named_and_exits_2(
    backend: str, tmp_path: Path, workflow_file: Path
) -> None:
    pytest.importorskip({"redis": "redis", "postgres": "psycopg", "objects": "boto3"}.get(
        backend, "sqlite3"
    ))  # fmt: skip
    given, named = _backends(tmp_path, _closed_port())[backend]
    # Credentials for the bucket, so what fails is reaching it (as for the servers).
    aws = {"AWS_ACCESS_KEY_ID": "sg-test", "AWS_SECRET_ACCESS_KEY": "sg-test-secret"}
    out = _savegame("run", f"{workflow_file.name}:wf", "--store", given, cwd=tmp_path, **aws)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert "s3cret" not in out.stderr and "Traceback" not in out.stderr
    [line] = out.stderr.splitlines()
    assert line.startswith(f"error: cannot open the store {named}: ")

    if backend not in ("redis", "postgres"):  # a reader makes no SQLite file: no store (exit 3)
        return
    out = _savegame("runs", "--store", given, "--json", cwd=tmp_path, **aws)
    said = orjson.loads(out.stderr)
    assert (out.returncode, said["code"], said["type"]) == (2, 2, "StoreUnavailableError")
    assert said["error"].startswith(f"cannot open the store {named}: ")
