"""Run ownership: who we are, whether a holder is alive, and the heartbeat.

A lease is held as ``host:pid:start`` where ``start`` is the process start time
(from /proc where available) so a recycled pid is not mistaken for the dead
owner. On the same host a holder whose process is gone is recognised at once,
so ``savegame resume`` right after a crash does not wait for the lease to expire,
a worker frees such a holder's runs for the fleet (:func:`free_dead`), and
``savegame runs`` shows them as dead (:func:`owner_gone`). So is a holder that was
killed but not yet reaped (a zombie: its parent does not wait for it, as in a
container without an init), which ``kill(pid, 0)`` still finds. A holder on another
host is known gone only when its lease has expired.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from savegame.errors import LeaseHeldError, NotFoundError, SavegameError
from savegame.model import Lease, RunInfo, RunStatus
from savegame.stores.base import Store

DEFAULT_TTL = 30.0

log = logging.getLogger("savegame.lease")


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses; fields resume after the last ')'.
    return stat[stat.rindex(b")") + 2 :].split()


def _start_time(pid: int) -> str:
    fields = _stat_fields(pid)
    return "0" if fields is None else fields[19].decode()  # field 22: starttime, clock ticks


def _ps_state(pid: int) -> str | None:
    # Where there is no /proc (macOS, the BSDs), ps knows; only asked for a holder
    # that kill(pid, 0) found, so a run whose owner is alive costs one ps at most.
    ps = shutil.which("ps")
    if ps is None:
        return None
    try:
        out = subprocess.run(
            [ps, "-o", "state=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()[:1] or None


def _not_running(pid: int) -> bool:
    """True when ``pid`` exists only as a zombie (or a dying task): it runs nothing."""
    fields = _stat_fields(pid)
    if fields is not None:
        state: str | None = fields[0].decode()
    elif os.path.isdir("/proc/self"):
        return False  # a /proc without this pid: it went between two looks; ask again later
    else:
        state = _ps_state(pid)
    return state in ("Z", "X", "x")


def owner_id(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _holder(owner: str) -> tuple[str, int, str] | None:
    """(host, pid, start) of a ``host:pid:start`` owner on this host, else None."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    return host, int(pid_text), start


def holder_is_dead(owner: str) -> bool:
    """True only when ``owner`` is provably a process on this host that is not running."""
    holder = _holder(owner)
    if holder is None:
        return False
    _, pid, start = holder
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists, owned by another user: alive unless a zombie, as below
    if start not in ("", "0") and _start_time(pid) not in ("0", start):
        return True  # a different process that reused the pid
    return _not_running(pid)


def holder_alive(owner: str) -> bool | None:
    """Whether ``owner`` (``host:pid:start``) is a running process: True or False on this
    host, None where that cannot be seen (another host, or not a process's id)."""
    if _holder(owner) is None:
        return None
    return not holder_is_dead(owner)


def acquire(store: Store, run_id: str, *, ttl: float) -> Lease:
    """Take the run's lease, taking it over from a dead holder on this host.

    Raises:
        LeaseHeldError: a live process (or one on another host whose lease has
            not expired) owns the run.
    """
    me = owner_id()
    try:
        return store.acquire_lease(run_id, me, ttl)
    except LeaseHeldError as exc:
        current = store.get_run(run_id).lease
        if current is None:
            raise
        if not holder_is_dead(current.owner):
            # Say what is known of the holder: seen running here, or on another host.
            here = _holder(current.owner) is not None
            raise LeaseHeldError(
                run_id, current.owner, exc.expires_in, running=True if here else None
            ) from None
        return _take_over(store, run_id, current, me, ttl)


def _take_over(store: Store, run_id: str, held: Lease, me: str, ttl: float) -> Lease:
    """The lease of ``run_id`` from ``held``'s holder, which :func:`holder_is_dead` proved
    not running."""
    host, pid, _ = _holder(held.owner) or ("?", 0, "")
    log.info("run %s was held by PID %d on host %s, which is not running: taking it over",
             run_id, pid, host)  # fmt: skip
    # Compare-and-swap on the dead holder's token: if someone else took the run over
    # in the meantime, this fails with LeaseHeldError as it should.
    return store.acquire_lease(run_id, me, ttl, takeover_token=held.token)


def free_dead(store: Store, runs: Iterable[RunInfo]) -> list[str]:
    """Release the live leases among ``runs`` whose holders are processes on this host that
    are not running (a SIGKILLed worker), so that a claimer takes those runs now, as
    ``savegame resume`` would, rather than when the leases expire. Released, not kept:
    which worker claims a run stays the claim's business (its workflows, queues, limits).

    Returns:
        The ids of the runs freed.
    """
    me, now, freed = owner_id(), time.time(), []
    for info in runs:
        held = info.lease
        if held is None or held.expires_at <= now or not holder_is_dead(held.owner):
            continue  # free, claimable already, or not provably dead
        try:
            taken = _take_over(store, info.run_id, held, me, DEFAULT_TTL)
        except (LeaseHeldError, NotFoundError):
            continue  # another process took it first, or it was deleted
        store.release_lease(info.run_id, taken.token)
        freed.append(info.run_id)
    return freed


_IN_HAND = (RunStatus.QUEUED, RunStatus.RUNNING)


@dataclass(frozen=True, slots=True)
class OwnerGone:
    """A queued or running run leased to a process that is gone: nothing executes it."""

    run_id: str
    owner: str
    """``host:pid:start`` of the process that held it."""
    reason: str
    """How that is known, for people: its PID is not running on this host, or its lease
    expired (a holder on another host)."""


def owner_gone(info: RunInfo) -> OwnerGone | None:
    """Whether the process holding ``info``'s run is gone (the row as ``get_run`` or
    ``list_runs`` return it): its PID not running on this host, or, anywhere, its lease
    expired. None while a live owner holds it, or nobody does (a run queued, or left by
    a worker that stopped), or it is not queued or running.

    Such a run continues where it stopped with ``savegame resume RUN`` (at once, from this
    host), or in a worker: one on this host claims it at once, elsewhere once the lease
    expires.
    """
    held = info.lease
    if held is None or info.status not in _IN_HAND:
        return None
    host, _, rest = held.owner.partition(":")
    pid = rest.partition(":")[0]
    if holder_is_dead(held.owner):
        return OwnerGone(info.run_id, held.owner, f"PID {pid} on host {host} is not running")
    late = time.time() - held.expires_at
    if late < 0:
        return None
    return OwnerGone(
        info.run_id, held.owner, f"the lease of PID {pid} on host {host} expired {late:.0f} s ago"
    )


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
