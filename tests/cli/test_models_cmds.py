"""``savegame models RUN``: a run's model calls with tokens and cost, and per-model totals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from savegame import END, StepContext, Workflow, run
from savegame.agent import ModelResponse, ToolSpec


class Fixed:
    """A model answering one fixed response: its name, tokens and price as given."""

    def __init__(self, name: str, tokens: tuple[int, int], cost: float | None) -> None:
        self.name, self.tokens, self.cost = name, tokens, cost

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        prompt, completion = self.tokens
        return ModelResponse(
            content=f"{self.name} says hi", input_tokens=prompt, output_tokens=completion,
            cost_usd=self.cost, model=f"{self.name}-2025", stop_reason="stop",
        )  # fmt: skip


def _run(store: str) -> str:
    small = Fixed("small", (100, 10), 0.0005)
    big = Fixed("big", (1000, 50), None)  # nobody prices it
    wf = Workflow("chatty")

    @wf.step(entry=True)
    def talk(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        for model in (small, big, small):
            ctx.llm(model, [{"role": "user", "content": f"hello {model.name}"}])
        return {"done": True}, END

    return run(wf, {}, store=store).run_id


def test_models_json_lists_each_call_and_totals_per_model(cli: Any, store: str) -> None:
    run_id = _run(store)
    out = cli("models", run_id, "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    data = out.json()
    assert data["run_id"] == run_id
    assert [(c["model"], c["input_tokens"], c["cost_usd"]) for c in data["calls"]] == [
        ("small", 100, 0.0005),
        ("big", 1000, None),
        ("small", 100, 0.0005),
    ]
    assert {c["response_model"] for c in data["calls"]} == {"small-2025", "big-2025"}
    assert len({c["request_id"] for c in data["calls"]}) == 3
    assert data["models"]["small"] == {
        "calls": 2, "input_tokens": 200, "output_tokens": 20, "cached_tokens": 0,
        "cost_usd": 0.001, "unpriced_calls": 0,
    }  # fmt: skip
    assert data["models"]["big"]["cost_usd"] is None
    assert data["models"]["big"]["unpriced_calls"] == 1
    assert data["total"]["calls"] == 3 and data["total"]["input_tokens"] == 1200
    assert data["total"]["cost_usd"] is None and data["total"]["unpriced_calls"] == 1
    # The run's usage says the same: unknown, not the priced calls' 0.001.
    shown = cli("show", run_id, "--store", store, "--json").json()
    assert shown["usage"]["cost_usd"] is None and shown["usage"]["llm_calls"] == 3
    assert "cost unknown" in cli("show", run_id, "--store", store).stdout


def test_models_table_shows_calls_unknown_prices_and_totals(cli: Any, store: str) -> None:
    run_id = _run(store)
    out = cli("models", run_id, "--store", store)
    assert out.exit_code == 0, out.stderr
    text = out.stdout
    assert f"run {run_id}: 3 model calls" in text
    assert text.count("small-2025") == 2 and "unknown" in text
    totals = text[text.index("per model") :]
    big_row = next(line for line in totals.splitlines() if line.strip().startswith("big"))
    assert big_row.split()[1:] == ["1", "1000", "50", "0", "unknown"]
    total_row = next(line for line in totals.splitlines() if line.strip().startswith("total"))
    assert total_row.split()[1:] == [
        "3",
        "1200",
        "70",
        "0",
        "unknown",
        "(1",
        "of",
        "3",
        "unpriced)",
    ]


def test_models_of_a_run_without_model_calls_says_so(cli: Any, store: str) -> None:
    wf = Workflow("quiet")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    run_id = run(wf, {}, store=store).run_id
    out = cli("models", run_id, "--store", store)
    assert out.exit_code == 0 and f"run {run_id} made no model calls" in out.stdout
    assert cli("models", run_id, "--store", store, "--json").json()["calls"] == []


def test_models_of_an_unknown_run_names_it_and_exits_3(cli: Any, store: str) -> None:
    out = cli("models", "nope", "--store", store)
    assert out.exit_code == 3
    assert "no run 'nope'" in out.stderr
