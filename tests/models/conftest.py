"""The local provider every adapter test talks to, fresh for each test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import provider

# LiteLLM's import fetches its cost map from the network unless told not to; the tests
# never go online.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="module")
def _server() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


@pytest.fixture
def fake(_server: provider.FakeProvider) -> Iterator[provider.FakeProvider]:
    _server.reset()
    yield _server
    _server.reset()
