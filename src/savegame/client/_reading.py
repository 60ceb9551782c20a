"""The handle's readers: runs, threads, histories, checkpoints, journals, diffs, trees, model
calls; and what time travel looks at before it forks or restores."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from savegame import control, inspect, workspace
from savegame.client._bound import Bound
from savegame.control import Effect, ForkPlan
from savegame.inspect import ModelCallRecord, ReplayReport, RunModelUsage, StateDiff, Tree
from savegame.model import Checkpoint, CheckpointHeader, RunInfo, RunStatus
from savegame.stores import ThreadInfo
from savegame.workspace import RestoredWorkspace, Workspace


class Reading(Bound):
    """What the handle's store holds, verified and decoded; nothing here writes a run."""

    def runs(
        self,
        *,
        thread_id: str | None = None,
        status: RunStatus | str | None = None,
        limit: int = 100,
        workflow: str | None = None,
        search: str | None = None,
        before: str | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first (metadata as in :meth:`get_run`), a page at a time.

        Args:
            thread_id, status, workflow: only runs of that thread, status, workflow name.
            search: only runs whose run id or thread id contains this text (any case).
            before: the last run id of the previous page: the next page starts after it.

        Raises:
            NotFoundError: ``before`` names no run.
        """
        with self._using() as s:
            return inspect.list_runs(
                thread_id=thread_id, status=status, limit=limit, workflow=workflow,
                search=search, before=before, store=s, storage=self.storage,
            )  # fmt: skip

    def threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        """Threads, most recently updated first, each summarised from its runs."""
        with self._using() as s:
            return inspect.list_threads(limit=limit, store=s)

    def get_run(self, run_id: str) -> RunInfo:
        """The run's row: status, head, lease, metadata (sensitive values decrypted when the
        keyring allows). Raises NotFoundError."""
        with self._using() as s:
            return inspect.get_run(run_id, store=s, storage=self.storage)

    def history(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointHeader]:
        """A run's checkpoints, newest first, without decoding states.

        Sensitive metadata (``StorageConfig.sensitive_metadata``) is decrypted when
        the keyring allows; filtering on it is not possible (it is stored encrypted).
        """
        with self._using() as s:
            return inspect.history(
                run_id, limit=limit, before=before, metadata=metadata, store=s,
                storage=self.storage,
            )  # fmt: skip

    def checkpoint(self, ident: str) -> Checkpoint:
        """A decoded checkpoint by checkpoint id, or a run's latest checkpoint by run id.

        The state is returned as stored (no migration); integrity is verified along
        the record's whole chain (its delta bases down to a keyframe).

        Raises:
            NotFoundError: neither a run nor a checkpoint has that id.
            CorruptRecordError: the record failed its integrity check (or is stored in
                plaintext while ``storage`` requires encryption).
            EncryptionKeyError: the record's key id is not in the keyring.
        """
        with self._using() as s:
            return inspect.get_checkpoint(ident, store=s, storage=self.storage)

    def effects(self, run_id: str) -> list[Effect]:
        """A run's journal, oldest first, verified, decrypted and decoded."""
        with self._using() as s:
            return control.list_effects(run_id, store=s, storage=self.storage)

    def diff(self, a: str, b: str, *, context: int = 0) -> StateDiff:
        """Compare the states of two checkpoints (a run id means the run's latest checkpoint).

        Args:
            a: the checkpoint (or run) compared from.
            b: the checkpoint (or run) compared to.
            context: also list up to this many unchanged siblings on each side of a change.

        States load through :meth:`checkpoint`: integrity is checked and encrypted
        records are opened with the handle's keyring.

        Raises:
            NotFoundError: ``a`` or ``b`` is neither a run nor a checkpoint.
        """
        with self._using() as s:
            return inspect.diff(a, b, context=context, store=s, storage=self.storage)

    def replay(
        self, runs: str | Sequence[str], *, against: Any, live: bool = False
    ) -> ReplayReport:
        """Replay recorded runs against the code given: each call answered from the run's
        journal, none made; the report says per run whether it replayed to its end with
        the same calls and states, or where it first diverged.

        Each run re-executes from its first checkpoint in a scratch ``memory://`` store:
        nothing is written to the handle's store. A call the journal holds no answer for
        at its position (another tool, other arguments, another prompt, an extra call)
        stops the replay before it is made; the report names it (its step, its position,
        what the journal holds there, the difference) and the first checkpoint whose
        state differs from the recording's (as :meth:`diff` shows one). A run the
        recording left unfinished (waiting for an approval) replays up to where it stops.
        Files: :func:`savegame.inspect.replay_file`; tests:
        :func:`savegame.testing.assert_replays`.

        Args:
            runs: run ids, or thread ids (all their runs).
            against: the workflow (or Agent) to replay with; a list of them to replay runs
                of several workflows, each with the one of its workflow's name; a mapping
                ``{recorded name: workflow}`` for a workflow renamed since the recording.
            live: where a run diverged, run it again with its calls after the first
                difference made for real (the model asked, the tools called: point them
                at a sandbox), in the scratch store, to see where the new code takes it.

        Raises:
            NotFoundError: a run or thread the store does not have.
            ConfigurationError: a run whose workflow ``against`` does not name.
        """
        with self._using() as s:
            return inspect.replay(runs, against=against, live=live, store=s, storage=self.storage)

    def tree(self, ident: str) -> Tree:
        """The tree of runs of a thread, given the thread id or the id of one of its runs.

        Raises:
            NotFoundError: neither a run nor a thread has that id.
        """
        with self._using() as s:
            return inspect.tree(ident, store=s, storage=self.storage)

    def plan_fork(self, checkpoint_id: str) -> ForkPlan:
        """What :meth:`fork` would start from and the recorded writes it could repeat.

        Raises:
            NotFoundError: no such checkpoint.
        """
        with self._using() as s:
            return control.plan_fork(checkpoint_id, store=s, storage=self.storage)

    def model_calls(self, run_id: str) -> list[ModelCallRecord]:
        """A run's model calls, oldest first, each with its request and response (verified and
        decrypted like every journal entry). Raises NotFoundError for an unknown run."""
        with self._using() as s:
            return inspect.model_calls(run_id, store=s, storage=self.storage)

    def model_usage(self, run_id: str) -> RunModelUsage:
        """What a run's model calls used (input, output and cached tokens) and cost, in all and
        per model, from the responses its journal recorded. A call the run replayed after a
        crash is in its journal once, so it counts once."""
        with self._using() as s:
            return inspect.model_usage(run_id, store=s, storage=self.storage)

    def restore_workspace(
        self, checkpoint: Checkpoint, path: str | os.PathLike[str] | Workspace
    ) -> RestoredWorkspace | None:
        """Make the directory ``path`` what it was at ``checkpoint``: files, deletions, modes.

        Resume calls it before the first step runs; a fork calls it for the directory its
        new run works in. A checkpoint without a workspace manifest leaves the directory as
        it is and returns None. Paths ``path``'s ignore patterns match are left alone; a
        plain path has none, so pass the workflow's :class:`Workspace` to keep its ignored
        files (a plain path restores the directory as the manifest has it, and deletes them).
        The checkpoint's files are read from the handle's store.

        Raises:
            CorruptRecordError: naming the checkpoint, when its manifest would write outside
                the workspace or a file's blob is missing or damaged (nothing is written then
                for a bad manifest; a bad blob stops the restore where it is found).
            WorkspaceError: ignored paths stand where the checkpoint has its files (a
                directory holding some where it has a file), naming them; nothing is written.
        """
        with self._using() as s:
            return workspace.restore_workspace(checkpoint, path, store=s, storage=self.storage)
