"""Workflows: named steps, an entry step, a state schema version and migrations."""

from __future__ import annotations

import difflib
import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from savegame.codec import Migration
from savegame.effects import Backoff, RetryOn, as_backoff, check_retries
from savegame.errors import ConfigurationError
from savegame.runtime._policy import CheckpointPolicy, Durability
from savegame.runtime._validate import check_workflow
from savegame.runtime._versions import check_version, derive
from savegame.workspace import WorkspaceSpec, as_workspace

#: Returned as the next step to end the run.
END = "__end__"

_BACKOFF = Backoff()
StepResult = tuple[Mapping[str, Any] | None, str]
StepFn = Callable[..., StepResult | Awaitable[StepResult]]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class StepSpec:
    """A registered step."""

    name: str
    fn: StepFn
    is_async: bool
    key: bool
    """A key step: always checkpointed after it runs, whatever the policy."""
    retries: int = 0
    """Executions after the first when the step raises one of ``retry_on``."""
    backoff: Backoff = _BACKOFF
    """The waits between executions."""
    timeout: float | None = None
    """Seconds one execution of an async step may take; then it raises TimedOutError."""
    retry_on: RetryOn = (Exception,)


@dataclass(eq=False)
class Workflow:
    """A named set of steps that savegame runs durably.

    Args:
        name: stable name, stored with every run.
        state_version: the schema version of this workflow's state; bump it and
            add a migration when the state's shape changes.
        migrations: ``{v: fn}`` where ``fn`` turns a version-``v`` state into version ``v+1``.
        policy: when to checkpoint (default: after every step).
        durability: ``"sync"`` (default) commits each checkpoint before the next
            step starts; ``"async"`` writes in a background thread (see CheckpointPolicy).
        compensate_on_failure: when a step fails, compensate the run's completed
            write effects at once (the run ends compensated or compensation_failed).

    Example::

        wf = Workflow("counter")

        @wf.step(entry=True)
        def tick(state, ctx):
            n = state.get("n", 0) + 1
            return {"n": n}, ("tick" if n < 10 else END)
    """

    name: str
    state_version: int = 1
    migrations: dict[int, Migration] = field(default_factory=dict)
    policy: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    durability: Durability = "sync"
    compensate_on_failure: bool = False
    """Undo completed write effects (saga) when a step fails, instead of leaving the run resumable."""
    check_mutations: bool = False
    """Debug aid (costs a canonical encoding of the state per step): refuse a step that
    changes a state key in place without returning it, which checkpoints would miss."""
    secrets: dict[str, str] = field(default_factory=dict)
    """State keys whose values are secrets: ``{state key: secret name}``. Saved as a
    reference to the name, resolved again from the secrets provider on load."""
    workspace: WorkspaceSpec = None
    """A directory the steps edit, snapshotted with every checkpoint and restored before
    the first step of a resume: a path, a :class:`~savegame.Workspace` (ignore patterns,
    size limit), or a function of the run id giving one (a directory per run). Part of
    the workflow, not of one call, so a worker resuming the run finds the same one."""
    version: str | None = None
    """The code version runs started from now record (:attr:`code_version`): declare one
    (a release tag, a date) to say when a change matters to runs in flight; without it,
    a digest of the steps' source. A worker given versions claims only runs of those."""
    steps: dict[str, StepSpec] = field(default_factory=dict, init=False)
    entry: str | None = field(default=None, init=False)
    defined_in: str | None = field(default=None, init=False)
    """Module name (or file path for ``__main__``) where the workflow was created, for resume."""
    _checked: tuple[Any, ...] | None = field(default=None, init=False, repr=False)
    """The steps and entry that passed :meth:`validate` last."""
    _derived: tuple[tuple[Any, ...], str] | None = field(default=None, init=False, repr=False)
    """The steps the derived version was computed from, and that version."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigurationError("a workflow needs a non-empty name")
        if self.state_version < 1:
            raise ConfigurationError(f"workflow {self.name!r}: state_version must be >= 1")
        if self.durability not in ("sync", "async"):
            raise ConfigurationError(
                f"workflow {self.name!r}: durability must be 'sync' or 'async', not {self.durability!r}"
            )
        if not callable(self.workspace):
            self.workspace = as_workspace(self.workspace)
        if self.version is not None:
            check_version(self.version, f"workflow {self.name!r}: version")
        frame = sys._getframe(2)  # caller of the dataclass __init__
        module = frame.f_globals.get("__name__")
        # Modules run as scripts or loaded from a file path are found again by path.
        if module == "__main__" or str(module).startswith("savegame_user_"):
            self.defined_in = frame.f_globals.get("__file__")
        else:
            self.defined_in = module

    @overload
    def step(self, fn: F, /) -> F: ...

    @overload
    def step(
        self,
        fn: None = None,
        /,
        *,
        entry: bool = False,
        name: str | None = None,
        checkpoint: bool = False,
        retries: int = 0,
        backoff: Backoff | float = ...,
        timeout: float | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
    ) -> Callable[[F], F]: ...

    def step(
        self,
        fn: StepFn | None = None,
        /,
        *,
        entry: bool = False,
        name: str | None = None,
        checkpoint: bool = False,
        retries: int = 0,
        backoff: Backoff | float = _BACKOFF,
        timeout: float | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
    ) -> Any:
        """Register a step; usable as ``@wf.step`` or ``@wf.step(entry=True, checkpoint=True)``.

        Args:
            entry: this step runs first.
            name: the step's name (default: the function's name).
            checkpoint: a key step, always checkpointed after it runs.
            retries: executions after the first when the step raises one of ``retry_on``
                (savegame's own errors are not retried, but for TimedOutError). Each failed
                execution is checkpointed (status running, its error and attempt number in
                the metadata) before the wait, so a run killed then goes on counting. The
                step's body runs again from its start, and its calls that have a result in
                the journal return it without being made again; a write in doubt follows
                the in-doubt rules (the run stops for a person unless retrying is safe).
            backoff: the waits between executions (seconds, or a Backoff).
            timeout: seconds one execution may take (async steps only: a sync step runs on
                the loop's thread, which cannot be stopped; give its tools a timeout). The
                step is cancelled at its next await and raises TimedOutError.
            retry_on: the exceptions worth another execution (default: any Exception).
        """

        def register(func: F) -> F:
            self.add_step(
                func, name=name, entry=entry, checkpoint=checkpoint, retries=retries,
                backoff=backoff, timeout=timeout, retry_on=retry_on,
            )  # fmt: skip
            return func

        if fn is not None:
            return register(fn)
        return register

    def add_step(
        self,
        fn: StepFn,
        *,
        name: str | None = None,
        entry: bool = False,
        checkpoint: bool = False,
        retries: int = 0,
        backoff: Backoff | float = _BACKOFF,
        timeout: float | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
    ) -> StepSpec:
        """Register ``fn`` as a step (the non-decorator form of :meth:`step`)."""
        step_name = name or getattr(fn, "__name__", None)
        if not step_name or step_name == END:
            raise ConfigurationError(f"workflow {self.name!r}: invalid step name {step_name!r}")
        if step_name in self.steps:
            raise ConfigurationError(f"workflow {self.name!r}: step {step_name!r} is defined twice")
        owner = f"workflow {self.name!r}, step {step_name!r}"
        kinds = check_retries(retries, timeout, retry_on, owner)
        is_async = inspect.iscoroutinefunction(fn)
        if timeout is not None and not is_async:
            raise ConfigurationError(
                f"{owner}: timeout= needs an async step; a sync step runs on the loop's own "
                "thread, which cannot be stopped (give its tools a timeout instead)"
            )
        spec = StepSpec(
            step_name, fn, is_async, checkpoint, retries, as_backoff(backoff), timeout, kinds
        )
        self.steps[step_name] = spec
        if entry:
            if self.entry is not None:
                raise ConfigurationError(
                    f"workflow {self.name!r}: two entry steps ({self.entry!r} and {step_name!r})"
                )
            self.entry = step_name
        return spec

    def migration(self, from_version: int) -> Callable[[Migration], Migration]:
        """Register the migration that upgrades a state from ``from_version`` to the next."""

        def register(func: Migration) -> Migration:
            if from_version in self.migrations:
                raise ConfigurationError(
                    f"workflow {self.name!r}: two migrations from version {from_version}"
                )
            self.migrations[from_version] = func
            return func

        return register

    def entry_step(self) -> str:
        if self.entry is None:
            if len(self.steps) == 1:
                return next(iter(self.steps))
            raise ConfigurationError(
                f"workflow {self.name!r} has no entry step; mark one with entry=True"
            )
        return self.entry

    def get_step(self, name: str) -> StepSpec:
        spec = self.steps.get(name)
        if spec is None:
            known = ", ".join(sorted(self.steps)) or "none"
            near = difflib.get_close_matches(name, list(self.steps), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigurationError(
                f"workflow {self.name!r} has no step {name!r}{hint} (steps: {known})"
            )
        return spec

    def validate(self) -> None:
        """Refuse a workflow that cannot run as written, before any step does its effects.

        Checked: it has steps and an entry step; every next step a step returns as a
        literal (``return update, "plan"``, either side of ``a if c else b``, a module
        constant) is a step of the workflow; every tool a step refers to by name has a
        ``compensate=`` that names a registered tool and an ``approval`` that is a bool
        or a function. Run, resume, submit and the CLI call it when they load the
        workflow; a next step computed at run time is still checked after the step.

        Raises:
            ConfigurationError: naming the workflow, the step and what is wrong, with
                the nearest known name.
        """
        seen = (tuple(self.steps), self.entry)
        if self._checked == seen:
            return
        check_workflow(self, END)
        self._checked = seen

    @property
    def code_version(self) -> str:
        """The version a run started now records: :attr:`version` when declared, else
        ``code-`` and a digest of the steps (see :func:`~savegame.runtime._versions.derive`)."""
        if self.version is not None:
            return self.version
        seen = (tuple(self.steps.items()), self.entry, self.state_version)
        if self._derived is None or self._derived[0] != seen:
            self._derived = (seen, derive(self))
        return self._derived[1]

    @property
    def workflow(self) -> Workflow:
        """Self, so a Workflow and an Agent can be passed where either is accepted."""
        return self
