"""Custom steps that pay for a model call and for a costly read, for the crash tests.

The bill is a file the test owns (``SAVEGAME_BILL``): the model and the search tool
append a line to it each time they really run, so the test counts what was paid
across process deaths. ``SAVEGAME_HOOK=<name>`` makes the process print
``HOOK <name>`` and block on stdin there, so the parent's SIGKILL lands exactly
after the call returned and before the step's checkpoint:
``ask:after_llm``, ``search:after_read``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from savegame import END, StepContext, Workflow, tool
from savegame.agent import ModelResponse, ToolSpec


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def pay(what: str) -> None:
    with open(os.environ["SAVEGAME_BILL"], "a") as bill:
        bill.write(what + "\n")


class CountingModel:
    """A model that writes each (paid) call to the bill."""

    name = "counting"

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        pay("llm")
        return ModelResponse(
            content=f"answer to {messages[-1]['content']}",
            input_tokens=120,
            output_tokens=30,
            cost_usd=0.25,
        )


MODEL = CountingModel()

ask = Workflow("llm-crash")


@ask.step(entry=True)
def question(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    response = ctx.llm(MODEL, [{"role": "user", "content": state["question"]}])
    hook("ask:after_llm")
    return {"answer": response.content}, "done"


@ask.step
def done(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"finished": True}, END


@tool(effect="read", durable=True)
def web_search(query: str) -> list[str]:
    """A read that costs money: durable when it returns."""
    pay("search")
    return [f"result for {query}"]


@tool(effect="read")
def lookup_cache(key: str) -> str:
    """A cheap read: buffered until the next checkpoint."""
    pay("cache")
    return f"cached {key}"


search = Workflow("search-crash")


@search.step(entry=True)
def look(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    found = ctx.call(web_search, state["question"])
    cached = ctx.call(lookup_cache, state["question"])
    hook("search:after_read")
    return {"found": found, "cached": cached}, END
