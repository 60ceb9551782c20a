"""The codec: pure-data round trips, refusals that name the path, integrity checks."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import socket
import threading
from decimal import Decimal
from typing import Any

import orjson
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from savegame import codec
from savegame.codec import _values
from savegame.errors import ConfigurationError, SerializationError

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.uuids(),
    st.decimals(allow_nan=False),
)
hashables = st.one_of(st.integers(), st.text(), st.booleans(), st.uuids(), st.dates())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(), inner, max_size=4),
        st.dictionaries(hashables, inner, max_size=3),
        st.frozensets(hashables, max_size=4),
        st.sets(hashables, max_size=4),
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equality that also checks types (1 == 1.0 == True must not pass)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dt.datetime):
        return a == b and a.tzinfo == b.tzinfo and a.isoformat() == b.isoformat()
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(values)
def test_round_trip_keeps_value_and_type(value: Any) -> None:
    back = codec.loads(codec.dumps(value))
    assert same(value, back), (value, back)


@settings(max_examples=200, deadline=None)
@given(values)
def test_encoding_is_canonical(value: Any) -> None:
    # Encoding the decoded value again gives the same bytes: resume can compare byte for byte.
    data = codec.dumps(value)
    assert codec.dumps(codec.loads(data)) == data


@settings(max_examples=200, deadline=None)
@given(values)
def test_from_data_leaves_its_tree_as_it_was(value: Any) -> None:
    """``from_data`` is public: a caller's tree stays theirs. A load revives the trees it
    parsed in place (``revive``), to the same value."""
    tree = codec.to_data(value)
    printed = orjson.dumps(tree)
    back = codec.from_data(tree)
    assert orjson.dumps(tree) == printed
    assert same(value, back), (value, back)
    assert same(value, _values.revive(orjson.loads(printed)))


def test_from_data_leaves_a_tree_built_by_hand_as_it_was() -> None:
    """A hand-built tree may hold tuples: their contents are the caller's too."""
    tree = {"$sg:tuple": ([{"$sg:int": "5"}],), "x": ({"$sg:int": "6"},)}
    codec.from_data(tree)
    assert tree == {"$sg:tuple": ([{"$sg:int": "5"}],), "x": ({"$sg:int": "6"},)}


def test_dict_key_order_does_not_change_bytes() -> None:
    assert codec.canonical({"a": 1, "b": {"y": 2, "x": 3}}) == codec.canonical(
        {"b": {"x": 3, "y": 2}, "a": 1}
    )


def test_special_floats_and_big_ints_survive() -> None:
    value = {"inf": float("inf"), "ninf": float("-inf"), "big": 2**100, "neg": -(2**90)}
    back = codec.loads(codec.dumps(value))
    assert back["inf"] == float("inf") and back["ninf"] == float("-inf")
    assert back["big"] == 2**100 and back["neg"] == -(2**90)
    nan = codec.loads(codec.dumps(float("nan")))
    assert nan != nan


def test_user_dict_that_looks_like_a_tag_is_not_confused() -> None:
    value = {"$sg:bytes": "aGVsbG8="}
    assert codec.loads(codec.dumps(value)) == value


@pytest.mark.parametrize(
    ("state", "path", "what"),
    [
        ({"tools": [1, 2, {"conn": "SOCKET"}]}, "state.tools[2].conn", "socket.socket"),
        ({"lock": "LOCK"}, "state.lock", "lock"),
        ({"fn": "FN"}, "state.fn", "function"),
        ({"odd key": {"x": ("a", "FN")}}, "state['odd key'].x[1]", "function"),
        ({"m": {3: "FN"}}, "state.m[3]", "function"),
    ],
)
def test_refusal_names_exact_path(state: dict[str, Any], path: str, what: str) -> None:
    live = {"SOCKET": socket.socket(), "LOCK": threading.Lock(), "FN": lambda: None}

    def plant(v: Any) -> Any:
        if isinstance(v, str) and v in live:
            return live[v]
        if isinstance(v, dict):
            return {k: plant(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plant(x) for x in v]
        if isinstance(v, tuple):
            return tuple(plant(x) for x in v)
        return v

    try:
        with pytest.raises(SerializationError) as info:
            codec.dumps(plant(state))
        assert info.value.path == path
        assert str(info.value).startswith(f"{path}: ")
        assert what in str(info.value)
    finally:
        live["SOCKET"].close()


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Shape:
    name: str
    points: list[Point]
    created: dt.date


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Order(pydantic.BaseModel):
    id: str
    total: Decimal
    shape: Shape | None = None


codec.register(Point, name="test.Point")
codec.register(Shape, name="test.Shape")
codec.register(Color, name="test.Color")
codec.register(Order, name="test.Order")


def test_registered_types_round_trip_by_name() -> None:
    shape = Shape("tri", [Point(0, 0), Point(1, 2)], dt.date(2026, 1, 2))
    value = {
        "shape": shape,
        "color": Color.BLUE,
        "order": Order(id="o1", total=Decimal("9.99"), shape=shape),
    }
    data = codec.dumps(value)
    assert b"test.Shape" in data and b"tests." not in data  # stored by name, not import path
    back = codec.loads(data)
    assert back == value
    assert type(back["order"].shape.points[0]) is Point


def test_unregistered_dataclass_is_refused_with_a_hint() -> None:
    @dataclasses.dataclass
    class Secret:
        a: int

    with pytest.raises(
        SerializationError, match=r"state\.x: .*Secret is not serializable until registered"
    ):
        codec.dumps({"x": Secret(1)}, "state")


def test_register_refuses_arbitrary_classes_and_name_clashes() -> None:
    class Plain:
        pass

    with pytest.raises(ConfigurationError):
        codec.register(Plain)

    @dataclasses.dataclass
    class Other:
        a: int

    with pytest.raises(ConfigurationError, match="already registered"):
        codec.register(Other, name="test.Point")


def test_unknown_type_name_on_load_is_a_clear_error() -> None:
    with pytest.raises(SerializationError, match="not registered"):
        codec.loads(b'{"x":{"$sg:obj":["nobody.Knows",{}]}}')


def test_a_str_int_or_float_subclass_is_kept_as_its_plain_value() -> None:
    """langchain-core's ``message.text`` is a str subclass with no state of its own: it
    loads back equal, as the builtin type. One with attributes of its own would lose them,
    and a list or dict subclass (a defaultdict's factory) is refused as before."""

    class Text(str):
        __slots__ = ()

    class Count(int):
        pass

    class Ratio(float):
        pass

    loaded = codec.loads(codec.dumps({"s": Text("x"), "i": Count(3), "f": Ratio(0.5)}))
    assert loaded == {"s": "x", "i": 3, "f": 0.5}
    assert (type(loaded["s"]), type(loaded["i"]), type(loaded["f"])) == (str, int, float)

    tagged = Text("y")
    with pytest.raises(
        SerializationError, match=r"state.s: .*_Tagged is a subclass of str with attributes"
    ):
        codec.dumps({"s": _Tagged("y", note="lost")})
    assert codec.dumps(tagged) == b'"y"'
    with pytest.raises(SerializationError, match="subclass of a builtin"):
        codec.dumps({"l": _MyList([1])})


class _Tagged(str):
    note: str

    def __new__(cls, value: str, *, note: str) -> _Tagged:
        made = super().__new__(cls, value)
        made.note = note
        return made


class _MyList(list[int]):
    pass


def test_an_unregistered_str_enum_is_still_refused() -> None:
    """An enum is not its value: kept as a str it would not load back as the enum."""

    class Colour(str, enum.Enum):
        RED = "red"

    with pytest.raises(SerializationError, match="until registered"):
        codec.dumps({"c": Colour.RED})
