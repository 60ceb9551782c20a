"""Nasty states through real runs on a SQLite file: each round-trips exactly, or is
refused with a SerializationError that names where the bad value sits, and the run
ends failed (never left running) and resumes once the step returns something saveable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from savegame import END, RunStatus, StepContext, Workflow, codec, resume, run, tool
from savegame.client import get_checkpoint, get_run, list_effects
from savegame.codec import _values, open_record
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import SerializationError
from savegame.ids import new_id
from savegame.stores import SqliteStore

from .nasty import Case, nasty, nasty_updates, within

PLANTED: dict[str, Any] = {}
"""What the steps below hand back; see :func:`plant`."""
SLOW = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

STATES = Workflow("adversarial-states")


@STATES.step(entry=True)
def produce(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return PLANTED["update"], ("change" if "change" in PLANTED else END)


@STATES.step()
def change(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return PLANTED["change"], END


@tool(effect="read")
def echo(value: Any) -> Any:
    return value


@tool(effect="read")
def fetch() -> Any:
    return PLANTED["result"]


CALLS = Workflow("adversarial-calls")


@CALLS.step(entry=True)
def call(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    if "fixed" in PLANTED:  # the step no longer makes the call that failed
        return {"fixed": True}, END
    if "argument" in PLANTED:
        return {"out": ctx.call(echo, PLANTED["argument"])}, END
    if "result" in PLANTED:
        return {"out": ctx.call(fetch)}, END
    return {"out": ctx.interrupt(PLANTED["payload"])}, END


def plant(**values: Any) -> None:
    PLANTED.clear()
    PLANTED.update(values)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'nasty.db'}"
    PLANTED.clear()


def _refused_where_planted(
    info: pytest.ExceptionInfo[SerializationError], roots: list[str], url: str, run_id: str
) -> None:
    path = info.value.path
    assert any(within(path, root) for root in roots), (path, roots)
    failed = get_run(run_id, store=url)
    assert failed.status is RunStatus.FAILED, failed.status
    assert f"SerializationError: {path}" in str(get_checkpoint(run_id, store=url).metadata["error"])


def _fixed_resumes(workflow: Workflow, url: str, run_id: str) -> None:
    plant(update={"fixed": True}, fixed=True)
    done = resume(run_id, workflow=workflow, store=url)
    assert done.status is RunStatus.COMPLETED


@SLOW
@given(case=nasty_updates())
def test_a_nasty_state_round_trips_or_is_refused_where_it_sits(url: str, case: Case) -> None:
    plant(update=case.value)
    run_id = new_id()
    if not case.bad:
        result = run(STATES, {"before": 1}, store=url, run_id=run_id)
        assert result.status is RunStatus.COMPLETED
        loaded = get_checkpoint(result.checkpoint_id, store=url)  # a fresh store, from bytes
        assert codec.canonical(loaded.state) == codec.canonical({"before": 1, **case.value})
        return
    with pytest.raises(SerializationError) as info:
        run(STATES, {"before": 1}, store=url, run_id=run_id)
    _refused_where_planted(info, case.bad, url, run_id)
    # The failure checkpoint keeps the last good state as the resume point.
    assert get_checkpoint(run_id, store=url).state == {"before": 1}
    _fixed_resumes(STATES, url, run_id)


@SLOW
@given(case=nasty(path="call[0].echo.value", depth=1))
def test_a_nasty_tool_argument_round_trips_or_is_refused_where_it_sits(
    url: str, case: Case
) -> None:
    plant(argument=case.value)
    run_id = new_id()
    if not case.bad:
        result = run(CALLS, store=url, run_id=run_id)
        assert result.status is RunStatus.COMPLETED
        (entry,) = list_effects(run_id, store=url)
        assert codec.canonical(entry.arguments) == codec.canonical({"value": case.value})
        assert codec.canonical(entry.result) == codec.canonical(case.value)
        saved = get_checkpoint(result.checkpoint_id, store=url).state["out"]
        assert codec.canonical(saved) == codec.canonical(case.value)
        return
    with pytest.raises(SerializationError) as info:
        run(CALLS, store=url, run_id=run_id)
    _refused_where_planted(info, case.bad, url, run_id)
    _fixed_resumes(CALLS, url, run_id)


@SLOW
@given(case=nasty(path="result.fetch", depth=1))
def test_a_nasty_tool_result_round_trips_or_is_refused_where_it_sits(url: str, case: Case) -> None:
    # Drawn one container deep, where the state will hold it: a result nested one level
    # too deep for the state is still a fine result, and is refused under state.out.
    plant(result=case.value)
    run_id = new_id()
    if not case.bad:
        result = run(CALLS, store=url, run_id=run_id)
        (entry,) = list_effects(run_id, store=url)
        assert codec.canonical(entry.result) == codec.canonical(case.value)
        saved = get_checkpoint(result.checkpoint_id, store=url).state["out"]
        assert codec.canonical(saved) == codec.canonical(case.value)
        return
    with pytest.raises(SerializationError) as info:
        run(CALLS, store=url, run_id=run_id)
    roots = case.bad + [bad.replace("result.fetch", "state.out", 1) for bad in case.bad]
    _refused_where_planted(info, roots, url, run_id)
    _fixed_resumes(CALLS, url, run_id)


@SLOW
@given(case=nasty(path="interrupt[0]", depth=0))
def test_a_nasty_interrupt_payload_is_kept_or_refused_where_it_sits(url: str, case: Case) -> None:
    plant(payload=case.value)
    run_id = new_id()
    if not case.bad:
        result = run(CALLS, store=url, run_id=run_id)
        assert result.status is RunStatus.INTERRUPTED
        (entry,) = list_effects(run_id, store=url)
        assert codec.canonical(entry.arguments) == codec.canonical(case.value)
        return
    with pytest.raises(SerializationError) as info:
        run(CALLS, store=url, run_id=run_id)
    _refused_where_planted(info, case.bad, url, run_id)
    _fixed_resumes(CALLS, url, run_id)


# -- the headroom below orjson's limit, measured ---------------------------------------
ORJSON_MOST = 254
"""orjson refuses to write a 255th level."""


def _json_depth(tree: Any) -> int:
    most, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if type(node) is dict or type(node) is list:
            most = max(most, depth)
            stack.extend(
                (child, depth + 1) for child in (node.values() if type(node) is dict else node)
            )
    return most


def _lists(levels: int, leaf: Any) -> Any:
    for _ in range(levels):
        leaf = [leaf]
    return leaf


def _packed_dicts(bottom: Any) -> Any:
    """Dicts at key depth 1..LAYOUT_DEPTH, each with entries enough for a pack of them
    and ``down``, large enough to be walked into rather than packed whole."""
    for _ in range(_values.LAYOUT_DEPTH):
        bottom = {**{f"pad{i}": str(i) * 500 for i in range(10)}, "down": bottom}
    return bottom


def _patched_dicts(leaf: Any) -> Any:
    """Dicts at key depth 1..LAYOUT_DEPTH (each patched in place by a delta), then ``x``."""
    bottom: Any = {"x": leaf}
    for _ in range(_values.LAYOUT_DEPTH - 1):
        bottom = {"d": bottom}
    return bottom


@pytest.mark.parametrize("layout", ["keyframe with packs", "delta"])
def test_a_state_at_the_depth_limit_fits_the_deepest_layout(tmp_path: Path, layout: str) -> None:
    """What _values.MAX_DEPTH's comment claims the engine adds, on the deepest records it writes:
    2 per pack around a dict (at key depths 1..16), or 2 per patched dict level plus the
    pair the value sits in (17), and 2 for the blob reference of a long leaf."""
    limit, layers = _values.MAX_DEPTH, _values.LAYOUT_DEPTH
    big = "y" * 20_000  # a blob reference at the bottom, and ``down`` big enough to walk
    url = f"sqlite:///{tmp_path / 'limit.db'}"
    storage = StorageConfig(pack_bytes=1024)  # every level closes a pack of its pads
    if layout == "delta":
        # state > dicts at depths 1..16 > x: a list; lists fill the levels left.
        plant(
            update={"k": _patched_dicts(_lists(limit - layers - 1, big))},
            change={"k": _patched_dicts(_lists(limit - layers - 1, big + "!"))},
        )
        added = 2 * (layers + 1) + 2
    else:
        # state > 16 packed dicts > down (depth 17, written whole): lists fill the rest.
        plant(update={"k": _packed_dicts(_lists(limit - layers - 1, big))})
        added = 2 * layers + 2
    result = run(STATES, store=url, storage=storage)
    store = SqliteStore(tmp_path / "limit.db")
    try:
        record = store.get_checkpoint(result.checkpoint_id)
        is_delta, body = open_record(record, resolve(storage))
    finally:
        store.close()
    assert is_delta is (layout == "delta")
    assert _json_depth(orjson.loads(body)) == limit + added <= ORJSON_MOST
    expected = PLANTED.get("change", PLANTED["update"])
    loaded = get_checkpoint(result.checkpoint_id, store=url, storage=storage)
    assert codec.canonical(loaded.state) == codec.canonical(expected)

    # One level more is refused, at the path where it starts to be too deep.
    plant(update={"k": _lists(limit, 0)})
    with pytest.raises(SerializationError, match=f"deeper than {limit} levels") as info:
        run(STATES, store=url, storage=storage)
    assert info.value.path == "state.k" + "[0]" * (limit - 1)
