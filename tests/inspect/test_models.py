"""A run's model usage from its journal: per model, cached tokens, unknown prices kept
apart from known costs, a replay counted once, a fork's reused calls not paid again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from savegame import END, StepContext, Store, Workflow, run
from savegame.agent import ModelResponse, ToolSpec
from savegame.client import fork, history, model_usage
from savegame.errors import NotFoundError


class Fixed:
    def __init__(self, name: str, response: ModelResponse) -> None:
        self.name = name
        self.response = response

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        return self.response


BIG = Fixed(
    "big", ModelResponse("a", input_tokens=1000, output_tokens=50, cost_usd=0.01, cached_tokens=800)
)
LOCAL = Fixed("local", ModelResponse("b", input_tokens=10, output_tokens=5, cost_usd=None))

wf = Workflow("two-models")


@wf.step(entry=True)
def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    ctx.llm(BIG, [{"role": "user", "content": "plan"}])
    ctx.llm(LOCAL, [{"role": "user", "content": "draft"}])
    return {"asked": 1}, "again"


@wf.step
def again(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    ctx.llm(BIG, [{"role": "user", "content": "check"}])
    return {"asked": 2}, END


def test_usage_and_cost_per_model(store: Store) -> None:
    result = run(wf, {}, store=store)
    usage = model_usage(result.run_id, store=store)
    big, local = usage.models["big"], usage.models["local"]
    assert (big.calls, big.input_tokens, big.output_tokens, big.cached_tokens) == (
        2,
        2000,
        100,
        1600,
    )
    assert big.cost_usd == pytest.approx(0.02) and big.unpriced_calls == 0
    # A price nobody knows is not a zero: None, and counted as unpriced.
    assert (local.calls, local.cost_usd, local.unpriced_calls) == (1, None, 1)
    # One unknown price makes the total unknown, not the sum of the others.
    assert usage.total.calls == 3 and usage.total.cost_usd is None
    assert usage.total.unpriced_calls == 1
    # The run's own counters say the same.
    assert result.usage.llm_calls == 3 and result.usage.cost_usd is None


def test_a_forks_reused_calls_are_the_origins_to_pay(store: Store) -> None:
    origin = run(wf, {}, store=store)
    first = [cp for cp in history(origin.run_id, store=store) if cp.node == "ask"][-1]
    forked = fork(first.checkpoint_id, store=store, workflow=wf)
    usage = model_usage(forked.run_id, store=store)
    assert usage.total.calls == 0 and usage.models == {}
    assert usage.reused.calls == 1 and usage.reused.cost_usd == pytest.approx(0.01)


def test_an_unknown_run_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        model_usage("nope", store=store)
