"""codec/_registry.py: a class that is not a dataclass, pydantic model or enum is saved
by name through the fields/rebuild pair it was registered with, and only then."""

from __future__ import annotations

from typing import Any

import pytest

from savegame.codec import dumps, loads, register
from savegame.errors import ConfigurationError, SerializationError


class Packet:
    __slots__ = ("arg", "node")

    def __init__(self, node: str, arg: Any) -> None:
        self.node, self.arg = node, arg


register(
    Packet,
    name="tests.codec.Packet",
    fields=lambda p: {"node": p.node, "arg": p.arg},
    rebuild=lambda v: Packet(v["node"], v["arg"]),
)


def test_a_plain_class_round_trips_through_its_pair() -> None:
    back = loads(dumps({"send": [Packet("work", {"topic": b"a"})]}, "state"))
    (packet,) = back["send"]
    assert type(packet) is Packet
    assert (packet.node, packet.arg) == ("work", {"topic": b"a"})


def test_its_fields_are_checked_as_state_is() -> None:
    with pytest.raises(SerializationError, match=r"state\.send\.arg"):
        dumps({"send": Packet("work", object())}, "state")


class Loose:
    pass


def test_a_plain_class_without_a_pair_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="only dataclasses"):
        register(Loose, name="tests.codec.Loose")
    with pytest.raises(ConfigurationError, match="together"):
        register(Loose, name="tests.codec.Loose", fields=lambda o: {})


def test_fields_of_reads_each_class_in_its_own_field_order() -> None:
    """The names are found once per class (_registry._field_names); a class defined
    again under the same name is another class, read anew."""
    import dataclasses

    import pydantic

    from savegame.codec._registry import fields_of

    def make(extra: bool) -> Any:
        @dataclasses.dataclass
        class Item:
            b: int
            a: int
            c: int = dataclasses.field(default=0, init=not extra)

        return Item

    first, second = make(False)(2, 1), make(True)(2, 1)
    assert list(fields_of(first).items()) == [("b", 2), ("a", 1), ("c", 0)]
    assert list(fields_of(second).items()) == [("b", 2), ("a", 1), ("c", 0)]

    class Model(pydantic.BaseModel):
        z: str
        y: list[int]

    model = Model(z="z", y=[1])
    assert list(fields_of(model).items()) == [("z", "z"), ("y", [1])]
    model.y.append(2)  # read from the object at every call, never kept
    assert fields_of(model) == {"z": "z", "y": [1, 2]}
