"""An agent whose context policy summarises older turns, its models savegame.models.OpenAI
talking to the test's local provider (``SAVEGAME_MODEL_URL``), for the crash test of a
journaled summary.

``SAVEGAME_HOOK=stream:mid`` makes the process print ``HOOK stream:mid`` and block on
stdin at the first chunk of the agent's streamed turn: after the summary call of the
same step was journaled, before the step's checkpoint, so the parent's SIGKILL lands
between the two.
"""

from __future__ import annotations

import os
import sys

from savegame import Agent
from savegame.agent import KeepLast
from savegame.models import OpenAI

URL = os.environ["SAVEGAME_MODEL_URL"]
MODEL = OpenAI("gpt-4o", base_url=URL, api_key="test-key")
SUMMARISER = OpenAI("gpt-4o-mini", base_url=URL, api_key="test-key")


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def on_chunk(piece: str) -> None:
    hook("stream:mid")


agent = Agent(
    "context-crash",
    MODEL,
    system="Be brief.",
    context=KeepLast(2, summarise=SUMMARISER),
    stream=on_chunk,
    backoff=0,
)
