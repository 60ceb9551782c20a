"""The Redis durability warning: a log line, once per process and server; the CLI prints it
as one ``warning:`` line, with no source line of savegame's in it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import savegame
from savegame.stores.redis import durability
from tests import services

SRC = str(Path(savegame.__file__).resolve().parents[1])


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    return env


def test_the_cli_prints_the_durability_warning_as_one_line(tmp_path: Path) -> None:
    client = services.redis_client()
    try:
        persistent, problem = durability(client)
    finally:
        client.close()
    if persistent:
        pytest.skip("the test server runs with appendonly yes and a safe appendfsync")
    with services.redis_prefix() as prefix:
        out = subprocess.run(
            [sys.executable, "-m", "savegame", "runs", "--store", services.redis_url(prefix)],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no runs"
    [line] = out.stderr.splitlines()
    assert line.startswith("warning: Redis at ") and "may lose saved checkpoints" in line
    assert problem is not None and problem in line
    assert "warnings.warn" not in out.stderr and ".py:" not in out.stderr
