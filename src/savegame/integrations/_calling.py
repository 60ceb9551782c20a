"""The request id of the journaled tool call running now, for an agent SDK's tools.

Each integration runs a framework's tool inside a journaled call and sets the call's
request id for the tool's duration; the tool reads it (``request_id()``) to give the
outside system something to deduplicate a write on. One :class:`RunningCall` per
integration, so one framework's tool never reads another's call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from savegame.errors import ConfigurationError


class RunningCall:
    """The request id of the call running now, in a context variable of its own."""

    def __init__(self, name: str, where: str) -> None:
        """Args:
        name: the context variable's name.
        where: where ``request_id()`` works, for the error outside it (``"in a tool of
            ..."``).
        """
        self._request: ContextVar[str | None] = ContextVar(name, default=None)
        self._where = where

    @contextmanager
    def calling(self, request_id: str) -> Iterator[None]:
        token = self._request.set(request_id)
        try:
            yield
        finally:
            self._request.reset(token)

    def request_id(self) -> str:
        """Raises:
        ConfigurationError: not inside a journaled tool call.
        """
        found = self._request.get()
        if found is None:
            raise ConfigurationError(
                f"request_id(): no journaled tool call is running (call it {self._where})"
            )
        return found
