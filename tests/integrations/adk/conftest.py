"""The local provider the ADK agent's Gemini client talks to, fresh for each test, and
the stores its runs are kept in: an SQLite file and a PostgreSQL schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import provider, services


@pytest.fixture(scope="module")
def _server() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


@pytest.fixture
def fake(_server: provider.FakeProvider) -> Iterator[provider.FakeProvider]:
    _server.reset()
    yield _server
    _server.reset()


@pytest.fixture(params=services.SQL_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store's URL: an SQLite file, a PostgreSQL schema."""
    with services.BACKENDS[request.param](tmp_path) as found:
        yield found


HERE = Path(__file__).parent

# google-genai subclasses aiohttp's ClientSession for its async client, which aiohttp
# warns about on first use; the suite turns warnings into errors.
_GENAI_AIOHTTP = "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.filterwarnings(_GENAI_AIOHTTP))
