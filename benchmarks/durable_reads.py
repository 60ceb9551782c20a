"""What a durable read costs against a buffered one (issue 13).

A buffered read (``@tool(effect="read")``) keeps its result in memory until the
next checkpoint writes it in the same transaction; a durable read
(``@tool(effect="read", durable=True)``) and a model call (``ctx.llm``) commit one
journal entry each before the step goes on. One step makes ``--calls`` calls of a
trivial tool (or a trivial model) on a fresh SQLite file (WAL, ``synchronous=FULL``,
savegame's default); the table gives the median time of one call as the step sees
it, and the whole run divided by the calls (the checkpoint that saves the buffered
reads included).

    python benchmarks/durable_reads.py --calls 200 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from workload import machine, markdown

from savegame import END, StepContext, Workflow, run, tool
from savegame.agent import ModelResponse, ToolSpec

BODY = "x" * 200


@tool(effect="read")
def buffered(i: int) -> str:
    return BODY


@tool(effect="read", durable=True)
def durable(i: int) -> str:
    return BODY


class Echo:
    name = "echo"

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        return ModelResponse(BODY, input_tokens=10, output_tokens=10)


def one_run(kind: str, calls: int) -> tuple[list[float], float]:
    """(seconds per call, seconds for the whole run) for ``calls`` calls of ``kind``."""
    per_call: list[float] = []
    wf = Workflow(f"bench-{kind}")
    model = Echo()
    call: Callable[[StepContext, int], Any] = {
        "buffered read": lambda ctx, i: ctx.call(buffered, i),
        "durable read": lambda ctx, i: ctx.call(durable, i),
        "model call (ctx.llm)": lambda ctx, i: ctx.llm(model, [{"role": "user", "content": i}]),
    }[kind]

    @wf.step(entry=True)
    def step(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        for i in range(calls):
            started = time.perf_counter()
            call(ctx, i)
            per_call.append(time.perf_counter() - started)
        return {"done": True}, END

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        started = time.perf_counter()
        run(wf, {}, store=url)
        total = time.perf_counter() - started
    return per_call, total


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="calls per run (default: 200)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per kind (default: 5)")
    args = parser.parse_args(argv)
    kinds = ("buffered read", "durable read", "model call (ctx.llm)")
    results: dict[str, tuple[float, float]] = {}
    for kind in kinds:
        calls: list[float] = []
        totals: list[float] = []
        for i in range(args.repeat):
            print(f"{kind}, run {i + 1}/{args.repeat}", file=sys.stderr, flush=True)
            per_call, total = one_run(kind, args.calls)
            calls += per_call
            totals.append(total / args.calls)
        results[kind] = (statistics.median(calls), statistics.median(totals))
    base_call, base_total = results["buffered read"]
    rows = [
        [
            kind,
            f"{call * 1e3:.3f}",
            f"{call / base_call:.1f}x",
            f"{total * 1e3:.3f}",
            f"{total / base_total:.1f}x",
        ]
        for kind, (call, total) in results.items()
    ]
    print(machine(f"{args.calls} calls per run, {args.repeat} runs"))
    print()
    header = ["call", "ms per call", "vs buffered", "ms per call, run incl.", "vs buffered"]
    print(markdown(header, rows, numeric_from=1))


if __name__ == "__main__":
    main()
