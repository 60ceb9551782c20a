"""A LangGraph thread waiting at ``interrupt()``, through the real commands: ``runs`` (its
text, ``--json`` and ``--status``), ``approvals``, ``effects THREAD`` and ``answer``, on a
store SavegameSaver wrote and on one ``savegame migrate langgraph`` filled; then the
graph continues with the answer given on the command line (``graph.invoke(None, config)``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage

import savegame
from savegame.langgraph import SavegameSaver
from tests.cli.conftest import clean_env
from tests.integrations.langgraph import migrate_graphs
from tests.integrations.langgraph.graphs import PARCEL, Parcel, parcel_graph
from tests.integrations.langgraph.test_tools import Ledger, email_graph


def ok(cli: Any, *args: str) -> Any:
    out = cli(*args)
    assert out.exit_code == 0, out.stdout + out.stderr
    return out


def conf(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def test_a_waiting_thread_reads_alike_everywhere_and_is_answered_from_the_cli(
    cli: Any, sqlite_url: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    graph = email_graph(ledger).compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    asked = graph.get_state(conf("t1")).interrupts[0]
    store = ("--store", sqlite_url)

    # One status, whatever asks: the table, --json, --status.
    (row,) = ok(cli, "runs", *store, "--json").json()
    assert (row["status"], row["langgraph"]["stored_status"]) == ("interrupted", "completed")
    assert "interrupted" in ok(cli, "runs", *store).stdout
    assert [
        r["run_id"] for r in ok(cli, "runs", "--status", "interrupted", *store, "--json").json()
    ] == [row["run_id"]]
    assert ok(cli, "runs", "--status", "completed", *store, "--json").json() == []

    # It waits for a person: the inbox lists the interrupt, on the thread's run.
    (waiting,) = ok(cli, "approvals", *store, "--json").json()
    assert (waiting["run_id"], waiting["interrupt_id"], waiting["kind"]) == (
        row["run_id"], asked.id, "interrupt"
    )  # fmt: skip
    assert waiting["payload"] == {"sent": "sent #1", "question": "send the follow-up?"}
    assert "savegame answer RUN_ID --value JSON" in ok(cli, "approvals", *store).stdout

    # effects takes the thread id; the durable tool's call, not LangGraph's pending writes.
    for ident in ("t1", row["run_id"]):
        journal = ok(cli, "effects", ident, *store, "--json").json()
        assert [(e["name"], e["kind"]) for e in journal] == [("send_email", "write")]
    text = ok(cli, "effects", "t1", *store).stdout
    assert "LangGraph thread t1: 1 journal entry" in text and "--all shows them" in text
    assert "__pregel_pull" not in text and "$sg:tuple" not in text
    everything = ok(cli, "effects", "t1", "--all", *store, "--json").json()
    assert {"send_email", "__interrupt__", "messages"} <= {e["name"] for e in everything}

    out = ok(cli, "answer", "t1", "--value", '"yes"', "--by", "alice", *store)
    assert f"answered interrupt {asked.id} (draft) of LangGraph thread t1 by alice" in out.stdout
    assert 'graph.invoke(None, {"configurable":{"thread_id":"t1"}})' in out.stdout
    assert ok(cli, "approvals", *store, "--json").json() == []
    assert ok(cli, "runs", *store, "--json").json()[0]["status"] == "queued"

    twice = cli("answer", "t1", "--value", '"no"', "--by", "bob", *store)
    assert twice.exit_code == 4
    assert "answered already (by alice at" in twice.stderr

    # The application continues the graph, in another process's saver: the node gets "yes".
    again = email_graph(ledger).compile(checkpointer=SavegameSaver(sqlite_url))
    out = again.invoke(None, conf("t1"))
    assert out["messages"][-1].content == "sent #1, sent #2"
    assert [c["body"] for c in ledger.calls()] == ["the draft", "follow-up: yes"]
    assert ok(cli, "runs", *store, "--json").json()[0]["status"] == "completed"
    late = cli("answer", "t1", "--value", '"no"', "--interrupt", asked.id, *store)
    assert late.exit_code == 3 and f"no pending interrupt '{asked.id} in LangGraph" in late.stderr


def test_a_migrated_thread_waits_and_its_bookkeeping_runs_are_not_listed(
    cli: Any, tmp_path: Path
) -> None:
    source = tmp_path / "langgraph.db"
    migrate_graphs.sqlite_source(source)
    url = f"sqlite:///{tmp_path / 'savegame.db'}"
    ok(cli, "migrate", "langgraph", str(source), "--to", url)
    store = ("--store", url)

    runs = ok(cli, "runs", *store, "--json").json()
    assert {r["workflow"] for r in runs} == {"langgraph"}  # no lgmigration-* markers
    assert "lgmigration" not in ok(cli, "runs", *store).stdout
    roots = {r["thread_id"]: r for r in runs if r["langgraph"]["root"]}
    assert {t: r["status"] for t, r in roots.items()} == {
        "done": "completed", "forked": "interrupted", "waiting": "interrupted"
    }  # fmt: skip
    waiting = ok(cli, "approvals", *store, "--json").json()
    assert sorted(p["run_id"] for p in waiting) == sorted(
        roots[t]["run_id"] for t in ("forked", "waiting")
    )
    interrupted = ok(cli, "runs", "--status", "interrupted", *store, "--json").json()
    assert {r["thread_id"] for r in interrupted} == {"forked", "waiting"}
    # A marker is still there by id.
    marker = savegame.client.list_runs(workflow="langgraph-migration", store=url)[0].run_id
    assert ok(cli, "history", marker, *store).stdout

    ok(cli, "answer", roots["waiting"]["run_id"], "--value", '"yes"', "--by", "carol", *store)
    saver = SavegameSaver(url)
    try:
        out = migrate_graphs.graph().compile(checkpointer=saver).invoke(None, conf("waiting"))
    finally:
        saver.close()
    assert out["approved"] is True
    assert [m.content for m in out["messages"]][-1] == "said yes"
    statuses = {r["thread_id"]: r["status"] for r in ok(cli, "runs", *store, "--json").json()}
    assert statuses["waiting"] == "completed" and statuses["forked"] == "interrupted"


def test_answer_gives_a_savegame_run_its_value_and_continues_it(
    cli: Any, shop: Path, store: str
) -> None:
    ok(cli, "run", f"{shop}:ask", "--run-id", "q1", "--store", store)
    (waiting,) = ok(cli, "approvals", "--store", store, "--json").json()
    assert waiting["run_id"] == "q1"
    done = ok(cli, "answer", "q1", "--value", '"gold"', "--by", "dan", "--store", store, "--json")
    assert done.json()["status"] == "completed"
    assert savegame.client.get_checkpoint("q1", store=store).state == {"plan": "gold"}
    [entry] = ok(cli, "effects", "q1", "--store", store, "--json").json()
    assert entry["metadata"]["by"] == "dan"


def test_a_thread_holding_a_class_the_cli_does_not_import_is_shown(sqlite_url: str) -> None:
    """``savegame`` in its own process, which never imports this module: the graph's class
    is shown by its registered name, in every reading command."""
    saver = SavegameSaver(sqlite_url)
    parcel_graph().compile(checkpointer=saver).invoke({"parcel": Parcel(1)}, conf("p1"))
    saver.close()

    def savegame_cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "savegame", *args, "--store", sqlite_url]
        done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done

    shown = json.loads(savegame_cli("show", "p1", "--json").stdout)["langgraph"]
    assert shown["channels"]["parcel"] == {"$sg:obj": [PARCEL, {"weight": 2}]}
    assert PARCEL in savegame_cli("show", "p1").stdout
    assert json.loads(savegame_cli("runs", "--json").stdout)[0]["status"] == "completed"
    assert savegame_cli("history", "p1").stdout
    assert savegame_cli("effects", "p1", "--all").stdout
