"""What a framework's saver asks of the codec for the values that framework hands it.

savegame's own runs keep a tuple a tuple and refuse a type nobody registered. A
framework's saver must give back what that framework's own savers give: LangGraph's
return tuples as lists (msgpack has no tuple) and store the graph's own schema types
(its pydantic models, dataclasses, enums) by name. Such a saver sets
:class:`Conventions` around its encodes and decodes with :func:`using`.

A ContextVar, so the runs of other threads and tasks keep the defaults; and read only
where a tuple or an unregistered type is met, so a value of plain data pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Conventions:
    tuples_as_lists: bool = False
    """Encode a tuple as a list (a dict key stays a tuple: a list cannot be one)."""
    admit: Callable[[type[Any]], str | None] | None = None
    """The name to store an unregistered class under (it is registered under it), or
    None to refuse it as usual."""
    resolve: Callable[[str], type[Any] | None] | None = None
    """The class a stored name that nobody registered in this process stands for, or
    None to refuse it as usual."""
    placeholders: bool = False
    """Decode an object of a type nobody registered (nor ``resolve`` found) as an
    ``Unregistered`` stand-in instead of refusing it: for readers that only show."""


DEFAULT = Conventions()
_current: ContextVar[Conventions] = ContextVar("savegame_codec_conventions", default=DEFAULT)


def current() -> Conventions:
    return _current.get()


class using:  # lower case: called as a function was, ``with using(c):``
    """Encode and decode with ``conventions`` in this context (thread, task) until exit.
    Placeholders a reader asked for around it hold inside too (a saver's reads under
    ``savegame show`` are still only shown).

    A class, not a ``@contextmanager`` generator: a LangGraph saver enters it about 20
    times a run, and the generator's machinery (its context manager object, two
    ``next`` calls and the StopIteration) cost more than the ContextVar's set and reset.
    """

    __slots__ = ("_conventions", "_token")

    def __init__(self, conventions: Conventions) -> None:
        self._conventions = conventions

    def __enter__(self) -> None:
        conventions = self._conventions
        if _current.get().placeholders and not conventions.placeholders:
            conventions = replace(conventions, placeholders=True)
        self._token = _current.set(conventions)

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        _current.reset(self._token)
