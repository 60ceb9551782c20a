"""A LangGraph graph on SavegameSaver whose node calls write tools, for SIGKILL tests.

``python langgraph_child.py start|resume URL THREAD``. The tools append to the ledger
file named by ``SAVEGAME_LEDGER`` (the outside world); ``SAVEGAME_HOOK=name`` makes
the child print ``HOOK name`` and block there, for the parent to kill it. Prints
``DONE completed`` or ``ERROR <Class> <message>``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from savegame.errors import SavegameError
from savegame.langgraph import SavegameSaver, durable_tool


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        print(f"HOOK {name}", flush=True)
        time.sleep(600)


def ledger(**call: Any) -> None:
    with open(os.environ["SAVEGAME_LEDGER"], "a") as f:
        f.write(json.dumps(call) + "\n")
        f.flush()
        os.fsync(f.fileno())


@durable_tool
def send_email(to: str, body: str) -> str:
    ledger(tool="send_email", to=to, body=body)
    hook("in-send")  # sent, but its result is not journaled: in doubt
    return "msg-1"


@durable_tool(idempotent=True)
def charge(amount: int, request_id: str) -> str:
    ledger(tool="charge", amount=amount, request_id=request_id)
    hook("in-charge")
    return "ch-1"


def plan(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content="plan: email then charge")]}


def act(state: MessagesState) -> dict[str, Any]:
    sent = send_email("ann@example.com", "your order")
    hook("after-send")
    receipt = charge(100)
    hook("after-tools")
    return {"messages": [AIMessage(content=f"{sent} {receipt}")]}


def finish(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content="done")]}


def graph(url: str) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("plan", plan)
    g.add_node("act", act)
    g.add_node("finish", finish)
    g.add_edge(START, "plan")
    g.add_edge("plan", "act")
    g.add_edge("act", "finish")
    g.add_edge("finish", END)
    return g.compile(checkpointer=SavegameSaver(url))


def main() -> None:
    mode, url, thread = sys.argv[1:4]
    config = {"configurable": {"thread_id": thread}}
    app = graph(url)
    try:
        if mode == "start":
            out = app.invoke({"messages": [HumanMessage(content="order 7")]}, config)
        else:
            out = app.invoke(None, config)
    except SavegameError as exc:
        print(f"ERROR {type(exc).__name__} {exc}", flush=True)
        return
    print(f"RESULT {out['messages'][-2].content}", flush=True)
    print("DONE completed", flush=True)


if __name__ == "__main__":
    main()
