"""@tool(effect="read", durable=True): a read's result is in the store when the call returns.

The step looks at the journal through a second connection to the same SQLite file
while it is still running (its checkpoint not written): a durable read is there, a
plain read is not yet (it is saved with the checkpoint). The kill -9 version is in
tests/crash/test_llm_crash.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from savegame import END, StepContext, Workflow, run, tool
from savegame.client import list_effects


@tool(effect="read", durable=True)
def paid_search(query: str) -> list[str]:
    return [f"hit for {query}"]


@tool(effect="read")
def cheap_lookup(key: str) -> str:
    return f"value of {key}"


def test_a_durable_read_is_committed_when_it_returns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    seen: list[list[str]] = []
    wf = Workflow("durable-reads")

    @wf.step(entry=True)
    def look(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(cheap_lookup, "a")
        seen.append(sorted(e.name for e in list_effects(ctx.run_id, store=url)))
        ctx.call(paid_search, "b")  # commits the buffered read before it, then itself
        seen.append(sorted(e.name for e in list_effects(ctx.run_id, store=url)))
        ctx.call(cheap_lookup, "c")
        seen.append(sorted(e.name for e in list_effects(ctx.run_id, store=url)))
        return {}, END

    result = run(wf, {}, run_id="r", store=url)
    assert seen == [
        [],
        ["cheap_lookup", "paid_search"],
        ["cheap_lookup", "paid_search"],
    ]
    after = [(e.name, e.status.value, e.result) for e in list_effects("r", store=url)]
    assert sorted(after) == [
        ("cheap_lookup", "done", "value of a"),
        ("cheap_lookup", "done", "value of c"),
        ("paid_search", "done", ["hit for b"]),
    ]
    assert result.usage.tool_calls == 3
