"""The local provider every adapter test talks to, fresh for each test."""

from __future__ import annotations

import asyncio
import os
import warnings
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


@pytest.fixture(autouse=True)
def _no_event_loop_left_behind() -> Iterator[None]:
    """LiteLLM's sync path calls ``asyncio.get_event_loop()``, which makes the main thread
    a loop nobody closes; closed here, or its ResourceWarning lands in a later test."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            return  # none is set
    loop.close()
    asyncio.set_event_loop(None)
