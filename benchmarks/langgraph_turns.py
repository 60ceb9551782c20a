"""A LangGraph thread as a chat application drives it: one ``invoke`` a user turn.

``langgraph_threads.py`` times many short threads and a few long runs of one ``invoke``
each. An application serving a conversation calls ``invoke`` once a turn instead, on the
same thread: LangGraph reads the thread's last checkpoint (``get_tuple``), decodes its
whole history, and goes on from the decoded messages. Two graphs:

* ``turns``: the user's message, then ``agent`` answers as a chat model's client returns
  an answer, with ``response_metadata`` and ``usage_metadata`` (two messages a turn);
* ``subgraph``: ``agent``, ``research`` (a compiled subgraph sharing the messages:
  ``search``, ``summarize``) and ``answer`` (five messages a turn), each subgraph call
  a new namespace with the thread's history as its input.

Both savers run the same turns on SQLite files, ``SqliteSaver`` as its documentation
opens it (WAL, ``synchronous`` FULL) and ``SavegameSaver`` (``--normal``: both at
``synchronous=NORMAL``, where what is left is CPU), turn by turn in alternation, so a
busy machine weighs on both alike. The table gives each quarter of the turns' mean
milliseconds an ``invoke`` (a mean, not a median: a turn that writes a keyframe, one in
several, is as much the application's wait as the others), and savegame's over
``SqliteSaver``'s.

    python benchmarks/langgraph_turns.py                       # ~3 minutes here
    python benchmarks/langgraph_turns.py --graphs turns --turns 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import langgraph_threads as lt

SAVERS = {"SqliteSaver": lt.REFERENCE["sync"], "SavegameSaver": lt.SAVEGAME}
DEFAULT_TURNS = {"turns": 800, "subgraph": 300}


#: What a chat model's client attaches to its answer (keys in its order, not sorted: a
#: record gives them back sorted, and the saver must know the decoded messages anyway).
METADATA = {"model_name": "local-model", "system_fingerprint": "fp_0", "finish_reason": "stop"}


def turn_graph(size: int) -> Any:
    """``agent`` answers the user's message, with a chat model's metadata and usage."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph

    def agent(state: lt.Chat) -> dict[str, Any]:
        n = len(state["messages"])
        usage = {
            "input_tokens": 40 * n,
            "output_tokens": size // 4,
            "total_tokens": 40 * n + size // 4,
        }
        return {
            "messages": [
                AIMessage(lt.text(n, size), response_metadata=dict(METADATA), usage_metadata=usage)
            ]
        }

    g = StateGraph(lt.Chat)
    g.add_node("agent", agent)
    g.add_edge(START, "agent")
    g.add_edge("agent", END)
    return g


def graph(name: str, size: int) -> Any:
    return turn_graph(size) if name == "turns" else lt.subgraph_graph(size)


async def timed(name: str, turns: int, size: int, *, normal: bool) -> dict[str, list[float]]:
    """Seconds of each turn's ``invoke``, by saver."""
    from langchain_core.messages import HumanMessage

    out: dict[str, list[float]] = {label: [] for label in SAVERS}
    with tempfile.TemporaryDirectory(prefix="savegame-lg-turns-") as tmp:
        async with AsyncExitStack() as stack:
            graphs = {}
            for label, saver_name in SAVERS.items():
                saver = await stack.enter_async_context(
                    lt.open_saver(saver_name, Path(tmp) / f"{label}.db", normal=normal)
                )
                graphs[label] = graph(name, size).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "conversation"}}
            for turn in range(turns):
                given = {"messages": [HumanMessage(lt.text(turn, size))]}
                order = list(SAVERS) if turn % 2 else list(reversed(SAVERS))
                for label in order:
                    start = time.perf_counter()
                    graphs[label].invoke(given, config, durability="sync")
                    out[label].append(time.perf_counter() - start)
                if (turn + 1) % max(1, turns // 4) == 0:
                    print(f"{name}: turn {turn + 1}/{turns}", file=sys.stderr)
    return out


def table(name: str, seconds: dict[str, list[float]]) -> str:
    turns = len(seconds["SqliteSaver"])
    quarter = max(1, turns // 4)
    lines = [
        f"| {name}: turns | SqliteSaver ms an invoke | SavegameSaver ms an invoke | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for start in range(0, turns - turns % quarter, quarter):
        sq, sg = (
            statistics.fmean(seconds[label][start : start + quarter]) * 1e3 for label in SAVERS
        )
        lines.append(f"| {start + 1}-{start + quarter} | {sq:.2f} | {sg:.2f} | {sg / sq:.2f}x |")
    total = {label: sum(s) for label, s in seconds.items()}
    lines.append(
        f"| all {turns} (total s) | {total['SqliteSaver']:.1f} | {total['SavegameSaver']:.1f}"
        f" | {total['SavegameSaver'] / total['SqliteSaver']:.2f}x |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--graphs", default="turns,subgraph", help="turns,subgraph")
    parser.add_argument("--turns", type=int, default=None,
                        help="turns a thread (default: turns 800, subgraph 300)")  # fmt: skip
    parser.add_argument("--message-bytes", type=int, default=512,
                        help="text of each message (default 512)")  # fmt: skip
    parser.add_argument("--normal", action="store_true",
                        help="both savers at synchronous=NORMAL: what is left is CPU")  # fmt: skip
    args = parser.parse_args(argv)
    for name in args.graphs.split(","):
        if name not in DEFAULT_TURNS:
            parser.error(f"unknown graph {name!r}: turns or subgraph")
        turns = args.turns or DEFAULT_TURNS[name]
        seconds = asyncio.run(timed(name, turns, args.message_bytes, normal=args.normal))
        print(table(name, seconds))
        print()
    sync = "NORMAL" if args.normal else "FULL (SQLite's default)"
    print(f"One thread a graph, SQLite files, synchronous={sync}, durability=\"sync\", "
          f"{args.message_bytes} B messages; means of each quarter's turns.")  # fmt: skip


if __name__ == "__main__":
    main()
