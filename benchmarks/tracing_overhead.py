"""What tracing costs a step: the same run without OpenTelemetry installed (the hook a
no-op), with the API and no tracer provider (non-recording spans), and with the SDK
recording every span into its in-memory exporter.

    python benchmarks/tracing_overhead.py [--steps 2000] [--repeat 5]

Each mode runs in a fresh interpreter; a run of N steps on the memory store, one tool
call per step, a checkpoint every step. Prints the median microseconds per step of the
repeats and the ratio to the untraced run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import json, sys, time
    mode, steps, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if mode == "absent":
        sys.modules["opentelemetry"] = None
    elif mode == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    from savegame import END, MemoryStore, Workflow, run, tool

    @tool
    def look(n):
        return n

    wf = Workflow("bench")

    @wf.step(entry=True)
    def tick(state, ctx):
        n = ctx.call(look, state.get("n", 0) + 1)
        return {"n": n}, ("tick" if n < steps else END)

    out = []
    for _ in range(repeat):
        began = time.perf_counter()
        run(wf, {}, store=MemoryStore())
        out.append((time.perf_counter() - began) / steps * 1e6)
        if mode == "sdk":
            exporter.clear()
    print(json.dumps(out))
    """
)

MODES = {
    "absent": "OpenTelemetry not installed (hook off)",
    "api": "API installed, no tracer provider",
    "sdk": "SDK provider, in-memory exporter",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    medians: dict[str, float] = {}
    for mode in MODES:
        print(f"running {mode} ...", file=sys.stderr)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(args.steps), str(args.repeat)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        medians[mode] = statistics.median(json.loads(done.stdout))
    print(f"| {args.steps} steps, 1 tool call each, memory store | us per step | vs. hook off |")
    print("|---|---:|---:|")
    for mode, label in MODES.items():
        print(f"| {label} | {medians[mode]:.1f} | {medians[mode] / medians['absent']:.2f}x |")


if __name__ == "__main__":
    main()
