"""``savegame.langgraph``: the import path users type (``savegame[langgraph]``).

See :mod:`savegame.integrations.langgraph`.
"""

from savegame.integrations.langgraph import SavegameSaver

__all__ = ["SavegameSaver"]
