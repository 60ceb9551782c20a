"""Session-wide fixtures; the servers behind them, and skip-or-fail, are in tests/services.py."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from savegame import Store, stores
from savegame.effects import _tools
from savegame.models import LocalServer
from tests import services

# pytest imports readline before it reads this file (capture's readline workaround), and
# GNU readline exports the terminal's size as COLUMNS and LINES (80 without a terminal,
# from TERM's terminfo): the CLI's tables would then wrap at the width of the terminal
# the suite ran in, in-process for xdist's workers (spawned with it) and in every
# subprocess. The suite's output must not depend on who runs it, or in what terminal.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
    os.unsetenv(_name)

SLOW_DIRS = ("crash", "fleet", "examples")
"""Suites of real processes (SIGKILLed runs, workers on network hosts, the examples run
as scripts): CI runs them in a step of their own (``python -m pytest -m slow``), so
the default run stays a few minutes on two cores."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (the Quick start's): one worker more than the cores this process may use.

    About a quarter of the default suite's time its workers wait on processes they
    started (CLIs, crash and Ctrl-C children, servers) and on fsyncs: on 2 cores, 2
    workers kept 1.46 of them busy and took 6m23s, 3 took 5m43s, 4 took 5m47s.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides where it is set (xdist's own hook)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


@pytest.hookimpl(tryfirst=True)  # before -m deselects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        parts = item.path.relative_to(here).parts if item.path.is_relative_to(here) else ()
        if parts and parts[0] in SLOW_DIRS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _tools_registered_by_a_test_stay_in_it() -> Iterator[None]:
    """Tools register by name, process-wide (so a compensation resolves in a fresh
    process). A test that defines its own ``pay`` must not change which ``pay`` the
    next test's approvals and compensations find: every file passes alone or together."""
    before = dict(_tools._registry)
    yield
    _tools._registry.clear()
    _tools._registry.update(before)


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Store]:
    """Every store any part of savegame opens from a URL (or None) during the test, in order."""
    importlib.import_module("savegame.client")  # what opens stores, imported before the count
    real = stores.open_store
    seen: list[Store] = []

    def counting(url: Any = None, *, create: bool = True) -> Store:
        store = real(url, create=create)
        if store is not url:
            seen.append(store)
        return store

    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if name.startswith("savegame") and getattr(module, "open_store", None) is real:
            monkeypatch.setattr(module, "open_store", counting)
    return seen


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.S3Server]:
    """A SeaweedFS ``weed mini`` with one bucket, answering S3 on a free port of 127.0.0.1."""
    yield from services.s3_server(tmp_path_factory.mktemp("seaweedfs"))


@pytest.fixture(scope="session")
def local_model() -> Iterator[LocalServer]:
    """SmolLM2-135M on the CPU behind llama.cpp's server, speaking OpenAI's and Anthropic's
    protocols on a free port of 127.0.0.1; ``.requests()`` is its own count of requests."""
    yield from services.local_model()


@pytest.fixture(params=services.RUNTIME_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each runtime backend: what runs on it must not depend on which."""
    with services.scratch_store(request.param, tmp_path) as handle:
        yield handle


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of an SQLite file that does not exist yet."""
    return f"sqlite:///{tmp_path / 'savegame.db'}"
