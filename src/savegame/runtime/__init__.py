"""Runs steps, applies the checkpoint policy, holds leases, resumes."""

from savegame.runtime.api import aresume, arun, resume, run
from savegame.runtime.context import StepContext
from savegame.runtime.execution import Observer
from savegame.runtime.policy import CheckpointPolicy, Durability
from savegame.runtime.workflow import END, Workflow

__all__ = [
    "END",
    "CheckpointPolicy",
    "Durability",
    "Observer",
    "StepContext",
    "Workflow",
    "aresume",
    "arun",
    "resume",
    "run",
]
