"""Workflows of one name in two releases, importable by a worker (``module:attr``)."""

from __future__ import annotations

from typing import Any

from savegame import END, StepContext, Workflow

V1 = Workflow("greet", version="v1")


@V1.step(entry=True)
def hello(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"said": "hello", "by": "v1"}, END


V2 = Workflow("greet", version="v2")


@V2.step(entry=True, name="hello")
def hello_v2(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"said": "hi", "by": "v2"}, END


DERIVED = Workflow("derived")


@DERIVED.step(entry=True)
def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"n": state.get("n", 0) + 1}, END
