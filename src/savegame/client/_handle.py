"""``savegame.connect()`` and the handle it returns: one store, opened once, every operation a method."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from types import TracebackType

from savegame.client._decisions import Decisions
from savegame.client._fleet import Queues, Schedules
from savegame.client._reading import Reading
from savegame.client._runs import Runs
from savegame.client._upkeep import Upkeep
from savegame.codec.storage import StorageConfig
from savegame.fleet import Worker
from savegame.model import RunResult
from savegame.runtime import DEFAULT_TTL
from savegame.stores import Store


class Savegame(Runs, Decisions, Reading, Upkeep):
    """A handle on one store: every operation of savegame is a method of it.

    Made by :func:`connect`; a context manager (``with``, and ``async with``) that
    closes the store it opened. Its methods are the module functions' operations
    (``sg.run`` is ``savegame.run``, ``sg.runs`` is ``savegame.client.list_runs`` ...) without
    ``store=`` and ``storage=``, which the handle holds; schedules and queues are the
    sub-handles :attr:`schedules` and :attr:`queues`. It may be shared by threads, as
    its store is.

    Attributes:
        store: the open store every call uses.
        storage: the storage settings every call uses (None: the environment's).
    """

    def __enter__(self) -> Savegame:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Savegame:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()  # closing is short (a connection, a pool): not worth a thread

    @cached_property
    def schedules(self) -> Schedules:
        """Schedules on this store: ``add``, ``get``, ``list``, ``pause``, ``resume``,
        ``remove``, ``fire``."""
        return Schedules(self)

    @cached_property
    def queues(self) -> Queues:
        """Queues with limits on this store: ``declare``, ``list``."""
        return Queues(self)

    def worker(
        self,
        *,
        concurrency: int = 1,
        lease_ttl: float = DEFAULT_TTL,
        poll: float = 0.5,
        workflows: list[str] | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        backoff: float = 1.0,
        schedules: bool = True,
        queues: list[str] | None = None,
        version: str | None = None,
        compatible_versions: Sequence[str] = (),
    ) -> Worker:
        """A :class:`~savegame.Worker` on this handle's store and storage settings.

        Its slots share the handle's store: on SQLite one connection, so one slot writes
        at a time (``Worker(url)`` opens one per slot). Close the handle after the worker
        has stopped. The arguments are :class:`~savegame.Worker`'s.
        """
        with self._using() as s:
            return Worker(
                s, storage=self.storage, concurrency=concurrency, lease_ttl=lease_ttl,
                poll=poll, workflows=workflows, on_result=on_result, backoff=backoff,
                schedules=schedules, queues=queues, version=version,
                compatible_versions=compatible_versions,
            )  # fmt: skip


def connect(
    store: Store | str | None = None,
    *,
    storage: StorageConfig | None = None,
    create: bool = True,
) -> Savegame:
    """Open a handle on ``store``: every operation is a method of it, on one open store.

    ::

        with savegame.connect("sqlite:///app.db") as sg:
            result = sg.run(wf, {"n": 1})
            sg.history(result.run_id)

    The module functions (``savegame.run(wf, store=...)`` ...) are one-shot
    conveniences over it: each opens a handle, calls its method, closes it.

    Args:
        store: a store URL (``sqlite:///app.db``, ``postgresql://...``, ``redis://...``,
            see :func:`~savegame.open_store`), opened here and closed with the handle; a
            Store, used as it is and left open (its owner closes it); or None for
            ``$SAVEGAME_STORE``, else ``sqlite:///savegame.db``.
        storage: how checkpoints are stored and read (keyframe cadence, blobs,
            compression, encryption keys) by every call; default from the environment
            (``SAVEGAME_KEYS`` ...), read at each call, see
            :class:`savegame.codec.storage.StorageConfig`.
        create: False to refuse a store that is not there (an SQLite file that does
            not exist) rather than make an empty one.

    Raises:
        ConfigurationError: an unknown scheme, a malformed URL, or a missing driver.
        StoreNotFoundError: ``create`` is False and the store does not exist.
        StoreUnavailableError: the store's server cannot be reached.
    """
    return Savegame(store, storage=storage, create=create)
