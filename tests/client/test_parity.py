"""The handle and the module functions are one API: every function of ``savegame.client``
(the root's ``run``, ``resume`` ... are some of them) that takes ``store=``
has a method of ``Savegame`` (``savegame.client.METHODS`` names it) with the same
parameters but ``store`` and ``storage``: names, kinds, defaults and types, and the same
return type. Each hands every argument on: the function to its method, the method to
the function under it that does the work (with the handle's store and storage). Derived
from the modules, so a parameter added to one side, or not handed on, fails here."""

from __future__ import annotations

import asyncio
import inspect
import sys
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import savegame
import savegame.client
from savegame.client import METHODS, Savegame

HELD = ("store", "storage")
"""What the handle holds instead of taking it per call."""


def _functions_with_store() -> dict[str, Callable[..., Any]]:
    found = {}
    for name in savegame.client.__all__:
        obj = getattr(savegame.client, name)
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


def test_the_mapping_names_every_function_that_takes_a_store() -> None:
    assert sorted(METHODS) == sorted(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_method_takes_what_its_function_takes_but_the_store(sg: Savegame, name: str) -> None:
    function, method = FUNCTIONS[name], _method(sg, METHODS[name])
    assert _shape(method) == _shape(function, leave=HELD)
    assert inspect.iscoroutinefunction(method) == inspect.iscoroutinefunction(function)


def test_every_public_method_of_the_handle_is_one_of_the_functions(sg: Savegame) -> None:
    own = {"close", "closed", "queues", "schedules", "store", "storage", "worker"}
    methods = {name for name in dir(Savegame) if not name.startswith("_")}
    assert methods - own == {path for path in METHODS.values() if "." not in path}
    for sub in ("schedules", "queues"):
        public = {name for name in dir(getattr(sg, sub)) if not name.startswith("_")}
        assert public == {p.partition(".")[2] for p in METHODS.values() if p.startswith(sub)}


def test_the_handle_makes_the_worker_worker_makes(sg: Savegame) -> None:
    made = _shape(savegame.Worker.__init__, leave=(*HELD, "self"))[:-1]
    assert _shape(sg.worker) == [*made, ("return", savegame.Worker)]


class _Recorder:
    """Stands for a handle (or one of its sub-handles): records each call it is given."""

    def __init__(self, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]], at: str = ""):
        self._calls, self._at = calls, at

    def __enter__(self) -> _Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        path = f"{self._at}{name}"
        if name in ("schedules", "queues"):
            return _Recorder(self._calls, f"{path}.")

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls.append((path, args, kwargs))
            return path

        async def acall(*args: Any, **kwargs: Any) -> Any:
            return call(*args, **kwargs)

        return acall if name in ("arun", "aresume") else call


def _sentinels(fn: Callable[..., Any], leave: tuple[str, ...]) -> tuple[list[Any], dict[str, Any]]:
    """A distinct value for each parameter of ``fn`` (but ``leave``), as it would be passed."""
    args, kwargs = [], {}
    for p in inspect.signature(fn).parameters.values():
        if p.name in leave:
            continue
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            args.append(f"<{p.name}>")
        else:
            kwargs[p.name] = f"<{p.name}>"
    return args, kwargs


def _called(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    result = fn(*args, **kwargs)
    return asyncio.run(result) if inspect.iscoroutine(result) else result


def _returned(fn: Callable[..., Any], value: Any) -> Any:
    """What ``fn`` returns when what it calls returns ``value`` (None where it returns nothing)."""
    return None if typing.get_type_hints(fn)["return"] is type(None) else value


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_function_hands_every_argument_to_its_method(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    function = FUNCTIONS[name]
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    opened: list[tuple[Any, ...]] = []

    def connect(store: Any, *, storage: Any = None, create: bool = True) -> _Recorder:
        opened.append((store, storage))
        return _Recorder(calls)

    monkeypatch.setattr(sys.modules[function.__module__], "connect", connect)
    args, kwargs = _sentinels(function, leave=HELD)
    held = {p: f"<{p}>" for p in HELD if p in inspect.signature(function).parameters}
    assert _called(function, *args, **kwargs, **held) == _returned(function, METHODS[name])
    assert opened == [("<store>", held.get("storage"))]
    [(path, given, named)] = calls
    assert (path, list(given), named) == (METHODS[name], args, kwargs)


def _behind(name: str) -> tuple[Any, Callable[..., Any]]:
    """The package (runtime, control, fleet, workspace, inspect, maintenance) and the function
    there doing ``name``'s work."""
    packages = (savegame.runtime, savegame.control, savegame.fleet, savegame.workspace)
    for package in (*packages, savegame.inspect, savegame.maintenance):
        if name in package.__all__:
            return package, getattr(package, name)
    raise AssertionError(f"no function does the work of {name}")


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_method_hands_every_argument_and_its_store_to_the_function_under_it(
    sg: Savegame, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, under = _behind(name)
    assert "store" in inspect.signature(under).parameters  # an open store, given by the handle
    calls: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> str:
        calls.append(inspect.signature(under).bind(*args, **kwargs).arguments)
        return "done"

    async def arecord(*args: Any, **kwargs: Any) -> str:
        return record(*args, **kwargs)

    monkeypatch.setattr(package, name, arecord if inspect.iscoroutinefunction(under) else record)
    method = _method(sg, METHODS[name])
    args, kwargs = _sentinels(method, leave=())
    assert _called(method, *args, **kwargs) == _returned(method, "done")
    expected = dict(zip(inspect.signature(method).parameters, args, strict=False)) | kwargs
    expected["store"] = sg.store
    if "storage" in inspect.signature(under).parameters:
        expected["storage"] = sg.storage
    assert calls == [expected]
