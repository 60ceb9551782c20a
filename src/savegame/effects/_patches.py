"""``ctx.patched(id)``: a change to a step's code that runs in flight take only where
they had not got to yet.

Temporal's ``workflow.patched`` answers from the workflow's event history: True when the
code runs a point for the first time, False when it replays history written by code
without the patch. savegame replays differently (a step runs again from its start, its
recorded calls returned from the journal; finished steps never run again), so the
question becomes: *did this run already go past this point of this step under code that
did not have the patch?* The point is the position of the step's next call (its
request id, ``<run>:<step>:<index>``, inside a gather ``...:b<k>:<n>``). The answer:

1. A marker for this patch at this position in the run's journal: its recorded answer.
2. Else, the journal holds a call at this position (or an entry named after one: an
   approval a person gave for it, an attempt, a stream's marker): the step ran past here before,
   under code without the patch (code with it would have left a marker) -> False, so
   the step takes its old path and its recorded calls replay as they were made.
3. Else, a fork that has not diverged from its origin: the origin's marker at the same
   position, else False if the origin made a call there, done or not (the fork replays
   the origin's calls: it must take the same path to reuse them, and to stop at one the
   origin left in doubt).
4. Else the step is here for the first time -> True.

The answer is committed at once as a journal entry of kind ``patch`` named after the
position (``<request id of the next call>:patch:<id>``, its result the answer), before
the step goes on: a re-execution after a crash, a resume days later and a fork of the
run all get the same answer (rule 1), even when the patched path's own calls have since
filled the position (which, without the marker, rule 2 would read as "passed").
Deciding takes no call position, so the call numbering of the old path is unchanged
and its recorded calls still match.

``ctx.deprecate_patch(id)``, once no run that took the old path is left: the code keeps
only the new path; a run whose marker says it took the old one (or a fork whose origin
took it there) stops with NonDeterminismError instead of going on down a path it never
started; a fresh run
records True, so code rolled back to ``patched(id)`` agrees with it.
"""

from __future__ import annotations

from savegame.codec import decode_value, encode_value, open_entry
from savegame.effects._calls import Calls
from savegame.errors import ConfigurationError, NonDeterminismError
from savegame.model import EffectKind, EffectRecord, EffectStatus, utcnow
from savegame.stores.base import ALL_EFFECTS

#: The longest patch id (it is part of a request id, a table cell).
MAX_PATCH_ID = 100

#: What a marker's metadata says about where its answer came from.
DECIDED = "decided"
FRESH, PASSED, ORIGIN = "fresh", "passed", "origin"


def check_patch_id(patch_id: object) -> str:
    """``patch_id`` if it can name a patch: a short printable string without ``:``."""
    if (
        not isinstance(patch_id, str)
        or not patch_id
        or len(patch_id) > MAX_PATCH_ID
        or not patch_id.isprintable()
        or ":" in patch_id
    ):
        raise ConfigurationError(
            f"a patch id must be a printable string of 1 to {MAX_PATCH_ID} characters "
            f"without ':', not {patch_id!r}"
        )
    return patch_id


def marker_id(request_id: str, patch_id: str) -> str:
    """The request id of the patch marker placed before the call ``request_id``."""
    return f"{request_id}:patch:{patch_id}"


def _answer(entry: EffectRecord) -> bool:
    return decode_value(entry.result) is True if entry.result is not None else False


def _reached(calls: Calls, at: str) -> bool:
    """Whether the run's journal shows a call at ``at``: its entry, or one named after it
    (an approval a person gave for it, an attempt, a stream's marker), though not
    another patch's marker: a person's decision is bound to the call at its position."""
    if calls.journal.get(at) is not None:
        return True
    prefix, markers = at + ":", f"{at}:patch:"
    return any(
        e.request_id.startswith(prefix) and not e.request_id.startswith(markers)
        for e in calls.journal.entries()
    )


def _origin_answer(calls: Calls, at: str, patch_id: str) -> bool | None:
    """Rule 3: what a fork's origin did at this point (its marker's answer, else False
    if it made a call there, however that call ended), or None if it was not there."""
    replay = calls.replay
    if replay is None or replay.diverged:
        return None
    origin = replay.origin.run_id
    base = f"{origin}:{calls.position(at)}"
    # One read by prefix: the call, its approval and attempts, and its patch markers;
    # not the calls whose index only starts with this one's (1:1 is no 1:10).
    found = calls.journal.store.list_effects(origin, request_prefix=base, limit=ALL_EFFECTS)
    there = [
        open_entry(e, calls.journal.storage)
        for e in found
        if e.request_id == base or e.request_id.startswith(base + ":")
    ]
    mark = marker_id(base, patch_id)
    for entry in there:
        if entry.request_id == mark and entry.kind is EffectKind.PATCH:
            return _answer(entry)
    if any(not e.request_id.startswith(f"{base}:patch:") for e in there):
        return False
    return None


def _decide(calls: Calls, at: str, patch_id: str) -> tuple[bool, str]:
    """The answer for a position with no marker, and why (rules 2 to 4)."""
    if _reached(calls, at):
        return False, PASSED
    origin = _origin_answer(calls, at, patch_id)
    if origin is not None:
        return origin, ORIGIN
    return True, FRESH


def patched(calls: Calls, patch_id: str, *, deprecated: bool = False) -> bool:
    """Whether the step takes the patched path here: see the module docstring.

    Raises:
        NonDeterminismError: the journal holds another kind of entry under the marker's
            id, or (``deprecated``) the run took the old path here.
    """
    check_patch_id(patch_id)
    index, at = calls.peek()
    mark = marker_id(at, patch_id)
    entry = calls.journal.get(mark)
    if entry is None:
        answer, why = _decide(calls, at, patch_id)
        if deprecated and not answer and why == ORIGIN and calls.replay is not None:
            # A fork replays its origin's calls; the origin took the old path here, which
            # this code no longer has. The new path would diverge and make its calls for
            # real (again, past a call the origin left in doubt): it stops instead.
            raise NonDeterminismError(
                calls.run_id, mark,
                f"patch {patch_id!r} not taken by the fork's origin {calls.replay.origin.run_id}"
                " (it kept its old path here)",
                f"deprecate_patch({patch_id!r}), which has only the new path (a fork with "
                "mode='redo' makes the new path's calls for real)",
            )  # fmt: skip
        if deprecated and not answer:
            # Nothing recorded: the old path is gone from this code, and the calls the
            # run made there are what the next calls are checked against.
            return True
        fresh = EffectRecord(
            run_id=calls.run_id, request_id=mark, kind=EffectKind.PATCH, name=patch_id,
            step=calls.step, node=calls.node, call_index=index, status=EffectStatus.DONE,
            arguments=encode_value({"patch": patch_id}, "patch"),
            result=encode_value(answer, "patch"), metadata={DECIDED: why},
            completed_at=utcnow(),
        )  # fmt: skip
        entry = calls.journal.intent(fresh)
    if entry.kind is not EffectKind.PATCH:
        raise NonDeterminismError(
            calls.run_id, mark, f"{entry.kind.value} {entry.name!r}", f"patched({patch_id!r})"
        )
    answer = _answer(entry)
    if deprecated and not answer:
        raise NonDeterminismError(
            calls.run_id, mark, f"patch {patch_id!r} not taken (the run kept its old path)",
            f"deprecate_patch({patch_id!r}), which has only the new path",
        )  # fmt: skip
    return answer


__all__ = ["MAX_PATCH_ID", "check_patch_id", "marker_id", "patched"]
