"""``savegame.langgraph``: the import path users type (``savegame[langgraph]``).

See :mod:`savegame.integrations.langgraph`.
"""

from savegame.integrations.langgraph import SavegameSaver, durable_tool

__all__ = ["SavegameSaver", "durable_tool"]
