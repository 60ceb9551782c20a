"""The handle and the module functions are one API: every root function that takes ``store=``
has a method of ``Savegame`` (``savegame.client.METHODS`` names it) with the same
parameters but ``store`` and ``storage``: names, kinds, defaults and types, and the same
return type. Derived from the modules, so a parameter added to one side fails here."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import savegame
from savegame.client import METHODS, Savegame

HELD = ("store", "storage")
"""What the handle holds instead of taking it per call."""


def _functions_with_store() -> dict[str, Callable[..., Any]]:
    found = {}
    for name in savegame.__all__:
        obj = getattr(savegame, name)
        if name == "connect":
            continue  # the door itself: it makes the handle
        if inspect.isfunction(obj) and "store" in inspect.signature(obj).parameters:
            found[name] = obj
    return found


FUNCTIONS = _functions_with_store()


@pytest.fixture(scope="module")
def sg() -> Iterator[Savegame]:
    with savegame.connect("memory://") as handle:
        yield handle


def _method(sg: Savegame, path: str) -> Callable[..., Any]:
    target: Any = sg
    for part in path.split("."):
        target = getattr(target, part)
    return typing.cast(Callable[..., Any], target)


def _shape(fn: Callable[..., Any], *, leave: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """Each parameter's name, kind, default and type (resolved), and the return type."""
    hints = typing.get_type_hints(fn)
    shape: list[tuple[Any, ...]] = [
        (p.name, p.kind, p.default, hints.get(p.name))
        for p in inspect.signature(fn).parameters.values()
        if p.name not in leave
    ]
    return [*shape, ("return", hints.get("return"))]


def test_the_mapping_names_every_root_function_that_takes_a_store() -> None:
    assert sorted(METHODS) == sorted(FUNCTIONS)
    assert len(FUNCTIONS) >= 41  # the root has not lost its functions on the way


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_method_takes_what_its_function_takes_but_the_store(sg: Savegame, name: str) -> None:
    function, method = FUNCTIONS[name], _method(sg, METHODS[name])
    assert _shape(method) == _shape(function, leave=HELD)
    assert inspect.iscoroutinefunction(method) == inspect.iscoroutinefunction(function)


def test_every_public_method_of_the_handle_is_one_of_the_functions() -> None:
    own = {"close", "closed", "queues", "schedules", "store", "storage", "worker"}
    methods = {name for name in dir(Savegame) if not name.startswith("_")}
    assert methods - own == {path for path in METHODS.values() if "." not in path}
    for sub in ("schedules", "queues"):
        handle = getattr(savegame.connect("memory://"), sub)
        public = {name for name in dir(handle) if not name.startswith("_")}
        assert public == {p.partition(".")[2] for p in METHODS.values() if p.startswith(sub)}


def test_the_handle_makes_the_worker_worker_makes(sg: Savegame) -> None:
    made = _shape(savegame.Worker.__init__, leave=(*HELD, "self"))[:-1]
    assert _shape(sg.worker) == [*made, ("return", savegame.Worker)]
