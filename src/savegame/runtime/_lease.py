"""Run ownership: who we are, whether a holder is alive, and the heartbeat.

A lease is held as ``host:pid:start`` where ``start`` is the process start time
(from /proc where available) so a recycled pid is not mistaken for the dead
owner. On the same host a holder whose process is gone is recognised at once,
so ``savegame resume`` right after a crash does not wait for the lease to expire.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

from savegame.errors import LeaseHeldError, SavegameError
from savegame.model import Lease
from savegame.stores.base import Store

DEFAULT_TTL = 30.0


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return "0"
    # The command name may contain spaces and parentheses; fields resume after the last ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return fields[19].decode()  # field 22 overall: starttime in clock ticks since boot


def owner_id(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def holder_is_dead(owner: str) -> bool:
    """True only when ``owner`` is provably a dead process on this host."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, owned by another user
    # Alive pid: dead only if it is a different process that reused the pid.
    return start not in ("", "0") and _start_time(pid) not in ("0", start)


def acquire(store: Store, run_id: str, *, ttl: float) -> Lease:
    """Take the run's lease, taking it over from a dead holder on this host.

    Raises:
        LeaseHeldError: a live process (or one on another host whose lease has
            not expired) owns the run.
    """
    me = owner_id()
    try:
        return store.acquire_lease(run_id, me, ttl)
    except LeaseHeldError:
        current = store.get_run(run_id).lease
        if current is None or not holder_is_dead(current.owner):
            raise
        # Compare-and-swap on the dead holder's token: if someone else took the
        # run over in the meantime, this fails with LeaseHeldError as it should.
        return store.acquire_lease(run_id, me, ttl, takeover_token=current.token)


class Heartbeat:
    """Renews a lease in a daemon thread until stopped; records a loss."""

    def __init__(
        self, store: Store, lease: Lease, ttl: float, on_lost: Callable[[], None] | None = None
    ) -> None:
        self._store = store
        self._lease = lease
        self._ttl = ttl
        self._stop = threading.Event()
        self._on_lost = on_lost
        self.lost: SavegameError | None = None
        self._thread = threading.Thread(
            target=self._loop, name=f"savegame-heartbeat-{lease.run_id}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        interval = max(self._ttl / 3, 0.05)
        while not self._stop.wait(interval):
            try:
                self._lease = self._store.renew_lease(
                    self._lease.run_id, self._lease.token, self._ttl
                )
            except SavegameError as exc:
                self.lost = exc
                if self._on_lost is not None:
                    self._on_lost()
                return
            except Exception:
                # A transient store error (a locked file, a dropped connection):
                # the lease has ttl/3 * 2 to spare, so try again next beat.
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
