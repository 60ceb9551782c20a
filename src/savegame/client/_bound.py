"""What every part of the handle stands on: one open store, its storage settings, a call's scope."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from savegame.codec.storage import StorageConfig
from savegame.errors import ConfigurationError
from savegame.redaction import redact_url
from savegame.stores import Store, naming, open_store


class Bound:
    """One store, opened once, and the storage settings every call on it uses.

    The parts of :class:`~savegame.client.Savegame` (runs, decisions, reading, upkeep)
    and its sub-handles stand on it; it owns the store's life: a store it opened from a
    URL it closes, a Store it was given stays open for its owner.
    """

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        storage: StorageConfig | None = None,
        create: bool = True,
    ) -> None:
        if isinstance(store, Bound):
            raise ConfigurationError(
                "store= takes a Store, a URL or None, not a savegame handle: call the "
                "handle's methods (sg.run ...), or pass its store (store=sg.store)"
            )
        self.store: Store = open_store(store, create=create)
        """The open store every call uses."""
        self.storage: StorageConfig | None = storage
        """How records are stored and read (keys, compression ...); None: from the
        environment (``SAVEGAME_KEYS`` ...) at each call, as the module functions do."""
        self._owned = self.store is not store
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: every operation is refused."""
        return self._closed

    def close(self) -> None:
        """Close the store if this handle opened it (a Store passed in stays open).

        Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._owned:
            self.store.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<{type(self).__name__} {redact_url(self.store.url)}{state}>"

    @contextmanager
    def _using(self) -> Iterator[Store]:
        """The store, for one call: refused once closed; a NotFoundError raised in the
        call is told which store was searched, so its message names it."""
        if self._closed:
            raise ConfigurationError(
                f"this savegame handle on {redact_url(self.store.url)} is closed: "
                "savegame.connect() opens another"
            )
        with naming(self.store) as store:
            yield store
