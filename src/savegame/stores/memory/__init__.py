"""An in-process store: for tests, examples and runs that need no durability.

``memory://`` opens a fresh, private store; ``memory://NAME`` opens a store
shared by everything in the process that uses the same name, so a test can
run a workflow and inspect it through the public API with one URL.

The package: the store in ``_store``, its state and lookups in ``_state``, the storage
engine's methods in ``_storage``, schedules in ``_schedules``.
"""

from savegame.stores.memory._store import MemoryStore

__all__ = ["MemoryStore"]
