"""Reading a state whose types this process lacks: a named placeholder under
``codec.placeholders()``, the same refusal as ever outside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from savegame import codec
from savegame.codec import _registry
from savegame.errors import SerializationError
from savegame.model import CheckpointHeader, RunStatus


@dataclass(frozen=True)
class Order:
    id: str
    lines: tuple[int, ...]


def test_an_unknown_type_reads_as_its_name_only_when_asked() -> None:
    tree = {"$sg:obj": ["shop.Order", {"id": "o1", "lines": {"$sg:tuple": [1, 2]}}]}
    with pytest.raises(SerializationError, match=r"'shop\.Order' is not registered"):
        codec.from_data(tree)
    with codec.placeholders():
        read = codec.from_data({"order": tree})
    assert read == {"order": codec.Unregistered("shop.Order", {"id": "o1", "lines": (1, 2)})}
    # Shown again, it is what is stored, byte for byte.
    assert codec.to_data(read["order"]) == tree
    with pytest.raises(SerializationError):  # the context is over: strict again
        codec.from_data(tree)


def test_a_stored_checkpoint_loads_with_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    codec.register(Order, name="tests.placeholders.Order")
    header = CheckpointHeader(
        thread_id="t", run_id="r", checkpoint_id="c1", parent_id=None, step=0, node=None,
        status=RunStatus.COMPLETED, next=None,
    )  # fmt: skip
    state: dict[str, Any] = {"order": Order("o1", (1, 2)), "n": 1}
    record = codec.encode(header, state)
    monkeypatch.delitem(_registry._by_name, "tests.placeholders.Order")
    with pytest.raises(SerializationError):
        codec.decode(record)
    with codec.placeholders():
        cp = codec.decode(record)
    assert cp.state["order"] == codec.Unregistered(
        "tests.placeholders.Order", {"id": "o1", "lines": (1, 2)}
    )
    assert cp.state["n"] == 1
