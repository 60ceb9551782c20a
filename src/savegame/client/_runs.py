"""The handle's verbs that start, continue and stop runs: run, resume, submit, fork, send, cancel, compensate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from savegame import control, fleet, runtime
from savegame.client._bound import Bound
from savegame.control import ForkResult, Sent
from savegame.effects import Mode
from savegame.model import RunInfo, RunResult
from savegame.runtime import (
    DEFAULT_TTL,
    NO_VALUE,
    CheckpointPolicy,
    Durability,
    Observer,
    OnExists,
    OnThreadBusy,
)


class Runs(Bound):
    """Starting, continuing and stopping runs on the handle's store."""

    def run(
        self,
        workflow: Any,
        input: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        policy: CheckpointPolicy | None = None,
        durability: Durability | None = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
        on_exists: OnExists = "continue",
        on_thread_busy: OnThreadBusy = "reject",
        wait: bool = False,
    ) -> RunResult:
        """Start a run of ``workflow`` (or continue the one ``run_id`` names) and drive it until it ends.

        Args:
            workflow: a Workflow or an Agent.
            input: top-level state keys to set before the first step. On an existing
                thread they are applied on top of the thread's latest state.
            thread_id: the thread to run on (default: a new thread named after the run).
            run_id: the run's id (default: a new time-sortable id).
            metadata: stored with the run and its input checkpoint.
            policy: overrides the workflow's checkpoint policy.
            durability: overrides the workflow's durability (``"sync"`` or ``"async"``).
            observer: callbacks for progress and timelines.
            lease_ttl: seconds a dead owner's lease blocks other hosts from taking the run over.
            on_exists: when a run ``run_id`` exists (of this workflow, on this thread,
                started with this ``input`` unless ``input`` is None): ``"continue"``
                (default) continues it where it stopped, or returns its recorded result
                without executing anything when it has finished (or waits for a person);
                ``"return"`` returns it as it stands; ``"reject"`` raises RunExistsError.
            on_thread_busy: when the thread has an unfinished run (crashed, failed,
                paused or live): ``"reject"`` (default) raises ThreadBusyError naming it,
                since a second run would start again at the entry step and could repeat
                that run's effects; ``"wait"`` waits until it has finished; ``"allow"``
                starts a second run beside it.
            wait: when a step waits (``ctx.sleep``, ``ctx.wait_for``, child runs), block
                here, the run's lease held, until it is woken, and go on. By default the
                run is checkpointed ``waiting`` and returned: no process waits, and a
                worker (or ``resume``) continues it once it is woken.

        Ctrl-C (SIGINT), when called in the main thread: the first lets the call in flight
        (a tool, a model) return and starts no other; the run is checkpointed
        ``interrupted`` at the step boundary it stopped at (after the step in flight, or,
        when that step would make another call, before it: its recorded calls are replayed
        when it runs again) and its lease released. Then KeyboardInterrupt is raised (its
        message names the run, the step and ``savegame resume RUN``; its ``result``
        attribute is the RunResult where the run stopped), unless the run ended anyway: its
        result is returned. A second Ctrl-C stops at once with a KeyboardInterrupt: the step
        in flight is abandoned, and leaves only what its journal recorded (the run resumes
        from its last checkpoint). While the run executes, its SIGINT handler stands in for
        the process's own, put back when it returns (a program's own handler gets the first
        Ctrl-C once the run has stopped). Called from another thread, nothing changes: the
        main thread gets Python's KeyboardInterrupt and the run goes on.

        Returns:
            The run's status, final state and last checkpoint id.

        Raises:
            StepError: a step raised; the run is marked failed and can be resumed.
            SerializationError: the state holds something that is not pure data.
            CheckpointWriteError: a checkpoint could not be written; the run stopped.
            RunExistsError: ``run_id`` is a run of another workflow, thread or input.
            ThreadBusyError: the thread has an unfinished run (``on_thread_busy="reject"``).
            LeaseHeldError: ``run_id`` exists and a live process is executing it.
            KeyboardInterrupt: a Ctrl-C stopped the run before it ended (see above).
        """
        with self._using() as s:
            return runtime.run(
                workflow, input, thread_id=thread_id, run_id=run_id, store=s, metadata=metadata,
                policy=policy, durability=durability, observer=observer, lease_ttl=lease_ttl,
                storage=self.storage, on_exists=on_exists, on_thread_busy=on_thread_busy,
                wait=wait,
            )  # fmt: skip

    async def arun(
        self,
        workflow: Any,
        input: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        policy: CheckpointPolicy | None = None,
        durability: Durability | None = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
        on_exists: OnExists = "continue",
        on_thread_busy: OnThreadBusy = "reject",
        wait: bool = False,
    ) -> RunResult:
        """Async twin of :meth:`run`; store calls run in a worker thread. A Ctrl-C is handled
        as :meth:`run` says when the event loop runs in the main thread (``asyncio.run``'s
        own handler stands aside while the run executes)."""
        with self._using() as s:
            return await runtime.arun(
                workflow, input, thread_id=thread_id, run_id=run_id, store=s, metadata=metadata,
                policy=policy, durability=durability, observer=observer, lease_ttl=lease_ttl,
                storage=self.storage, on_exists=on_exists, on_thread_busy=on_thread_busy,
                wait=wait,
            )  # fmt: skip

    def resume(
        self,
        run_id: str,
        *,
        value: Any = NO_VALUE,
        interrupt_id: str | None = None,
        workflow: Any = None,
        from_checkpoint: str | None = None,
        policy: CheckpointPolicy | None = None,
        durability: Durability | None = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
        wait: bool = False,
    ) -> RunResult:
        """Continue a run from its latest checkpoint (or ``from_checkpoint``), loaded from the store only.

        Args:
            run_id: the run to continue.
            value: the value for the run's pending ``ctx.interrupt`` (recorded in the
                journal, then the step re-executes and receives it).
            interrupt_id: which pending interrupt ``value`` answers, when there are several.
            workflow: the Workflow or Agent; by default imported from the reference
                stored with the run.
            from_checkpoint: continue from this checkpoint of the run instead of the latest.
            wait: a run waiting for a timer, an event or its children that is not woken
                yet is waited for here (else refused); and when a step waits again, this
                blocks until it is woken and goes on (see :meth:`run`).

        Raises:
            NotFoundError: no such run or checkpoint.
            RunStateError: the run has ended (completed, cancelled, compensated), waits
                for an approval or an interrupt value that was not given, or waits for a
                timer, an event or child runs and ``wait`` is False.
            LeaseHeldError: a live process is executing the run.
            CorruptRecordError: the checkpoint failed its integrity check.
            KeyboardInterrupt: a Ctrl-C stopped the run before it ended (see :meth:`run`).
        """
        with self._using() as s:
            return runtime.resume(
                run_id, value=value, interrupt_id=interrupt_id, store=s, workflow=workflow,
                from_checkpoint=from_checkpoint, policy=policy, durability=durability,
                observer=observer, lease_ttl=lease_ttl, storage=self.storage, wait=wait,
            )  # fmt: skip

    async def aresume(
        self,
        run_id: str,
        *,
        value: Any = NO_VALUE,
        interrupt_id: str | None = None,
        workflow: Any = None,
        from_checkpoint: str | None = None,
        policy: CheckpointPolicy | None = None,
        durability: Durability | None = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
        wait: bool = False,
    ) -> RunResult:
        """Async twin of :meth:`resume` (a Ctrl-C as :meth:`arun` says)."""
        with self._using() as s:
            return await runtime.aresume(
                run_id, value=value, interrupt_id=interrupt_id, store=s, workflow=workflow,
                from_checkpoint=from_checkpoint, policy=policy, durability=durability,
                observer=observer, lease_ttl=lease_ttl, storage=self.storage, wait=wait,
            )  # fmt: skip

    def submit(
        self,
        workflow: Any,
        input: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_exists: OnExists = "continue",
        on_thread_busy: OnThreadBusy = "reject",
        observer: Observer | None = None,
        queue: str | None = None,
        priority: int = 0,
        dedup_key: str | None = None,
    ) -> RunInfo:
        """Queue a run for the worker fleet (``savegame worker``) instead of running it here.

        The run is created with its input checkpoint and status ``queued``, owned by
        nobody; the first worker that claims it executes it. Workers import the
        workflow from the reference stored with the run, so it must live in an
        importable module or file.

        A ``run_id`` that exists is handled as :meth:`run` does, for the fleet:
        with ``on_exists="continue"`` (default) an unfinished run is left to the fleet
        (a failed one, or one whose approval was decided, is queued again) and a
        finished one is returned as it is; ``"return"`` returns the row untouched;
        ``"reject"`` raises RunExistsError. ``on_thread_busy`` is as for ``run``.

        Args:
            queue: put the run in this queue, declared in the store
                (:meth:`Queues.declare`): workers start it within the queue's limits
                (SQLite and PostgreSQL).
            priority: within the claims, higher is started sooner (default 0, as every run
                of no queue).
            dedup_key: while a run of ``queue`` submitted with this key is unfinished, a
                submit with it creates nothing and returns that run's row; once it has
                finished (completed, cancelled ...) the key starts a new run.

        Returns:
            The run's row (``queued`` for a new run).

        Raises:
            ConfigurationError: ``queue`` on a store without queues, or ``priority`` /
                ``dedup_key`` without ``queue``.
            NotFoundError: ``queue`` is not declared in the store.
        """
        with self._using() as s:
            return fleet.submit(
                workflow, input, thread_id=thread_id, run_id=run_id, store=s, metadata=metadata,
                storage=self.storage, on_exists=on_exists, on_thread_busy=on_thread_busy,
                observer=observer, queue=queue, priority=priority, dedup_key=dedup_key,
            )  # fmt: skip

    def fork(
        self,
        checkpoint_id: str,
        *,
        update: Mapping[str, Any] | None = None,
        set: Mapping[str, Any] | None = None,
        reason: str | None = None,
        by: str | None = None,
        authenticated_as: str | None = None,
        mode: Mode = "replay",
        run: bool = True,
        workflow: Any = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
    ) -> ForkResult:
        """Start a new run of the same thread from ``checkpoint_id``, optionally edited, and run it.

        The origin run is never written to; it may be finished, failed or still going.

        Args:
            checkpoint_id: where the fork starts (any checkpoint of any run).
            update: top-level state keys to replace.
            set: ``{"order.amount": 20}``: values to set at paths inside the state.
            reason: why, recorded with the fork's first checkpoint.
            by: who (default: user@host).
            authenticated_as: the identity a front end checked for the request (the web
                UI's ``ui-token:NAME``), recorded beside ``by``.
            mode: ``"replay"`` (default): a call with the same tool and arguments at the
                same position as in the origin gets the recorded result back, nothing is
                called, until the first call that differs; from there every call is made.
                ``"redo"``: every call is made again.
            run: False creates the fork without running it (``resume`` runs it later).
            workflow: the Workflow or Agent; by default imported from the origin run's reference.

        Returns:
            The fork's run id, where it ended, and the calls it reused and executed.

        Raises:
            NotFoundError: no such checkpoint.
            ConfigurationError: a path of ``set`` does not lead into the state, ``mode`` is unknown.
            StepError: a step of the fork raised (the fork is failed, the origin untouched).
        """
        with self._using() as s:
            return control.fork(
                checkpoint_id, update=update, set=set, reason=reason, by=by,
                authenticated_as=authenticated_as, mode=mode, run=run, store=s,
                workflow=workflow, observer=observer, lease_ttl=lease_ttl, storage=self.storage,
            )  # fmt: skip

    def send(
        self,
        run_id: str,
        topic: str,
        value: Any = None,
        *,
        key: str | None = None,
        by: str | None = None,
    ) -> Sent:
        """Send ``value`` to run ``run_id`` on ``topic``, exactly once per ``key``.

        The run's ``ctx.wait_for(topic)`` returns it: at once if the run waits for it now (the
        store wakes the run; a worker or ``resume`` continues it), else when the run first
        waits for the topic. Each event is taken by one wait, oldest first.

        Args:
            value: pure data (what ``wait_for`` returns).
            key: an idempotency key: a second send with the same key (and topic) is dropped.
            by: who sent it, recorded with the event (default: user@host).

        Raises:
            NotFoundError: no such run.
            RunStateError: the run has finished: nobody would take the event.
            ConfigurationError: a bad topic or key, or a store that cannot keep waiting runs.
            SerializationError: ``value`` is not pure data.
        """
        with self._using() as s:
            return control.send(run_id, topic, value, key=key, store=s, storage=self.storage, by=by)

    def cancel(
        self,
        run_id: str,
        *,
        compensate_effects: bool = False,
        wait: float = 30.0,
        by: str | None = None,
        authenticated_as: str | None = None,
        lease_ttl: float = DEFAULT_TTL,
    ) -> RunInfo:
        """Ask a run to stop; from any process.

        A run being executed stops at its next step boundary or ``ctx.call`` and
        writes a ``cancelled`` checkpoint; a run that nobody executes (interrupted,
        waiting, failed, orphaned) is marked cancelled here and now. The child runs it
        started are cancelled the same way, theirs too, and with ``compensate_effects``
        each one's completed writes are then compensated, the children's first.

        Args:
            wait: seconds to wait for a live owner to stop at its next boundary.
            by: who asks (default: user@host): the ``cancelled`` checkpoint written here
                names them (``metadata["cancelled_by"]``), and so do the approvals and
                interrupts it closes. A run a live process executes writes its own
                ``cancelled`` checkpoint, which cannot know who asked.
            authenticated_as: the identity a front end checked for the request (the web
                UI's ``ui-token:NAME``), recorded beside ``by`` wherever ``by`` is.

        Returns:
            The run's row afterwards (``cancel_requested`` stays set if a live
            owner did not stop within ``wait`` seconds).

        Raises:
            RunStateError: the run has finished, or its owner finished it while this
                call waited (the request came during its last step).
        """
        with self._using() as s:
            return control.cancel(
                run_id, store=s, compensate_effects=compensate_effects, wait=wait, by=by,
                authenticated_as=authenticated_as, lease_ttl=lease_ttl, storage=self.storage,
            )  # fmt: skip

    def compensate(self, run_id: str, *, lease_ttl: float = DEFAULT_TTL) -> RunResult:
        """Undo the run's completed write effects that declared a compensation, newest first.

        Exactly once across crashes: run it again after a crash and it continues.

        Raises:
            CompensationError: a compensation failed; the run is compensation_failed.
            LeaseHeldError: a live process is executing the run (cancel it first).
        """
        with self._using() as s:
            return control.compensate(run_id, store=s, lease_ttl=lease_ttl, storage=self.storage)
