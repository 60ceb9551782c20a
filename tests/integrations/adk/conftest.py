"""The local provider the ADK agent talks to, fresh for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import provider


@pytest.fixture(scope="module")
def _server() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


@pytest.fixture
def fake(_server: provider.FakeProvider) -> Iterator[provider.FakeProvider]:
    _server.reset()
    yield _server
    _server.reset()
