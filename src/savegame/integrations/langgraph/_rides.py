"""Pending writes that ride with the next checkpoint: one commit for a LangGraph step.

Under ``durability="sync"`` LangGraph hands a task's writes (``put_writes``) and, a
millisecond or so later, the step's checkpoint (``put``) to two threads, and waits for
the checkpoint. Each wrote its own transaction, so a step waited for two commits (two
fsyncs at ``synchronous=FULL``), as SqliteSaver's does. Here the writes wait up to
:data:`RIDE_WAIT` for the line's next checkpoint and are journaled in its transaction
(``put_checkpoint(effects=...)``, insert-if-absent as ``record_intents``): one commit.

No write is reported stored before it is: ``put_writes`` returns once its writes are
committed, with the checkpoint or, when none took them in time or its write failed, on
their own (a crash before that loses them as a crash during their own commit did), and
the checkpoint is fenced by the line's lease as always. What LangGraph itself waits for
must not wait on a checkpoint: a write it needs before the next checkpoint (a
``DeltaChannel``'s) would keep that checkpoint from coming, so a set of channels whose
wait ran out rides no more on that line for :data:`BARRED_FOR` checkpoints; the channel
an error handler waits for and the reserved ones (error, interrupt, resume: a stored one
may be replaced) never ride, nor do the writes of a checkpoint older than the line's
newest (LangGraph put the one after theirs before they came).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from savegame.model import EffectRecord

#: How long a task's writes wait for the line's next checkpoint. LangGraph puts it
#: 0.7-2 ms after the writes here (p10-p90, 2 cores shared with other work).
RIDE_WAIT = 0.005
#: A set of channels whose wait ran out rides again after this many checkpoints: a
#: ``DeltaChannel``'s writes pay one wait in this many steps, a step that was only slow
#: rides again soon.
BARRED_FOR = 32
#: How long a checkpoint waits for writes announced or being encoded to board it.
#: LangGraph often calls ``put`` while the writes are still encoded (tens of
#: microseconds), or before their thread could take the lines' lock, which the put holds
#: while it encodes: writes announce themselves first, on a lock of their own
#: (``Lines.announce``). Without the wait they missed the checkpoint and were committed
#: on their own, a commit (an fsync) more: a quarter of a chat10 run's writes did.
BOARDING_WAIT = 0.002
#: ``langgraph``'s ``CONFIG_KEY_DURABILITY``: LangGraph's own calls carry it (private
#: there, so spelled out); a caller that puts writes and checkpoints one after the
#: other (a migration, a test) does not, and its writes never wait.
DURABILITY_KEY = "__pregel_durability"
#: An error handler starts once this write is stored (``ERROR_SOURCE_NODE``).
NEVER = frozenset({"__error_source_node__"})


class Latch:
    """A one-shot ``threading.Event`` on a bare lock, held until :meth:`set`. An Event is
    a Condition over a Lock, all Python: making one raised and caught three
    AttributeErrors (the Condition looking for an RLock's methods), and ``wait`` and
    ``set`` took a waiter lock and the Condition's; a ride makes one, sets it once and
    its caller waits on it, every LangGraph task."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = threading.Lock()
        self._held.acquire()

    def set(self) -> None:
        """Once only (a ride's checkpoint ends once): a second call raises."""
        self._held.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it is set, waiting up to ``timeout`` seconds (None: for good)."""
        if not self._held.acquire(timeout=-1 if timeout is None else timeout):
            return False
        self._held.release()  # set it stays: the next wait passes too
        return True


@dataclass(eq=False)
class Ride:
    """One task's writes, waiting to be journaled with the line's next checkpoint."""

    entries: list[EffectRecord]
    channels: frozenset[str]
    done: Latch = field(default_factory=Latch)
    """Set once the checkpoint's write ended, committed or not."""
    taken: bool = False
    """A checkpoint took the entries: they wait for its commit, however long."""
    written: bool = False
    """Committed with it; still False once ``done``: their caller writes them itself."""


@dataclass
class Seats:
    """A line's riders and the channel sets barred from riding; guarded by the lines' lock."""

    riders: list[Ride] = field(default_factory=list)
    barred: dict[frozenset[str], int] = field(default_factory=dict)
    """Channel sets whose wait ran out -> the checkpoint count then."""
    puts: int = 0

    def board(self, entries: list[EffectRecord], channels: frozenset[str]) -> Ride | None:
        """A ride for ``entries``, or None when their channels may not wait."""
        since = self.barred.get(channels)
        if channels & NEVER or (since is not None and self.puts - since < BARRED_FOR):
            return None
        ride = Ride(entries, channels)
        self.riders.append(ride)
        return ride

    def leave(self, ride: Ride) -> None:
        """No checkpoint came in time: the ride's caller writes alone, its channels wait no
        more for a while."""
        self.riders.remove(ride)
        self.barred[ride.channels] = self.puts

    def take(self) -> list[Ride]:
        """The riders of the checkpoint being put now."""
        riders, self.riders = self.riders, []
        self.puts += 1
        for ride in riders:
            ride.taken = True
        return riders


def arrive(riders: list[Ride], *, written: bool) -> None:
    """The checkpoint's write ended: wake its riders (``written`` before ``done``)."""
    for ride in riders:
        ride.written = written
        ride.done.set()
