"""The local provider the Agents SDK talks to, fresh for each test; the SDK's trace
export (to OpenAI, with the key in the environment) is off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import set_tracing_disabled

from tests import provider, services

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def _server() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


@pytest.fixture
def fake(_server: provider.FakeProvider) -> Iterator[provider.FakeProvider]:
    _server.reset()
    yield _server
    _server.reset()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store of each backend the integration is checked on: an SQLite file, a
    PostgreSQL schema (tests/services.py: skipped without the server, failed in CI)."""
    with services.BACKENDS[request.param](tmp_path) as found:
        yield found


@pytest.fixture(params=["responses", "chat"])
def api(request: pytest.FixtureRequest) -> str:
    """Which OpenAI API the SDK's model speaks: the Responses API (the SDK's default) or
    Chat Completions (``OpenAIChatCompletionsModel``)."""
    return str(request.param)
