"""The savegame CLI on LangGraph threads: real graphs (a messages reducer, an interrupt, a
superstep stopped half-way, a subgraph, a Send fan-out) written by SavegameSaver to an
SQLite file, then runs / history / show / diff / verify / stats / prune through the real
command, checked against what LangGraph itself says (``get_state``, ``get_state_history``)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

from savegame.langgraph import SavegameSaver
from tests.cli.conftest import clean_env
from tests.integrations.langgraph.graphs import fan_graph, nested_graph, parallel_graph
from tests.integrations.langgraph.test_saver import Deltas, chat_graph, conf


def lg_id(config: Any) -> str:
    return str(config["configurable"]["checkpoint_id"])


@pytest.fixture
def saver(sqlite_url: str) -> Iterator[SavegameSaver]:
    saver = SavegameSaver(sqlite_url)
    yield saver
    saver.close()


def field(text: str, name: str) -> str | None:
    """The value of a ``name  value`` line of ``savegame show``."""
    found = re.search(rf"^{name}  +(.*?)\s*$", text, re.M)
    return None if found is None else found.group(1)


def run(cli: Any, *args: str, code: int = 0) -> Any:
    out = cli(*args)
    assert out.exit_code == code, out.stdout + out.stderr
    return out


# -- runs, history, show: what LangGraph says ------------------------------------------------
def test_an_interrupted_chat_reads_as_langgraph_sees_it(
    cli: Any, saver: SavegameSaver, sqlite_url: str
) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="hi " + "x" * 300)]}, conf("t1"))
    state = graph.get_state(conf("t1"))
    assert state.next == ("ask",)

    runs = run(cli, "runs", "--store", sqlite_url, "--json").json()
    assert len(runs) == 1
    lg = runs[0]["langgraph"]
    assert (lg["thread_id"], lg["checkpoint_ns"], lg["root"]) == ("t1", "", True)
    assert (lg["status"], lg["to_run"], lg["checkpoint_id"]) == (
        "interrupted", ["ask"], lg_id(state.config)
    )  # fmt: skip
    table = run(cli, "runs", "--store", sqlite_url).stdout
    assert "langgraph" in table and "root" in table and "interrupted" in table

    history = run(cli, "history", "t1", "--store", sqlite_url, "--json").json()
    expected = list(graph.get_state_history(conf("t1")))
    assert [h["langgraph"]["checkpoint_id"] for h in history] == [lg_id(s.config) for s in expected]
    assert [h["langgraph"]["next"] for h in history] == [sorted(s.next) for s in expected]
    assert [h["langgraph"]["step"] for h in history] == [s.metadata["step"] for s in expected]
    assert [h["langgraph"]["source"] for h in history] == [s.metadata["source"] for s in expected]
    text = run(cli, "history", "t1", "--store", sqlite_url).stdout
    assert "LangGraph thread t1 (root)" in text
    assert lg_id(state.config) in text and "interrupt" in text

    shown = run(cli, "show", "t1", "--store", sqlite_url).stdout
    assert field(shown, "status") == "interrupted"
    assert field(shown, "next") == "ask"
    assert "ai: reply 1" in shown
    # A message is its type and its content, cut: not 300 x's, not a JSON object.
    hi = next(line for line in shown.splitlines() if "human: hi xxx" in line)
    assert len(hi.strip()) < 120 and hi.rstrip().endswith("…")
    assert '"$sg:obj"' not in shown
    assert "interrupt" in shown and "send it?" in shown and "task ask" in shown

    # Its pending writes are LangGraph's own entries: listed only with --all.
    journal = run(cli, "effects", runs[0]["run_id"], "--store", sqlite_url, "--json").json()
    assert journal == []
    journal = run(cli, "effects", "t1", "--all", "--store", sqlite_url, "--json").json()
    assert "__interrupt__" in {e["name"] for e in journal}

    body = run(cli, "show", "t1", "--store", sqlite_url, "--json").json()["langgraph"]
    assert body["to_run"] == list(state.next)
    interrupts = [w for w in body["pending_writes"] if w["interrupt"]]
    assert [w["node"] for w in interrupts] == ["ask"]
    assert body["channels"]["messages"][0] == {
        "$sg:obj": ["langchain.HumanMessage", body["channels"]["messages"][0]["$sg:obj"][1]]
    }

    graph.invoke(Command(resume="yes"), conf("t1"))
    done = graph.get_state(conf("t1"))
    assert done.next == ()
    after = run(cli, "show", "t1", "--store", sqlite_url, "--json").json()["langgraph"]
    assert (after["status"], after["next"], after["checkpoint_id"]) == (
        "done", [], lg_id(done.config)
    )  # fmt: skip
    assert after["channels"]["approved"] is True


def test_a_superstep_stopped_half_way(cli: Any, saver: SavegameSaver, sqlite_url: str) -> None:
    graph = parallel_graph().compile(checkpointer=saver)
    graph.invoke({"log": []}, conf("par"))
    live = graph.get_state(conf("par"))
    recorded = graph.get_state(live.config)  # by checkpoint id: the step as it was planned
    assert live.next == ("c",) and sorted(recorded.next) == ["b", "c"]

    body = run(cli, "show", "par", "--store", sqlite_url, "--json").json()["langgraph"]
    assert body["to_run"] == list(live.next)
    assert body["next"] == sorted(recorded.next)
    assert body["status"] == "interrupted"
    by_task = {(w["node"], w["channel"]) for w in body["pending_writes"]}
    assert {("b", "log"), ("c", "__interrupt__")} <= by_task
    text = run(cli, "show", "par", "--store", sqlite_url).stdout
    assert field(text, "still to run") == "c"

    # Resumed: the join fires once c is in, and the thread ends.
    graph.invoke(Command(resume="go"), conf("par"))
    history = run(cli, "history", "par", "--store", sqlite_url, "--json").json()
    expected = list(graph.get_state_history(conf("par")))
    assert [h["langgraph"]["next"] for h in history] == [sorted(s.next) for s in expected]
    assert ["d"] in [h["langgraph"]["next"] for h in history]


def test_a_subgraph_is_its_own_namespace(cli: Any, saver: SavegameSaver, sqlite_url: str) -> None:
    graph = nested_graph().compile(checkpointer=saver)
    graph.invoke({"log": []}, conf("sub"))
    state = graph.get_state(conf("sub"), subgraphs=True)
    inner = state.tasks[0].state
    assert state.next == ("inner",) and inner.next == ("i2",)

    runs = run(cli, "runs", "--thread", "sub", "--store", sqlite_url, "--json").json()
    lines = {r["langgraph"]["checkpoint_ns"]: r for r in runs}
    assert set(lines) == {"", inner.config["configurable"]["checkpoint_ns"]}
    sub = next(r for ns, r in lines.items() if ns)
    assert (sub["langgraph"]["root"], sub["langgraph"]["subgraph"]) == (False, ["inner"])
    assert sub["langgraph"]["to_run"] == list(inner.next)
    assert lines[""]["langgraph"]["to_run"] == list(state.next)
    assert "subgraph inner" in run(cli, "runs", "--store", sqlite_url).stdout

    # The subgraph's line by its run id: its checkpoints, ids as LangGraph has them.
    history = run(cli, "history", sub["run_id"], "--store", sqlite_url, "--json").json()
    assert history[0]["langgraph"]["checkpoint_id"] == lg_id(inner.config)
    assert history[0]["langgraph"]["next"] == ["i2"]
    shown = run(cli, "show", sub["run_id"], "--store", sqlite_url).stdout
    assert "subgraph inner" in shown and "interrupt" in shown and "inner?" in shown


def test_sends_are_next_tasks(cli: Any, saver: SavegameSaver, sqlite_url: str) -> None:
    graph = fan_graph().compile(checkpointer=saver, interrupt_before=["work"])
    graph.invoke({"topics": ["x", "y"]}, conf("fan"))
    assert graph.get_state(conf("fan")).next == ("work", "work")
    body = run(cli, "show", "fan", "--store", sqlite_url, "--json").json()["langgraph"]
    assert body["next"] == ["work", "work"]
    # A breakpoint leaves no write: tasks are left, nothing says why.
    assert body["status"] == "pending"


# -- ids: LangGraph's accepted where a checkpoint id is ----------------------------------------
def test_a_langgraph_checkpoint_id_is_accepted(
    cli: Any, saver: SavegameSaver, sqlite_url: str
) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    first = list(graph.get_state_history(conf("t1")))[-1]
    ident = lg_id(first.config)
    for args in ((ident,), (ident, "--thread", "t1")):
        body = run(cli, "show", *args, "--store", sqlite_url, "--json").json()
        assert body["langgraph"]["checkpoint_id"] == ident
        assert body["langgraph"]["source"] == "input"
    stored = body["checkpoint_id"]
    assert stored.startswith(ident + "@")
    assert (
        run(cli, "show", stored, "--store", sqlite_url, "--json").json()["checkpoint_id"] == stored
    )

    # copy_thread puts the same LangGraph ids in another thread: then the thread is named.
    saver.copy_thread("t1", "t2")
    out = run(cli, "show", ident, "--store", sqlite_url, code=2)
    assert "2 threads (t1, t2)" in out.stderr and "--thread" in out.stderr
    copy = run(cli, "show", ident, "--thread", "t2", "--store", sqlite_url, "--json").json()
    assert copy["thread_id"] == "t2"
    missing = run(cli, "show", ident, "--thread", "nope", "--store", sqlite_url, code=3)
    assert "nope" in missing.stderr


def test_diff_compares_channels(cli: Any, saver: SavegameSaver, sqlite_url: str) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    graph.invoke(Command(resume="yes"), conf("t1"))
    history = list(graph.get_state_history(conf("t1")))
    first, last = lg_id(history[-2].config), lg_id(history[0].config)  # after the input, the end
    text = run(cli, "diff", first, last, "--thread", "t1", "--store", sqlite_url).stdout
    assert "+ messages: +2 items" in text
    assert "ai: reply 1" in text and "human: said yes" in text
    assert "+ approved: true" in text
    assert "lg:checkpoint" not in text and "c:messages" not in text
    body = run(cli, "diff", first, last, "--store", sqlite_url, "--json").json()
    grew = next(c for c in body["changes"] if c["path"] == ["messages"])
    assert (grew["kind"], grew["count"]) == ("grew", 2)
    assert body["langgraph"]["a"]["checkpoint_id"] == first
    assert body["langgraph"]["b"]["next"] == []

    # Time travel: a checkpoint updated from an older one is a branch, marked where it left.
    graph.update_state(history[-2].config, {"messages": [AIMessage(content="edited")]})
    rows = run(cli, "history", "t1", "--store", sqlite_url, "--json").json()
    assert rows[0]["langgraph"]["parent_checkpoint_id"] == first
    assert rows[0]["langgraph"]["source"] == "update"
    assert "⑂ 0" in run(cli, "history", "t1", "--store", sqlite_url).stdout


# -- verify, stats, prune ------------------------------------------------------------------
def test_verify_and_stats(cli: Any, saver: SavegameSaver, sqlite_url: str) -> None:
    nested_graph().compile(checkpointer=saver).invoke({"log": []}, conf("sub"))
    report = run(cli, "verify", "--store", sqlite_url, "--json").json()
    assert report["ok"] and report["runs"] == 2 and report["effects"] > 0
    stats = run(cli, "stats", "--store", sqlite_url, "--json").json()
    assert {r["thread_id"] for r in stats["runs"]} == {"sub"}
    assert stats["totals"]["checkpoints"] == report["checkpoints"]


def test_prune_keeps_a_waiting_thread_and_drops_a_finished_one_whole(
    cli: Any, saver: SavegameSaver, sqlite_url: str
) -> None:
    nested = nested_graph().compile(checkpointer=saver)
    nested.invoke({"log": []}, conf("done"))
    nested.invoke(Command(resume="ok"), conf("done"))  # finished: root and subgraph lines
    nested.invoke({"log": []}, conf("waiting"))  # waits at the subgraph's interrupt
    before = nested.get_state(conf("waiting"), subgraphs=True)

    dry = run(cli, "prune", "--finished-for", "0s", "--store", sqlite_url, "--dry-run", "--json")
    plan = dry.json()
    done_runs = {
        r["run_id"]
        for r in run(cli, "runs", "--thread", "done", "--store", sqlite_url, "--json").json()
    }
    waiting_runs = {
        r["run_id"]
        for r in run(cli, "runs", "--thread", "waiting", "--store", sqlite_url, "--json").json()
    }
    assert len(done_runs) == 2 and len(waiting_runs) == 2
    assert set(plan["runs"]) == done_runs
    assert set(plan["exempt_runs"]) == waiting_runs

    run(cli, "prune", "--finished-for", "0s", "--store", sqlite_url)
    fresh = nested_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    assert fresh.get_state(conf("done")).values == {}
    after = fresh.get_state(conf("waiting"), subgraphs=True)
    assert after.values == before.values
    assert after.tasks[0].state.next == before.tasks[0].state.next == ("i2",)
    assert fresh.invoke(Command(resume="fine"), conf("waiting"))["log"] == [
        "i1", "i2 fine", "after"
    ]  # fmt: skip
    assert run(cli, "verify", "--store", sqlite_url, "--json").json()["ok"]


class Counted(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def test_prune_keep_last_leaves_a_thread_langgraph_can_go_on_with(
    cli: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chains of at most 4: this thread's 15 small checkpoints would otherwise all be one
    # chain (a line's deltas may reach 16 KiB) and keep-last could drop none of them.
    monkeypatch.setenv("SAVEGAME_KEYFRAME_EVERY", "4")
    saver = SavegameSaver(sqlite_url)
    g = StateGraph(Counted)
    g.add_node(
        "talk",
        lambda s: {"messages": [AIMessage(content=f"turn {len(s['messages'])}" + "y" * 2000)]},
    )
    g.add_edge(START, "talk")
    g.add_edge("talk", END)
    graph = g.compile(checkpointer=saver)
    for turn in range(5):
        graph.invoke({"messages": [HumanMessage(content=f"q{turn}")]}, conf("chat"))
    before = graph.get_state(conf("chat")).values
    plan = run(cli, "prune", "--keep-last", "1", "--store", sqlite_url, "--json").json()
    assert plan["checkpoints"] and not plan["runs"]
    left = run(cli, "history", "chat", "--store", sqlite_url, "--json").json()
    assert 1 <= len(left) < 15  # the latest, and the delta bases it loads from

    fresh = g.compile(checkpointer=SavegameSaver(sqlite_url))
    assert fresh.get_state(conf("chat")).values == before
    out = fresh.invoke({"messages": [HumanMessage(content="again")]}, conf("chat"))
    assert len(out["messages"]) == len(before["messages"]) + 2
    assert run(cli, "verify", "--store", sqlite_url, "--json").json()["ok"]
    saver.close()


def test_prune_keeps_what_a_delta_channel_is_rebuilt_from(
    cli: Any, saver: SavegameSaver, sqlite_url: str
) -> None:
    g = StateGraph(Deltas)
    g.add_node("step", lambda s: {"items": [len(s.get("items") or [])], "n": s.get("n", 0) + 1})
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= 6 else "step")
    g.compile(checkpointer=saver).invoke({"items": [], "n": 0}, conf("deltas"))
    shown = run(cli, "show", "deltas", "--store", sqlite_url).stdout
    assert "items  DeltaChannel" in shown

    plan = run(cli, "prune", "--keep-last", "1", "--store", sqlite_url, "--json").json()
    assert plan["checkpoints"] == [] and plan["kept_as_base"] > 0
    fresh = g.compile(checkpointer=SavegameSaver(sqlite_url))
    assert fresh.get_state(conf("deltas")).values == {"items": [0, 1, 2, 3, 4, 5], "n": 6}


# -- without LangGraph installed ---------------------------------------------------------------
NO_LANGGRAPH = textwrap.dedent(
    """
    import sys

    class Absent:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("langgraph", "langchain_core"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Absent())
    from savegame.cli import main

    sys.argv[0] = "savegame"
    main()
    """
)


def test_without_langgraph_installed_the_cli_says_what_to_install(
    saver: SavegameSaver, sqlite_url: str, tmp_path: Path
) -> None:
    chat_graph().compile(checkpointer=saver).invoke(
        {"messages": [HumanMessage(content="hi")]}, conf("t1")
    )
    script = tmp_path / "no_langgraph.py"
    script.write_text(NO_LANGGRAPH)

    def savegame_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), *args, "--store", sqlite_url],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    hint = "install savegame[langgraph]"
    runs = savegame_cli("runs")
    assert runs.returncode == 0 and "langgraph" in runs.stdout and hint in runs.stdout
    history = savegame_cli("history", "t1")
    assert history.returncode == 0 and "input" in history.stdout and hint in history.stdout
    shown = savegame_cli("show", "t1")
    assert shown.returncode == 0 and "thread t1, root" in shown.stdout and hint in shown.stdout
    diff = savegame_cli("diff", "t1", "t1")
    assert diff.returncode == 2 and hint in diff.stderr
    assert savegame_cli("verify").returncode == 0
    pruned = savegame_cli("prune", "--keep-last", "1", "--json")
    assert pruned.returncode == 0, pruned.stderr
    assert hint in next(iter(__import__("orjson").loads(pruned.stdout)["skipped"].values()))
