"""The local provider the Agents SDK talks to, fresh for each test; the SDK's trace
export (to OpenAI, with the key in the environment) is off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agents import set_tracing_disabled

from tests import provider

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def _server() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


@pytest.fixture
def fake(_server: provider.FakeProvider) -> Iterator[provider.FakeProvider]:
    _server.reset()
    yield _server
    _server.reset()
