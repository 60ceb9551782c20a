"""Replay recorded runs against new code: ``savegame replay RUN --against module:wf``.

A recorded run holds every model request and answer and every tool call and result
(its journal) and its state at each checkpoint. Replaying it re-executes the run from
its first checkpoint with the code given, each call answered from the journal: a
strict fork (:func:`savegame.control.strict_replay`) that never calls a model or a
tool. The first call the journal does not answer (another tool, other arguments, another
prompt, a call the recording never made) stops the replay there, before it is made;
the report names it beside what the journal holds at that position, and the first
checkpoint whose state differs between the recording and the replay.

Nothing is written to the store the runs come from: each replay loads its runs into a
scratch ``memory://`` store (through an export file, so a file and a store take the same
checks) and forks there. An export file replays without the store it came from.

A run the recording left unfinished (waiting for an approval, failed, in doubt) replays
up to where it stopped: a call there that the journal holds no result for is where the
recording ends, not a divergence, unless the code asks another call there.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from savegame.codec import decode_value, open_entry, verify_run
from savegame.codec.storage import StorageConfig
from savegame.control import StrictReplay, fork, strict_replay
from savegame.effects import EXECUTED, REPLAY_KEY, Diverged, Unserved, asked
from savegame.errors import (
    ConfigurationError,
    CorruptRecordError,
    DamagedExportError,
    NotFoundError,
    SavegameError,
    StateVersionError,
    StepError,
    describe,
)
from savegame.inspect._diff import StateDiff, _walk
from savegame.inspect._replay_report import (
    CallKind,
    Divergence,
    LiveRun,
    ReplayedCall,
    ReplayReport,
    RunReplay,
    StateDifference,
)
from savegame.maintenance import export_run, import_run, is_export
from savegame.model import (
    WORKSPACE_KEY,
    Checkpoint,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
)
from savegame.runtime import Workflow, as_workflow, decode_checkpoint, resume
from savegame.stores import Store
from savegame.stores.base import ALL_EFFECTS
from savegame.workspace import Workspace

Against = Any
"""A Workflow or an Agent, or several (matched to each run by workflow name), or a mapping
from the name a run was recorded under to the workflow that now runs it (a rename)."""


def replay(
    runs: str | Sequence[str],
    *,
    against: Against,
    live: bool = False,
    store: Store,
    storage: StorageConfig | None = None,
) -> ReplayReport:
    """Replay runs of ``store`` (run or thread ids) against ``against``.

    The operation behind :meth:`savegame.Savegame.replay`, which documents it, on the
    open ``store``; ``store`` is only read.
    """
    idents = [runs] if isinstance(runs, str) else list(runs)
    with tempfile.TemporaryDirectory(prefix="savegame-replay-") as tmp:
        files = []
        for n, ident in enumerate(idents):
            path = Path(tmp) / f"{n}.sgrun"
            export_run(ident, path, store=store)
            files.append((path, store.url))
        return _replay_files(files, against, storage, live)


def replay_file(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    against: Against,
    live: bool = False,
    storage: StorageConfig | None = None,
) -> ReplayReport:
    """Replay the runs of export files (``savegame export``) against ``against``, with
    no store: offline, without the store they came from. A directory stands for the
    export files in it, in name order (other files are left alone; none is an error).

    Each call of the replayed code is answered from the run's journal; none is made. The
    report says, per run, whether it replayed to its end with the same calls and states,
    or where it first diverged: the call (step, position, what the journal holds there
    beside what the code asked, their difference) and the first checkpoint whose state
    differs.

    Args:
        against: the workflow (or Agent) to replay with; several, to replay runs of
            several workflows (each run with the one of its workflow's name); a mapping
            ``{recorded name: workflow}`` for a workflow renamed since.
        live: where a run diverged, run it again from its start with its calls made for
            real after the first difference (a fork in the scratch store: the model is
            asked, the tools are called), to see where the new code takes it
            (``RunReplay.live``). Point the tools at a sandbox.
        storage: the storage settings the runs were written with (a keyring, for
            encrypted exports).

    Raises:
        NotFoundError: a path that is not there.
        DamagedExportError: a file that is damaged, edited or not an export (its path,
            which record and why).
        ConfigurationError: a run whose workflow ``against`` does not name.
    """
    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files: list[tuple[Path, str]] = []
    for item in given:
        path = Path(item)
        if path.is_dir():
            found = [
                p for p in sorted(path.iterdir())
                if p.is_file() and not p.name.startswith(".") and is_export(p)
            ]  # fmt: skip
            if not found:  # a CI job that replays nothing must not pass
                raise NotFoundError("export file in folder", str(path))
            files.extend((p, str(p)) for p in found)
        elif path.is_file():
            files.append((path, str(path)))
        else:
            raise NotFoundError("export file", str(path))
    return _replay_files(files, against, storage, live)


def _replay_files(
    files: Iterable[tuple[Path, str]],
    against: Against,
    storage: StorageConfig | None,
    live: bool = False,
) -> ReplayReport:
    from savegame.stores import MemoryStore  # only a replay needs a scratch store

    workflows = _by_name(against)
    out: list[RunReplay] = []
    for path, source in files:
        with MemoryStore() as scratch, tempfile.TemporaryDirectory(prefix="sg-replay-") as tmp:
            try:
                loaded = import_run(path, store=scratch, storage=storage)
            except DamagedExportError as exc:
                raise DamagedExportError(
                    exc.reason, record=exc.record, offset=exc.offset, file=str(path)
                ) from None
            except CorruptRecordError as exc:  # a record of the file fails its own check
                why = f"record {exc.record_id}: {exc.reason}"
                raise DamagedExportError(why, file=str(path)) from None
            for run_id in loaded.run_ids:
                info = verify_run(scratch.get_run(run_id), storage)
                wf = _workflow_for(info, workflows, source, tmp)
                out.append(_replay_run(scratch, info, wf, storage, source, live=live))
    return ReplayReport(tuple(out))


def _by_name(against: Against) -> dict[str, Workflow]:
    """The workflows by the name of the runs each replays: its own, or the one a mapping
    gives it (a workflow renamed since the runs were recorded)."""
    if isinstance(against, Mapping):
        named = [(str(name), as_workflow(item)) for name, item in against.items()]
    else:
        items = list(against) if isinstance(against, (list, tuple)) else [against]
        named = [(wf.name, wf) for wf in map(as_workflow, items)]
    if not named:
        raise ConfigurationError("replay needs a workflow to replay against")
    out: dict[str, Workflow] = {}
    for name, wf in named:
        if name in out and out[name] is not wf:
            raise ConfigurationError(f"two workflows for runs of {name!r} to replay against")
        out[name] = wf
    return out


def _workflow_for(
    info: RunInfo, workflows: Mapping[str, Workflow], source: str, folder: str
) -> Workflow:
    """The workflow of the run's name; a workspace moved to a scratch directory (a
    replay restores the run's files: never into the user's)."""
    wf = workflows.get(info.workflow)
    if wf is None:
        names = ", ".join(repr(n) for n in workflows)
        raise ConfigurationError(
            f"run {info.run_id} ({source}) was recorded by workflow {info.workflow!r}; "
            f"the workflows to replay against are {names}: pass one named {info.workflow!r}"
        )
    if wf.name != info.workflow:  # renamed: the fork of the run must carry its name
        wf = copy.copy(wf)
        wf.name = info.workflow
    if wf.workspace is None:
        return wf
    given = wf.workspace
    scratch = copy.copy(wf)

    def elsewhere(run_id: str) -> Workspace:
        path = tempfile.mkdtemp(prefix="ws-", dir=folder)
        if isinstance(given, Workspace):  # its ignore patterns and size limit kept
            return replace(given, path=path)
        return Workspace(path)

    scratch.workspace = elsewhere
    return scratch


def _replay_run(
    store: Store,
    info: RunInfo,
    wf: Workflow,
    storage: StorageConfig | None,
    source: str,
    *,
    live: bool = False,
) -> RunReplay:
    headers = sorted(store.list_checkpoints(info.run_id), key=lambda h: h.checkpoint_id)
    head = store.latest_checkpoint(info.run_id).header
    first = headers[0]
    try:
        done = strict_replay(first.checkpoint_id, store=store, workflow=wf, storage=storage)
    except StateVersionError as exc:  # a migration missing: the run cannot even start
        why = f"its first checkpoint does not load in this code: {exc}"
        return RunReplay(
            run_id=info.run_id, workflow=info.workflow, source=source, recorded=head.status,
            steps=0, reused=0, divergence=Divergence(first.step, None, str(first.step), why),
        )  # fmt: skip
    recorded = _states(store, info.run_id, wf, storage)
    replayed = _states(store, done.run_id, wf, storage)
    end = store.latest_checkpoint(done.run_id).header
    journal = [open_entry(e, storage) for e in store.list_effects(info.run_id, limit=ALL_EFFECTS)]
    divergence, note = None, None
    if done.diverged is not None:
        if _where_it_stops(done.diverged, head.step, head.status, journal):
            note = f"replayed to where the recording stops ({head.status.value}, at step {done.diverged.step})"
        else:
            divergence = _divergence(done.diverged, journal)
    else:
        divergence = _ending(
            head.step, head.status, head.node, end.step, end.status, end.node, done
        )
    state = _first_difference(recorded, replayed)
    went_on = None
    if live and (divergence is not None or state is not None):
        went_on = _live(store, first.checkpoint_id, wf, storage, recorded[max(recorded)])
    return RunReplay(
        run_id=info.run_id, workflow=info.workflow, source=source, recorded=head.status,
        steps=end.step - first.step, reused=done.reused, divergence=divergence,
        state=state, note=note, live=went_on,
    )  # fmt: skip


def _live(
    store: Store, checkpoint_id: str, wf: Workflow, storage: StorageConfig | None, last: Checkpoint
) -> LiveRun:
    """The run again from ``checkpoint_id``, a fork whose calls after the first difference
    are made: where the new code takes it, against where the recording ended."""
    run_id = fork(checkpoint_id, run=False, store=store, workflow=wf, storage=storage).run_id
    error = None
    try:
        resume(run_id, store=store, workflow=wf, storage=storage)
    except StepError as exc:  # named without the scratch fork's run id
        error = f"step {exc.step!r} raised {describe(exc.cause)}"
    except SavegameError as exc:
        error = describe(exc)
    end = decode_checkpoint(store, store.latest_checkpoint(run_id), wf, storage)[0]
    made = tuple(
        f"{c.step}:{c.call_index} {c.name}"
        for c in sorted(
            (open_entry(e, storage) for e in store.list_effects(run_id, limit=ALL_EFFECTS)),
            key=lambda e: (e.step, e.call_index, e.request_id),
        )
        if c.metadata.get(REPLAY_KEY) == EXECUTED and c.kind is not EffectKind.APPROVAL
    )
    changes = tuple(
        c for c in _walk((), last.state, end.state, 0) if c.path[:1] != (WORKSPACE_KEY,)
    )
    return LiveRun(end.status, end.step, made, error, changes)


def _states(
    store: Store, run_id: str, wf: Workflow, storage: StorageConfig | None
) -> dict[int, Checkpoint]:
    """A run's state after each step it checkpointed (the first checkpoint of a step:
    a stop at a boundary holds the same state), migrated to ``wf``'s state version."""
    out: dict[int, Checkpoint] = {}
    for header in sorted(store.list_checkpoints(run_id), key=lambda h: h.checkpoint_id):
        if header.step not in out:
            record = store.get_checkpoint(header.checkpoint_id)
            out[header.step] = decode_checkpoint(store, record, wf, storage)[0]
    return out


def _first_difference(
    recorded: Mapping[int, Checkpoint], replayed: Mapping[int, Checkpoint]
) -> StateDifference | None:
    for step in sorted(recorded.keys() & replayed.keys()):
        a, b = recorded[step], replayed[step]
        # A workspace's files are not compared: the tools that wrote them were not called,
        # and the replay's folder is a scratch one.
        changes = tuple(c for c in _walk((), a.state, b.state, 0) if c.path[:1] != (WORKSPACE_KEY,))
        if changes or a.node != b.node:
            return StateDifference(step, a.node, b.node, StateDiff(a.header, b.header, changes))
    return None


def _where_it_stops(
    stop: Diverged, step: int, status: RunStatus, journal: Sequence[EffectRecord]
) -> bool:
    """Whether ``stop`` is where an unfinished recording stops, not a divergence: the
    recording never got further than this call, and holds no other call here."""
    if status is RunStatus.COMPLETED or stop.asked is None or stop.step <= step:
        return False
    if any(e.step > stop.step and e.kind is not EffectKind.EVENT for e in journal):
        return False
    entry = stop.recorded
    if entry is None:
        return True
    if entry.status is EffectStatus.DONE or entry.name != stop.asked.name:
        return False
    given = (EffectKind.READ, EffectKind.WRITE, EffectKind.APPROVAL, EffectKind.INTERRUPT)
    if entry.kind not in given:
        return entry.kind is stop.asked.kind or entry.kind is EffectKind.LLM
    return bool(decode_value(entry.arguments) == stop.asked.arguments)


def _divergence(stop: Diverged, journal: Sequence[EffectRecord]) -> Divergence:
    requests = asked(journal)
    mine = _asked(stop.asked)
    theirs = _entry(stop.recorded, requests) if stop.recorded is not None else None
    # Two calls of one kind compare by what they were given; a model call where the
    # journal holds a tool call (a step added) differs in everything: the lines say it.
    gated = {"tool", "approval"}
    same_kind = (
        mine is not None
        and theirs is not None
        and (mine.kind == theirs.kind or {mine.kind, theirs.kind} <= gated)
        and mine.kind not in ("wait", "child")
    )
    changes = tuple(_walk((), _payload(theirs), _payload(mine), 0)) if same_kind else ()
    return Divergence(
        stop.step, stop.node or None, stop.position, _why(stop, mine, theirs), mine, theirs,
        changes,
    )  # fmt: skip


def _why(stop: Diverged, mine: ReplayedCall | None, theirs: ReplayedCall | None) -> str:
    if mine is None:
        return stop.reason
    if theirs is None:
        return "the journal holds no call at this position: the recording never made it"
    if theirs.node != mine.node:
        return f"the journal holds a call of step {theirs.node!r} here"
    if theirs.name != mine.name:
        return f"the journal holds a call of {theirs.name} here"
    if mine.kind == "model":
        return "the journal holds another request to this model here"
    if mine.kind == "interrupt":
        return "the journal holds another question to a person here"
    if mine.kind in ("wait", "child"):
        return stop.reason
    return "the journal holds this tool called with other arguments here"


_KINDS: dict[EffectKind, CallKind] = {
    EffectKind.LLM: "model",
    EffectKind.APPROVAL: "approval",
    EffectKind.INTERRUPT: "interrupt",
    EffectKind.WAIT: "wait",
    EffectKind.SLEEP: "wait",
    EffectKind.CHILD: "child",
}


def _asked(call: Unserved | None) -> ReplayedCall | None:
    if call is None:
        return None
    return ReplayedCall(_KINDS.get(call.kind, "tool"), call.name, call.arguments, call.node)


def _entry(entry: EffectRecord, requests: Mapping[str, Any]) -> ReplayedCall:
    if entry.kind is EffectKind.LLM:
        request = requests.get(entry.request_id)
        shown = None if request is None else {"messages": request.messages, "tools": request.tools}
        return ReplayedCall("model", entry.name, shown, entry.node)
    kind = _KINDS.get(entry.kind, "tool")
    return ReplayedCall(kind, entry.name, decode_value(entry.arguments), entry.node)


def _payload(call: ReplayedCall | None) -> Any:
    """A call as the diff compares it: the tool or model, and what it was given."""
    if call is None:
        return None
    if call.kind == "model":
        request = call.arguments or {}
        return {"model": call.name, **request}
    if call.kind == "interrupt":
        return {"interrupt": call.name, "payload": call.arguments}
    return {"tool": call.name, "arguments": call.arguments}


def _named(node: str | None) -> str:
    return f" ({node})" if node else ""


def _ending(
    step: int,
    status: RunStatus,
    node: str | None,
    at: int,
    ended: RunStatus,
    last: str | None,
    done: StrictReplay,
) -> Divergence | None:
    """Where the replay ended against where the recording did: the same step and status,
    or a divergence at the first step one of them did not run."""
    if (at, ended) == (step, status):
        return None
    if status is not RunStatus.COMPLETED and ended is RunStatus.FAILED and at == step:
        return None  # the recording stopped in this step; the replay failed in it too
    why = f"the recording {status.value} after step {step}{_named(node)}"
    why += f"; the replay {ended.value} after step {at}{_named(last)}"
    error = done.error
    if isinstance(error, StepError):  # named without the scratch fork's run id
        why += f": step {error.step!r} raised {describe(error.cause)}"
    elif error is not None:
        why += f": {describe(error)}"
    first = min(at, step) + 1
    return Divergence(first, last if at > step else None, str(first), why)


__all__ = ["replay", "replay_file"]
