"""The handle's verbs for a person's decisions: approve, reject, supply, resolve, and what waits for them."""

from __future__ import annotations

from typing import Any

from savegame import control
from savegame.client._bound import Bound
from savegame.control import Decision
from savegame.effects import PendingInterrupt, decisions
from savegame.model import EffectRecord
from savegame.runtime import DEFAULT_TTL, Observer


class Decisions(Bound):
    """Approvals, interrupt values and in-doubt calls, decided on the handle's store."""

    def pending(self, run_id: str | None = None) -> list[PendingInterrupt]:
        """Approvals and interrupts waiting for a person (of one run, or of every run)."""
        with self._using() as s:
            return control.pending_interrupts(run_id, store=s, storage=self.storage)

    def approve(
        self,
        run_id: str,
        *,
        interrupt_id: str | None = None,
        edit: dict[str, Any] | None = None,
        by: str | None = None,
        authenticated_as: str | None = None,
        resume: bool = True,
        workflow: Any = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
    ) -> Decision:
        """Record approval of a gated tool call (``edit`` replaces its arguments), then
        continue the run here if its workflow loads here.

        An edit is checked against the tool's signature first (the workflow's module is
        imported from the run's reference to find the tool), so it cannot leave the run stuck.

        Args:
            by: who decides, as they say (default: user@host), recorded with the decision.
            authenticated_as: the identity a front end checked for the request (the web
                UI's ``ui-token:NAME``), recorded beside ``by``; None: nothing was checked.
            resume: continue the run in this process once the decision is recorded, where
                its workflow loads (``workflow``, or its stored reference imports here).
                Where it does not, or with ``resume=False``, the run is queued for the
                worker fleet instead; a ``savegame worker`` or :meth:`resume` continues it.
            workflow: the Workflow or Agent to continue with (default: imported from the
                reference stored with the run).
            observer: callbacks while the run continues here.

        Returns:
            The decision as recorded, and where the run ended if it was continued here
            (or the error that stopped it, or why it was not continued).

        Raises:
            NotFoundError, RunStateError, EffectSettledError: the decision was not recorded
                (no such run or pending approval; someone decided first).
        """
        with self._using() as s:
            return control.approve(
                run_id, interrupt_id=interrupt_id, edit=edit, by=by,
                authenticated_as=authenticated_as, store=s, storage=self.storage, resume=resume,
                workflow=workflow, observer=observer, lease_ttl=lease_ttl,
            )  # fmt: skip

    def reject(
        self,
        run_id: str,
        *,
        reason: str,
        interrupt_id: str | None = None,
        by: str | None = None,
        authenticated_as: str | None = None,
        resume: bool = True,
        workflow: Any = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
    ) -> Decision:
        """Record rejection of a gated tool call (its ``ctx.call`` raises ApprovalRejected), then
        continue the run here if its workflow loads here; ``resume`` and the rest as for
        :meth:`approve`."""
        with self._using() as s:
            return control.reject(
                run_id, reason=reason, interrupt_id=interrupt_id, by=by,
                authenticated_as=authenticated_as, store=s, storage=self.storage, resume=resume,
                workflow=workflow, observer=observer, lease_ttl=lease_ttl,
            )  # fmt: skip

    def supply(
        self,
        run_id: str,
        value: Any,
        *,
        interrupt_id: str | None = None,
        by: str | None = None,
        authenticated_as: str | None = None,
        resume: bool = True,
        workflow: Any = None,
        observer: Observer | None = None,
        lease_ttl: float = DEFAULT_TTL,
    ) -> Decision:
        """Give a run's pending ``ctx.interrupt`` its value (which the step's call returns),
        recorded with who gave it; then continue the run here if its workflow loads here.

        ``resume(run_id, value=...)`` does the same in one call where the workflow is at
        hand; this one is for a person answering from elsewhere (the web UI, an approval
        service), like :meth:`approve`: ``resume`` and the rest as there.

        Raises:
            NotFoundError, RunStateError, EffectSettledError: the value was not recorded
                (no such run, or it waits for no interrupt; someone answered first).
            SerializationError: ``value`` is not pure data.
        """
        with self._using() as s:
            return control.supply(
                run_id, value, interrupt_id=interrupt_id, by=by,
                authenticated_as=authenticated_as, store=s, storage=self.storage, resume=resume,
                workflow=workflow, observer=observer, lease_ttl=lease_ttl,
            )  # fmt: skip

    def resolve(
        self,
        run_id: str,
        request_id: str,
        *,
        done: bool,
        result: Any = decisions.NO_RESULT,
        by: str | None = None,
        authenticated_as: str | None = None,
    ) -> EffectRecord:
        """Settle an in-doubt call: it happened (``done=True``, with its ``result``) or it did not.

        With ``done=True`` on a write, ``result`` is required (``result=None`` must be
        said): the re-executed step gets it as the call's return value.

        Raises:
            ConfigurationError: a write settled done without ``result``.
        """
        with self._using() as s:
            return control.resolve(
                run_id, request_id, done=done, result=result, by=by,
                authenticated_as=authenticated_as, store=s, storage=self.storage,
            )  # fmt: skip
