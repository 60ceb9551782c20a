"""The UI's tests: the real app over a real SQLite file, through Starlette's test client,
and (``test_browser*.py``) a real uvicorn server driven by Chromium (the ``browser`` and
``page`` fixtures: Debian's Chromium through Playwright, skipped where either is missing
unless services are required)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from savegame import open_store
from savegame.ui import create_app
from tests import services

ORIGIN = "http://127.0.0.1:8765"
CHROMIUM = os.environ.get("SAVEGAME_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture
def ui_url(tmp_path: Path) -> str:
    """An SQLite store that exists (empty): the UI opens stores, it never creates one."""
    url = f"sqlite:///{tmp_path / 'ui.db'}"
    open_store(url).close()
    return url


@pytest.fixture
def client(ui_url: str) -> Iterator[Callable[..., TestClient]]:
    """``client(**create_app options)``: a test client of a fresh app over ``ui_url``."""
    made: list[TestClient] = []

    def make(**options: Any) -> TestClient:
        app = create_app(ui_url, **options)
        c = TestClient(app, base_url=ORIGIN)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def csrf_of(c: TestClient) -> str:
    """The CSRF token a page gave this browser (its cookie), after one GET."""
    if "sg_csrf" not in c.cookies:
        c.get("/runs")
    return str(c.cookies["sg_csrf"])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        services.unusable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        services.unusable(f"playwright is not installed: {exc}")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(10_000)
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.dialogs = dialogs
    yield tab
    context.close()
