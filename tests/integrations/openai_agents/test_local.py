"""A durable Agents SDK run on a real model (SmolLM2-135M on the CPU, the
``local_model`` fixture, skipped without it), through the SDK's Chat Completions model:
SIGKILLed in the tool its model asked for, resumed in another process, each model
request counted once by the server itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from savegame.models import LocalServer
from tests.models.test_local import killed_and_resumed


@pytest.mark.slow
@pytest.mark.crash
def test_a_kill_mid_tool_round_sends_each_request_once(
    local_model: LocalServer, tmp_path: Path
) -> None:
    killed_and_resumed(local_model, tmp_path, "openai-agents")
