"""``savegame.langgraph``: the import path users type (``savegame[langgraph]``).

See :mod:`savegame.integrations.langgraph`.
"""

from savegame.integrations.langgraph import (
    MigrationReport,
    SavegameSaver,
    ThreadResult,
    durable_tool,
    migrate,
)

__all__ = ["MigrationReport", "SavegameSaver", "ThreadResult", "durable_tool", "migrate"]
