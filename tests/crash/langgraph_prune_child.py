"""Build a long LangGraph thread, or prune it, for the SIGKILL-mid-prune test.

``python langgraph_prune_child.py build|prune|copy URL THREAD``: build runs a graph of
``STEPS`` steps appending a message each and stopping at an interrupt; prune runs
``SavegameSaver.prune([THREAD])`` (keep_latest), copy ``copy_thread(THREAD, THREAD-copy)``.
Prints ``WORKING`` just before the rebuild starts and ``DONE completed`` after it.
"""

from __future__ import annotations

import sys
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from savegame.langgraph import SavegameSaver

STEPS = 60


def graph(saver: SavegameSaver) -> Any:
    def step(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"step {len(state['messages'])} " + "x" * 300)]}

    def wait(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"answer {interrupt('go on?')}")]}

    g = StateGraph(MessagesState)
    g.add_node("step", step)
    g.add_node("wait", wait)
    g.add_edge(START, "step")
    g.add_conditional_edges(
        "step", lambda s: "wait" if len(s["messages"]) >= STEPS else "step", ["step", "wait"]
    )
    g.add_edge("wait", END)
    return g.compile(checkpointer=saver)


def main() -> None:
    mode, url, thread = sys.argv[1:4]
    saver = SavegameSaver(url)
    config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    if mode == "build":
        graph(saver).invoke({"messages": []}, config)
    else:
        print("WORKING", flush=True)
        if mode == "prune":
            saver.prune([thread])
        else:
            saver.copy_thread(thread, f"{thread}-copy")
    print("DONE completed", flush=True)


if __name__ == "__main__":
    main()
